"""Scale figures from watched admissions (pure): rates, latency against queue depth, drain, Jain's index."""

from __future__ import annotations

import pytest

from harness.scale import Admission, bucket_of, depth_at_submission, figures, peak_rate, percentile


def test_rates_latency_and_drain_of_a_steady_stream() -> None:
    # 100 jobs submitted one per 0.1 s, each admitted 2 s later: 10 jobs/s sustained, latency 2 s throughout
    jobs = [Admission("team-a" if i % 2 else "team-b", 1000 + i / 10, 1002 + i / 10, 8) for i in range(100)]
    found = figures(jobs, {"team-a": 1, "team-b": 1})
    assert found.admitted == 100 and found.sustained_per_s == pytest.approx(10.0)
    assert found.peak_per_s == pytest.approx(51 / 5)  # 51 admissions fit in a closed 5 s window
    assert found.latency_s == {"p50": pytest.approx(2.0), "p95": pytest.approx(2.0), "p99": pytest.approx(2.0)}
    assert found.drain_s == pytest.approx(11.9)
    assert found.jain == pytest.approx(1.0, abs=1e-3)


def test_queue_depth_at_submission_and_its_buckets() -> None:
    jobs = [Admission("a", 0, 10, 8), Admission("a", 1, 2, 8), Admission("a", 3, None, 8), Admission("a", 4, 5, 8)]
    assert depth_at_submission(jobs) == [0, 1, 1, 2]
    assert bucket_of(0) == "0-99" and bucket_of(150) == "100-499" and bucket_of(12000) == "10000+"
    found = figures(jobs, {"a": 1})
    assert found.admitted == 3 and found.drain_s is None and found.jain is None
    assert found.latency_by_depth == [("0-99", 3, 10)]


def test_jain_counts_only_while_every_tenant_waits() -> None:
    # team-b gets nothing while both wait, then everything: unfair while contended
    jobs = [Admission("team-a", 0, 1 + i, 8) for i in range(10)] + [Admission("team-b", 0, 11 + i, 8) for i in range(10)]
    assert figures(jobs, {"team-a": 1, "team-b": 1}).jain == pytest.approx(0.5, abs=0.01)


def test_percentile_and_peak_of_nothing() -> None:
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0 and percentile([1.0] * 5 + [9.0], 99) == 9.0
    assert peak_rate([]) == 0.0

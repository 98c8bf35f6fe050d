"""Scale figures from watched admissions (pure): rates, latency against queue depth, drain, Jain's index."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness import backends
from harness.jobs.model import JOB_LABEL, GangJob
from harness.criteria.scale.throughput import (Admission, bucket_of, busy_s, depth_at_submission, depth_points, figures,
                                               over_time, peak_rate, percentile)
from harness.config.profile import Tenant
from harness.scenarios.scale import FirstAdmission


def test_rates_latency_and_drain_of_a_steady_stream() -> None:
    # 100 jobs submitted one per 0.1 s, each admitted 2 s later: 10 jobs/s sustained, latency 2 s throughout
    jobs = [Admission("team-a" if i % 2 else "team-b", 1000 + i / 10, 1002 + i / 10, 8) for i in range(100)]
    found = figures(jobs, {"team-a": 1, "team-b": 1})
    assert found.admitted == 100 and found.sustained_per_s == pytest.approx(100 / 11.9)  # some job waited 11.9 s
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


def test_charts_are_cumulative_per_second_and_p95_per_depth_bucket() -> None:
    jobs = [Admission("a", 100.0, 100.4, 8), Admission("a", 100.2, 101.5, 8), Admission("a", 100.3, None, 8)]
    series = over_time(jobs)
    assert series["submitted"] == [(0.0, 1), (1.0, 3)] and series["admitted"] == [(1.0, 1), (2.0, 2)]
    [(depth, p95)] = depth_points(figures(jobs, {"a": 1}))
    assert depth == 0.0 and p95 == pytest.approx(1.3)
    assert over_time([]) == {}


def test_first_admission_from_replayed_events_of_job_objects_and_pods() -> None:
    """A job counts as admitted at its first event past admission: its own object (a Kueue Workload, by owner) or a
    pod of it bound; later events and other jobs' objects change nothing."""
    tenant = Tenant("a", "ns-a", "sa", 1.0, 8, {})
    jobs = [GangJob(f"s{i}-x", tenant, 1, 8) for i in range(3)]
    first = FirstAdmission(SimpleNamespace(backend=backends.ALL["volcano"]), jobs)  # type: ignore[arg-type]
    pending = {"metadata": {"name": "s0-x"}, "status": {"state": {"phase": "Pending"}}}
    first._job_event("ADDED", pending)
    assert first.at == {}
    first._job_event("MODIFIED", {"metadata": {"name": "s0-x"}, "status": {"state": {"phase": "Running"}}})
    first._pod_event("MODIFIED", {"metadata": {"name": "s1-x-0", "labels": {JOB_LABEL: "s1-x"}},
                                  "spec": {"nodeName": "gpu-node-9"}, "status": {"phase": "Pending"}})
    first._pod_event("ADDED", {"metadata": {"name": "other", "labels": {JOB_LABEL: "not-ours"}},
                               "spec": {"nodeName": "gpu-node-9"}, "status": {"phase": "Running"}})
    seen = dict(first.at)
    first._job_event("MODIFIED", {"metadata": {"name": "s0-x"}, "status": {"state": {"phase": "Completed"}}})
    assert set(seen) == {"s0-x", "s1-x"} and first.at == seen and not first.all_admitted.is_set()
    kueue = FirstAdmission(SimpleNamespace(backend=backends.ALL["kueue"]), jobs)  # type: ignore[arg-type]
    workload = {"metadata": {"name": "job-s2-x-1a2b3", "ownerReferences": [{"kind": "Job", "name": "s2-x"}]},
                "status": {"conditions": [{"type": "QuotaReserved", "status": "True"},
                                          {"type": "Admitted", "status": "True"}]}}
    kueue._job_event("ADDED", workload)
    assert set(kueue.at) == {"s2-x"}


def test_sustained_rate_is_over_the_time_jobs_waited_so_one_burst_is_not_a_high_rate() -> None:
    # a throttled scheduler: nothing for 38 s, then 29 jobs at once, 171 never admitted before the end at 45 s
    jobs = ([Admission("a", 1000 + i / 50, 1038 + i / 1000, 8) for i in range(29)]
            + [Admission("a", 1000.6 + i / 50, None, 8) for i in range(171)])
    assert figures(jobs, {"a": 1}, until=1045).sustained_per_s == pytest.approx(29 / 45)
    assert busy_s([Admission("a", 0, 10, 8), Admission("a", 2, 4, 8), Admission("a", 20, 25, 8)], 30) == 15

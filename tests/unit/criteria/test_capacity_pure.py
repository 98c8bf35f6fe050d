"""inference.capacity's knee from sweep stages, and inference-perf's per-stage reports split into stages: pure."""

from __future__ import annotations

from typing import Any

from harness.core.estimate import FAIL, INCONCLUSIVE, PASS
from harness.criteria.inference.capacity import REQUEST_TIMEOUT_S, Stage, knee
from harness.criteria.inference.latency import LoadReport
from harness.serving.loadgen import stage_reports

LIMITS = {"min_capacity_rps": 4.0, "slo_ttft_p99_s": 0.5, "slo_itl_p99_s": 0.2}


def stage(rate: float, ttft: list[float], failed: int = 0, itl: float = 0.05) -> Stage:
    n = len(ttft)
    report = LoadReport(n + failed, n, failed, {}, {}, {}, 0.0, rate, n,
                        {"ttft": tuple(ttft), "itl": (itl,) * (10 * n), "e2e": tuple(t + 1 for t in ttft)})
    return Stage(rate, report)


def test_a_stage_meets_the_slo_whole_misses_it_whole_or_cannot_tell() -> None:
    assert stage(2, [0.1] * 300).verdict(LIMITS)[0] == PASS
    assert stage(2, [0.9] * 300).verdict(LIMITS)[0] == FAIL
    assert stage(2, [0.1] * 294 + [0.9] * 6).verdict(LIMITS)[0] == INCONCLUSIVE  # p99 right at the tail
    assert stage(2, [0.1] * 300, itl=0.3).verdict(LIMITS)[0] == FAIL  # inter-token latency is an SLO of its own
    verdict, said = stage(2, [0.1] * 280, failed=20).verdict(LIMITS)  # 6.7 % failed: past the p99
    assert verdict == FAIL and f"{REQUEST_TIMEOUT_S:g} s" in said[0], said


def test_the_knee_runs_from_the_last_stage_met_whole_to_the_first_missed_whole() -> None:
    stages = [stage(8, [0.9] * 300), stage(2, [0.1] * 300), stage(4, [0.1] * 300),
              stage(6, [0.1] * 294 + [0.9] * 6)]
    found = knee(stages, LIMITS)
    assert (found.value, found.low, found.high) == (6, 4, 8), found
    assert "2, 4, 6, 8 req/s" in found.how and "missed whole at 8" in found.how


def test_with_no_stage_missed_the_knee_reaches_the_saturation_point_and_an_early_miss_ends_it() -> None:
    found = knee([stage(r, [0.1] * 300) for r in (1, 3, 5)], LIMITS)
    assert (found.value, found.low, found.high) == (5, 5, 5) and "up to the saturation point" in found.how
    found = knee([stage(1, [0.9] * 300), stage(3, [0.1] * 300)], LIMITS)  # missed at the lowest rate already
    assert (found.value, found.low, found.high) == (0, 0, 1)


def test_inference_perfs_per_request_entries_fall_to_the_stages_in_turn() -> None:
    def summary(rate: float, count: int) -> dict[str, Any]:
        return {"load_summary": {"count": count, "requested_rate": rate}, "successes": {"count": count},
                "failures": {"count": 0}}

    def entry(start: float, ttft: float) -> dict[str, Any]:
        return {"start_time": start, "error": None,
                "computed_metrics": {"time_to_first_token": ttft, "request_latency": ttft + 1,
                                     "inter_token_latencies": [0.01]}}

    entries = [entry(10.5, 0.3), entry(0.1, 0.1), entry(10.0, 0.2), entry(0.2, 0.1), entry(11.0, 0.4)]
    found = stage_reports([summary(1.0, 2), summary(3.0, 3)], entries)
    assert [(rate, report.samples["ttft"]) for rate, report in found] == [(1.0, (0.1, 0.1)), (3.0, (0.2, 0.3, 0.4))]

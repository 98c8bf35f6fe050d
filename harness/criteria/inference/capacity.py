"""Inference 6 — capacity: open-loop (Poisson) load swept across the serving stack's saturation point, and the
highest offered rate at which every stage still meets the SLO (the knee), with the interval the stages allow.

Each stage meets the SLO where its TTFT and inter-token p99 (order-statistic intervals over its requests) are
within the profile's limits; a request that failed counts as answered at the request timeout (it missed every limit,
as goodput counts it), so more than 1 % failed misses the SLO. The knee is the highest rate of the stages that all
meet it from the lowest up: the interval runs from the highest rate every stage up to which met it whole, to the lowest rate of a
stage that missed it whole (else the sweep's top stage, its saturation point: no higher rate is sustained).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.core import estimate as est
from harness.criteria import AT_LEAST, AT_MOST, Chart, Criterion, Threshold, register
from harness.criteria.inference.latency import REQUEST_TIMEOUT_S, LoadReport

CRITERION = register(Criterion(
    "inference.capacity",
    "Swept with open-loop (Poisson) load to saturation, the serving stack meets its latency SLO (TTFT and "
    "inter-token p99, error rate) up to the required request rate.",
    (Threshold("min_capacity_rps", "the highest offered request rate at which every stage met the SLO (the knee)",
               AT_LEAST, " req/s"),
     Threshold("slo_ttft_p99_s", "the SLO a stage meets: 99th percentile time to first token", AT_MOST, " s"),
     Threshold("slo_itl_p99_s", "the SLO a stage meets: 99th percentile inter-token latency", AT_MOST, " s")),
    (Chart("capacity", "p99 latency against the offered rate, per sweep stage", "seconds",
           "requests/s offered (Poisson)", "points"),)))

SLO = (("ttft", "slo_ttft_p99_s"), ("itl", "slo_itl_p99_s"))


def slo_of(limits: dict[str, float]) -> dict[str, float]:
    """The SLO as the load generator's goodput constraints (seconds by metric) from the profile's limits."""
    return {key: limits[limit] for key, limit in SLO}


@dataclass(frozen=True)
class Stage:
    """One stage of the sweep: the rate offered and what the generator measured."""

    rate: float
    report: LoadReport

    def p99(self, key: str) -> est.Estimate:
        samples = (*self.report.samples.get(key, ()), *(REQUEST_TIMEOUT_S,) * self.report.failed)
        return est.percentile(samples or (REQUEST_TIMEOUT_S,), 0.99)

    def verdict(self, limits: dict[str, float]) -> tuple[str, list[str]]:
        """PASS where every SLO limit is met by the whole interval, FAIL where any is missed whole, else
        INCONCLUSIVE; with the measured values in words."""
        decided, said = [], []
        for key, limit in SLO:
            p99 = self.p99(key)
            decided.append(est.decide(p99, limits[limit], "<="))
            said.append(f"{key} p99 {p99.rounded(3).describe(' s')}")
        verdict = est.FAIL if est.FAIL in decided else est.INCONCLUSIVE if est.INCONCLUSIVE in decided else est.PASS
        return verdict, said


def knee(stages: Sequence[Stage], limits: dict[str, float]) -> est.Estimate:
    """Pure: the highest offered rate at which the SLO holds, from the stages (sorted by rate here)."""
    ordered = sorted(stages, key=lambda s: s.rate)
    if not ordered:
        return est.exact(0.0)
    verdicts = [s.verdict(limits)[0] for s in ordered]

    def highest(counts: tuple[str, ...]) -> float:
        """The rate of the last stage of an unbroken run, from the lowest up, whose verdicts are in `counts`."""
        rate = 0.0
        for stage, verdict in zip(ordered, verdicts):
            if verdict not in counts:
                break
            rate = stage.rate
        return rate

    point = highest((est.PASS, est.INCONCLUSIVE))  # stages not missed whole
    low = highest((est.PASS,))  # stages met whole
    missed = [s.rate for s, v in zip(ordered, verdicts) if v == est.FAIL and s.rate > low]
    high = min(missed) if missed else ordered[-1].rate
    how = (f"from {len(ordered)} stages at {', '.join(f'{s.rate:g}' for s in ordered)} req/s: met whole up to "
           f"{low:g}, " + (f"missed whole at {high:g}" if missed else "none missed whole up to the saturation point"))
    return est.Estimate(point, low, max(high, point), how, "exact")

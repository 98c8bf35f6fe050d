"""Batch training 5 — queue wait: submission-to-admission per queue, percentiles, and agreement with the
scheduler's own histogram."""

from __future__ import annotations

from dataclasses import dataclass

from harness.criteria import AT_MOST, Chart, Criterion, Threshold, register
from harness.core.timeline import percentile

CRITERION = register(Criterion(
    "training.queue_wait",
    "p50/p95 time from submission to admission per queue, from the harness's timeline and from the scheduler's "
    "metrics, within the threshold and in agreement.",
    (Threshold("p95_s", "95th percentile submission-to-admission seconds per queue", AT_MOST, " s"),
     Threshold("metric_tolerance_s", "allowed harness vs scheduler-metric disagreement", AT_MOST, " s")),
    (Chart("pods", "pods over time", "pods"),)))


@dataclass(frozen=True)
class WaitSummary:
    queue: str
    count: int
    p50_s: float
    p95_s: float


def summarize(queue: str, waits: list[float]) -> WaitSummary:
    return WaitSummary(queue, len(waits), percentile(waits, 50), percentile(waits, 95))


def bucket_around(bounds: list[float], value: float) -> tuple[float, float]:
    """The histogram bucket [lower, upper] a quantile estimate fell in: finer than that it cannot resolve.
    Prometheus answers the top finite bound for a quantile in the +Inf bucket: that one is [top, inf)."""
    if bounds and value >= max(bounds):
        return max(bounds), float("inf")
    lower = 0.0
    for upper in sorted(bounds):
        if value <= upper:
            return lower, upper
        lower = upper
    return lower, float("inf")


def disagreement(harness_p95: float, metric_p95: float, bounds: list[float]) -> float:
    """Seconds between the harness's p95 and the metric's bucket around its p95 (0 inside it)."""
    lower, upper = bucket_around(bounds, metric_p95) if bounds else (metric_p95, metric_p95)
    return max(0.0, lower - harness_p95, harness_p95 - upper)


Buckets = dict[float, float]  # upper bound (le, seconds; inf for +Inf) -> cumulative count


def bucket_delta(before: Buckets, after: Buckets) -> Buckets:
    """Pure: the histogram of what was observed between two readings of its cumulative buckets."""
    return {le: after[le] - before.get(le, 0.0) for le in after}


def bucket_quantile(q: float, buckets: Buckets) -> float | None:
    """Pure: the q-quantile of a cumulative histogram, as Prometheus' histogram_quantile computes it (linear
    inside the bucket; the highest finite bound when it falls in +Inf); None when nothing was observed."""
    ordered = sorted(buckets.items())
    if not ordered or ordered[-1][1] <= 0:
        return None
    rank = q * ordered[-1][1]
    lower, below = 0.0, 0.0
    for upper, count in ordered:
        if count >= rank:
            if upper == float("inf"):
                return lower
            return upper if count == below else lower + (upper - lower) * (rank - below) / (count - below)
        lower, below = upper, count
    return lower

"""Batch training 2 — queue fairness: tenants with unequal weights saturate the cluster, one of them
arriving late; each tenant's share of GPU-seconds over the contended window against its configured
share, and how long the late tenant took to get its share.

A first-come-first-served scheduler serves the early tenant's backlog first, so the late tenant's
share over the contended window stays near zero: the scenario tells fair from FIFO.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harness.core.estimate import GROUPED, Estimate, duration, grouped, percentile, quotient
from harness.criteria import AT_LEAST, AT_MOST, Chart, Criterion, Threshold, register

CRITERION = register(Criterion(
    "training.queue_fairness",
    "Tenants with configured weights saturate the cluster, one arriving late; their measured share of "
    "GPU-seconds over the contended window matches the configured share (Jain's index, largest deviation), and "
    "the late tenant holds its share within the threshold.",
    (Threshold("min_jain_index", "lowest acceptable Jain's fairness index of measured/configured shares (0..1]",
               AT_LEAST),
     Threshold("max_share_deviation", "largest acceptable |measured - configured| share", AT_MOST),
     Threshold("late_share_within_jobs", "time from the late tenant's first submission to it holding its "
               "configured share of the GPUs, in the early tenant's job lengths (the median time one of its jobs "
               "held its GPUs, as measured: a RayJob's own cluster start and teardown count in it)", AT_MOST,
               " job lengths")),
    (Chart("shares", "shares of the GPUs in use over the contended window", "share"),
     Chart("pods", "pods over time", "pods"))))


@dataclass(frozen=True)
class Interval:
    tenant: str
    start: float
    end: float
    gpus: int


def tenant_intervals(running: list[tuple[str, float, float]], tenants: list[str], prefix: str,
                     gpus: int) -> list[Interval]:
    """(pod, start, end) spans as their tenants' intervals: a pod named `{prefix}{tenant}-...` is the tenant's; others
    are left out."""
    return [Interval(owner, start, end, gpus) for pod, start, end in running
            if (owner := next((t for t in tenants if pod.startswith(f"{prefix}{t}-")), None))]


def gpu_seconds(intervals: list[Interval], window: tuple[float, float]) -> dict[str, float]:
    """GPU-seconds each tenant held inside `window`."""
    lo, hi = window
    totals: dict[str, float] = {}
    for iv in intervals:
        overlap = max(0.0, min(iv.end, hi) - max(iv.start, lo))
        totals[iv.tenant] = totals.get(iv.tenant, 0.0) + overlap * iv.gpus
    return totals


def shares(totals: dict[str, float], tenants: list[str]) -> dict[str, float]:
    whole = sum(totals.get(t, 0.0) for t in tenants)
    return {t: (totals.get(t, 0.0) / whole if whole else 0.0) for t in tenants}


def jain_index(measured: dict[str, float], expected: dict[str, float]) -> float:
    """Jain's index of the tenants' measured/expected ratios: 1.0 when every tenant got its share."""
    ratios = [measured[t] / expected[t] for t in expected if expected[t] > 0]
    if not ratios or not any(ratios):
        return 0.0
    return sum(ratios) ** 2 / (len(ratios) * sum(r * r for r in ratios))


def max_deviation(measured: dict[str, float], expected: dict[str, float]) -> float:
    return max(abs(measured.get(t, 0.0) - expected[t]) for t in expected)


def with_interval(intervals: list[Interval], window: tuple[float, float], expected: dict[str, float],
                  index: Callable[[dict[str, float], dict[str, float]], float]) -> Estimate:
    """Pure: `index` (jain_index, max_deviation) of the tenants' shares over the whole window, with its interval from
    a bootstrap over the jobs each tenant ran in it (stratified: each tenant's own jobs resampled, its count kept;
    a job cut by the window's ends weighs what it held inside it)."""
    inside = [iv for iv in intervals if iv.end > window[0] and iv.start < window[1]]
    held: dict[str, list[float]] = {t: [] for t in expected}
    for tenant, seconds in ((iv.tenant, gpu_seconds([iv], window).get(iv.tenant, 0.0)) for iv in inside):
        if tenant in held:
            held[tenant].append(seconds)
    return grouped(index.__name__, held, expected,
                   f"{index.__name__} over the window, 95 % bootstrap over the jobs of each tenant "
                   f"({', '.join(f'{t} {len(v)}' for t, v in held.items())})").rounded(4)


def contended_window(pending_since: dict[str, float], drained_at: dict[str, float]) -> tuple[float, float]:
    """From when every tenant had work waiting to when the first tenant ran out of waiting work."""
    return max(pending_since.values()), min(drained_at.values())


def gpus_in_use(intervals: list[Interval], tenant: str, at: float) -> int:
    return sum(iv.gpus for iv in intervals if iv.tenant == tenant and iv.start <= at < iv.end)


def time_to_share(intervals: list[Interval], tenant: str, arrived: float, entitled_gpus: int) -> float | None:
    """Seconds from `arrived` until the tenant first held `entitled_gpus` GPUs at once (None: never)."""
    for start in sorted(iv.start for iv in intervals if iv.tenant == tenant and iv.start >= arrived):
        if gpus_in_use(intervals, tenant, start) >= entitled_gpus:
            return start - arrived
    return None


def hold_times(intervals: list[Interval], tenant: str, before: float) -> list[float]:
    """How long each of the tenant's pods held its GPUs, of those that gave them back before `before`."""
    return [iv.end - iv.start for iv in intervals if iv.tenant == tenant and iv.end < before]


def in_job_lengths(took_s: float, holds: list[float], lag_s: float) -> Estimate:
    """Pure: a wait (harness clock, observed up to `lag_s` late) in units of the median hold time of `holds`, with the
    interval that the wait's own spread and the median's order-statistic interval allow together."""
    median = percentile(holds, 0.5)
    return quotient(duration(took_s, 0.0, lag_s), median, f"{took_s:.1f} s over the median of {len(holds)} job "
                    f"lengths, {median.value:.1f} s [{median.low:.1f}, {median.high:.1f}]").rounded(3)


def entitled(share: float, capacity: int, job_gpus: int) -> int:
    """The GPUs a share of the cluster entitles a tenant to, in whole jobs (at least one job)."""
    return max(job_gpus, int(share * capacity // job_gpus) * job_gpus)


def share_series(intervals: list[Interval], window: tuple[float, float], tenants: list[str],
                 step_s: float) -> dict[str, list[tuple[float, float]]]:
    """Each tenant's share of GPUs in use, sampled every `step_s` over the window (for the chart)."""
    series: dict[str, list[tuple[float, float]]] = {t: [] for t in tenants}
    t = window[0]
    while t <= window[1]:
        in_use = {x: gpus_in_use(intervals, x, t) for x in tenants}
        whole = sum(in_use.values())
        for x in tenants:
            series[x].append((t - window[0], in_use[x] / whole if whole else 0.0))
        t += step_s
    return series


def over_shares(index: Callable[[dict[str, float], dict[str, float]], float]
                ) -> Callable[[dict[str, float], dict[str, float]], float]:
    """`index` of the tenants' shares of their GPU-seconds totals against the configured shares."""
    return lambda totals, configured: index(shares(totals, list(configured)), configured)


# by name, so an estimate pooled over repeated runs is made again from them (core.estimate.pool)
GROUPED.update({index.__name__: over_shares(index) for index in (jain_index, max_deviation)})

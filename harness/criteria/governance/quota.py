"""Governance 1 — quota: a tenant's jobs within its quota are admitted; a job that would take it beyond its
limit (limit_gpus: quota plus what it may borrow) is held, with the scheduler's reason; a GPU ResourceQuota
in a tenant's namespace refuses a pod beyond it at creation."""

from __future__ import annotations

from harness.criteria import AT_LEAST, AT_MOST, Chart, Criterion, Threshold, register
from harness.criteria.training.queue_fairness import Interval

CRITERION = register(Criterion(
    "governance.quota",
    "Within its quota a tenant's jobs are admitted within the threshold; a job beyond its limit (quota plus "
    "borrowing) is held for the whole observation window with the scheduler's own reason, and the tenant never "
    "holds more GPUs than its limit; a GPU ResourceQuota refuses a pod beyond it at creation (no pod created).",
    (Threshold("admit_within_s", "seconds from submission to every job within the quota running", AT_MOST, " s"),
     Threshold("max_gpus_over_limit", "GPUs the tenant held beyond its limit_gpus at any moment (0)", AT_MOST,
               " GPUs"),
     Threshold("held_for_s", "seconds a job beyond the limit must stay held (the observation window)", AT_LEAST,
               " s"),
     Threshold("max_pods_over_resourcequota", "pods created beyond a namespace's GPU ResourceQuota (0)", AT_MOST,
               " pods")),
    (Chart("gpus", "GPUs the tenant held", "GPUs"),)))


def peak_gpus(intervals: list[Interval]) -> int:
    """The most GPUs held at one moment over the intervals (each starts holding, ends releasing)."""
    events = sorted([(iv.start, iv.gpus) for iv in intervals] + [(iv.end, -iv.gpus) for iv in intervals],
                    key=lambda e: (e[0], e[1]))  # a release before a start at the same instant
    held = peak = 0
    for _, change in events:
        held += change
        peak = max(peak, held)
    return peak


HOLD_PAST_S = 1.0  # a hold is watched this long past its threshold: its end, seen up to the observation lag late,
# then decides (watched to the threshold exactly, the interval always straddles it)


def held_for(submitted_at: float, started_at: float | None, window_end: float) -> float:
    """How long a job stayed held: until it started, or the whole window when it never did."""
    return max(0.0, (started_at if started_at is not None else window_end) - submitted_at)


def gpus_over_time(intervals: list[Interval], start: float, end: float, step_s: float) -> list[tuple[float, float]]:
    """GPUs held, sampled every `step_s` (for the chart)."""
    points, t = [], start
    while t <= end:
        points.append((round(t - start, 3), float(sum(iv.gpus for iv in intervals if iv.start <= t < iv.end))))
        t += step_s
    return points

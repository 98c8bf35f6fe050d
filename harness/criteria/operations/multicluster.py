"""Operations 3 — one queue over several clusters (Kueue MultiKueue): jobs submitted to the manager's queue run on a
worker with room, the manager's view of the GPUs in use is the workers' together, a worker taken away mid-run has
its jobs dispatched again within a threshold with none lost or run twice, and each tenant's GPU-hours read on the
manager equal the sums read on the clusters that ran them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from harness.core.objects import parse_time
from harness.criteria import AT_MOST, Criterion, Threshold, register

CRITERION = register(Criterion(
    "operations.multicluster",
    "Jobs submitted to one queue on a manager cluster run on a worker cluster with room; the manager's view of the "
    "GPUs in use equals the workers' together; a worker taken away mid-run has its jobs running on another worker "
    "within a threshold, none lost and none running twice; each tenant's GPU-hours on the manager equal the sums "
    "on the clusters that ran them.",
    (Threshold("max_dispatch_s", "seconds from a job's submission on the manager to its pods running on a worker",
               AT_MOST, " s"),
     Threshold("max_usage_view_error_gpus", "GPUs between the manager queue's usage and the workers' queues' usage "
               "together, every job running", AT_MOST, " GPUs"),
     Threshold("max_redispatch_s", "seconds from a worker taken away to each of its jobs running on another worker",
               AT_MOST, " s"),
     Threshold("max_jobs_lost", "jobs not finished on the manager by the case's end", AT_MOST, " jobs"),
     Threshold("max_jobs_run_twice", "jobs seen running on two workers at once", AT_MOST, " jobs"),
     Threshold("max_gpu_hours_error", "per tenant, the relative difference between the GPU-hours the manager reads "
               "and the sum the clusters that ran its jobs read", AT_MOST, ""))))


def seconds_between(start: str | None, end: str | None) -> float | None:
    """Pure: seconds between two API server times, None if either is missing."""
    begin, finish = parse_time(start), parse_time(end)
    return (finish - begin).total_seconds() if begin and finish else None


def job_gpu_seconds(job: dict[str, Any], gpus: float) -> float | None:
    """Pure: GPU-seconds a batch Job held, from its status (startTime to completionTime), None before it ended."""
    status = job.get("status") or {}
    held = seconds_between(status.get("startTime"), status.get("completionTime"))
    return None if held is None else held * gpus


def run_twice(samples: Iterable[dict[str, set[str]]]) -> set[str]:
    """Pure: the jobs that one sample saw running on more than one worker (sample: job -> workers running it)."""
    return {job for sample in samples for job, workers in sample.items() if len(workers) > 1}


def relative_error(manager: dict[str, float], clusters: dict[str, float]) -> float:
    """Pure: the largest relative difference, over tenants, between the manager's sum and the clusters' sum."""
    errors = [abs(manager.get(t, 0.0) - clusters.get(t, 0.0)) / max(manager.get(t, 0.0), clusters.get(t, 0.0))
              for t in set(manager) | set(clusters) if max(manager.get(t, 0.0), clusters.get(t, 0.0)) > 0]
    return round(max(errors, default=0.0), 4)

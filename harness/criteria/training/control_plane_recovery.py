"""Batch training 6 — control-plane recovery: the scheduler's controller restarts in a busy queue; nothing is lost.

Pure measurement over the binds the harness saw (job, pod uid, when): the time from the controller
being back to the first admission of a job that waited through the restart, the jobs never admitted,
the jobs admitted twice (more pods bound than the job has), and the running jobs disturbed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from harness.criteria import AT_MOST, Chart, Criterion, Threshold, register

CRITERION = register(Criterion(
    "training.control_plane_recovery",
    "With jobs running and jobs pending, the scheduler's controller restarts (capacity frees while it is down); "
    "admissions resume within the threshold once it is back, no pending job is lost, none is admitted twice, "
    "and the jobs running through the restart keep their pods.",
    (Threshold("resume_within_s", "seconds from the controller back to the first admission of a waiting job",
               AT_MOST, " s"),
     Threshold("max_jobs_lost", "jobs pending at the restart and never admitted afterwards", AT_MOST, " jobs"),
     Threshold("max_admitted_twice", "jobs with more pods bound than they have (admitted again)", AT_MOST, " jobs"),
     Threshold("max_running_disturbed", "jobs running through the restart whose pods were replaced or stopped",
               AT_MOST, " jobs")),
    (Chart("pods", "pods over time", "pods"),)))


@dataclass(frozen=True)
class Bind:
    job: str
    pod_uid: str
    at: float  # epoch seconds the harness saw the pod bound


def first_admission_after(binds: Iterable[Bind], jobs: set[str], since: float) -> float | None:
    """Seconds from `since` to the first bind of a pod of `jobs` at or after it; None when there was none."""
    times = [b.at for b in binds if b.job in jobs and b.at >= since]
    return min(times) - since if times else None


def _bound(binds: Iterable[Bind]) -> dict[str, set[str]]:
    """job -> the distinct pods of it that were bound."""
    bound: dict[str, set[str]] = {}
    for b in binds:
        bound.setdefault(b.job, set()).add(b.pod_uid)
    return bound


def lost(binds: Iterable[Bind], pods_per_job: dict[str, int]) -> list[str]:
    """Jobs with fewer distinct pods bound than they have: never (fully) admitted."""
    bound = _bound(binds)
    return sorted(j for j, n in pods_per_job.items() if len(bound.get(j, ())) < n)


def admitted_twice(binds: Iterable[Bind], pods_per_job: dict[str, int]) -> list[str]:
    """Jobs with more distinct pods bound than they have (no pod of them was failed on purpose)."""
    return sorted(j for j, uids in _bound(binds).items() if j in pods_per_job and len(uids) > pods_per_job[j])


def disturbed(before: dict[str, set[str]], running_after: dict[str, set[str]]) -> list[str]:
    """Jobs whose running pods (uids) after the restart are not exactly those before it."""
    return sorted(j for j, uids in before.items() if running_after.get(j, set()) != uids)

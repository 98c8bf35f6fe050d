"""Shared steps of the training suite: cluster size, job predicates, evidence from timelines."""

from __future__ import annotations

import time
from typing import Any

import pytest

from harness.backends import Backend
from harness.jobs.model import GangJob, job_of
from harness.config.profile import Profile, Tenant
from harness.record.evidence import Evidence
from harness.targets.target import Target
from harness.core.timeline import Timeline, pods_over_time
from harness.cluster.tracker import Objects
from harness.jobs.system import JobSystem
from harness.cluster.wait import poll
from harness.core.errors import WaitTimeout

LONG_RUN_S = 3600.0  # jobs that must keep their GPUs until the test releases them


def require(target: Target, backend: Backend, *capabilities: str) -> None:
    """SKIP, with the backend's reason, when it lacks a capability this case needs on this target."""
    for capability in capabilities:
        reason = backend.lacks(capability, target.features)
        if reason:
            pytest.skip(reason)


def gpu_nodes(jobs: JobSystem, profile: Profile) -> int:
    """Nodes offering a whole node's worth of GPUs (profile gpu.per_node)."""
    return jobs.capacity_nodes(profile.gpu.resource, profile.gpu.per_node)


def belongs(pod: dict[str, Any], job: GangJob) -> bool:
    return job_of(pod) == job.name


def state_is(workloads: JobSystem, job: GangJob, *states: str) -> Any:
    def check(objects: Objects) -> bool:
        status = workloads.status_of(job, objects)
        return status is not None and status.state in states
    return check


def failed_reason(workloads: JobSystem, job: GangJob, objects: Objects) -> str | None:
    """Why a wait for the job ends early: it failed (with the scheduler's reason)."""
    status = workloads.status_of(job, objects)
    return f"job failed: {status.reason or 'no reason given'}" if status and status.state == "failed" else None


def bound_pods(objects: Objects, job: GangJob) -> int:
    return sum(1 for p in objects.values() if belongs(p, job) and (p.get("spec") or {}).get("nodeName"))


def wait_running_for_its_scheduler(api: Any, backend: Backend, jobs: list[GangJob], timeout_s: float) -> None:
    """Until the placing scheduler records each of `jobs` (started) as running (Backend.not_yet_running): a case
    that preempts running work measures it once the work runs, not while its scheduler still places it."""
    if not jobs:
        return
    late = poll(lambda: backend.not_yet_running(api, jobs[0].tenant.namespace, [j.name for j in jobs]),
                lambda left: not left, timeout_s)
    if late:
        raise WaitTimeout(f"{len(late)} of {len(jobs)} jobs bound but not running for "
                          f"{backend.placed_by or backend.name} after {timeout_s:.0f}s: {', '.join(late)}")


class Refusal:
    """When the scheduler had refused a gang: every pod Unschedulable (its GangWatch), or, where a queue creates no pod
    yet, the job held with the queue's reason while it has no pod (cleared when pods appear: a job that merely has
    not made its pods yet is not refused)."""

    def __init__(self, workloads: JobSystem, job: GangJob, watch: Any, jobs: Any, pods: Any) -> None:
        self.workloads, self.job, self.watch, self.jobs, self.pods = workloads, job, watch, jobs, pods
        self.held_since: float | None = None

    def since(self) -> float | None:
        status = self.workloads.status_of(self.job, self.jobs.objects)
        held = status is not None and status.state == "queued" and bool(status.reason) and \
            not any(belongs(p, self.job) for p in self.pods.objects.values())
        if not held:
            self.held_since = None
        elif self.held_since is None:
            self.held_since = time.time()
        refused: float | None = self.watch.refused_since()
        return refused if refused is not None else self.held_since


def attach_timeline(evidence: Evidence, timeline: Timeline, start: float) -> None:
    """The timeline (seconds from the test's start) and the pods-over-time series drawn from it."""
    evidence.timeline = [{**row, "t": round(float(str(row["seen_at"])) - start, 3)} for row in timeline.as_rows()]
    evidence.series["pods"] = pods_over_time(evidence.timeline)


def first_seen(timeline: Timeline, kind: str, name: str, *states: str) -> float | None:
    return next((t.seen_at for t in timeline.of(kind, name) if t.state in states), None)


WAITING = ("queued", "preempted")


def wait_until_a_tenant_has_none_waiting(workloads: JobSystem, tenants: tuple[Tenant, ...],
                                         jobs: dict[str, list[GangJob]], timeout_s: float,
                                         hold_until: float | None = None) -> dict[str, list[str]]:
    """Block until some tenant has every job started (none queued or preempted back); return each tenant's
    jobs still waiting then. Events of every tenant's jobs and members wake the one wait. With `hold_until` (an
    epoch), a contention observed until then: it returns then, or sooner once a tenant has none waiting."""
    trackers = {t.name: workloads.jobs(t.namespace) for t in tenants}
    woken = trackers[tenants[0].name]
    for tenant in tenants:
        for tracker in (trackers[tenant.name], workloads.members(tenant.namespace)):
            tracker.on_event(lambda _event, _obj: woken.poke())

    def waiting() -> dict[str, list[str]]:
        return {t.name: [j.name for j in jobs[t.name]
                         if (s := workloads.status_of(j, trackers[t.name].objects)) is None or s.state in WAITING]
                for t in tenants}

    if hold_until is not None:
        woken.hold(hold_until - time.time(), until=lambda: any(not w for w in waiting().values()))
        return waiting()
    woken.wait_until("a tenant has no job left waiting", lambda _: any(not w for w in waiting().values()),
                     timeout_s, describe=lambda _: ", ".join(f"{t}: {len(w)} waiting" for t, w in waiting().items()))
    return waiting()

"""Shared steps of the governance suite: which tenant borrows, GPUs held, why a job is held."""

from __future__ import annotations

import time

import pytest
from kubernetes import client

from harness.cluster.apply import dynamic_client
from harness.backends.base import QueueUsage
from harness.cluster.wait import poll
from harness.jobs.model import GangJob
from harness.criteria.training.queue_fairness import Interval
from harness.core.errors import WaitTimeout
from harness.jobs.system import JobSystem
from harness.config.profile import Profile, Tenant
from harness.core.timeline import running_intervals
from suites.training.common import belongs, first_seen, state_is

STARTED = ("admitted", "running", "succeeded")
METRIC_SETTLE_S = 30.0  # for a queue's status and a few scrapes of its metric to show what the pods hold


def queue_gpus(api: client.ApiClient, usage: QueueUsage, queue: str, resource: str, expected: float,
               within: float = 1e-6) -> float:
    """GPUs the queue object says it holds, waited for (its controller updates the status on its own schedule)
    until it shows `expected` (what the running pods hold, `within` a tolerance) or the settle time is over; the
    last reading."""
    return poll(lambda: queue_held(api, usage, queue, resource), lambda held: abs(held - expected) <= within,
                METRIC_SETTLE_S)


def queue_held(api: client.ApiClient, usage: QueueUsage, queue: str, resource: str) -> float:
    """GPUs the queue object says it holds now."""
    queues = dynamic_client(api).resources.get(api_version=usage.api_version, kind=usage.kind)
    return usage.held(queues.get(name=queue).to_dict(), resource)


def borrower_and_lender(profile: Profile) -> tuple[Tenant, Tenant]:
    """The tenant with a limit above its quota and the smallest quota (the borrower), and the one with the most
    quota (the lender); SKIP when the profile gives no tenant room to borrow."""
    borrowers = sorted((t for t in profile.tenants if t.borrowing_gpus), key=lambda t: t.quota_gpus)
    if not borrowers or len(profile.tenants) < 2:
        pytest.skip("the profile gives no tenant a limit_gpus above its quota_gpus, or has one tenant only")
    borrower = borrowers[0]
    lender = max((t for t in profile.tenants if t is not borrower), key=lambda t: t.quota_gpus)
    return borrower, lender


def job_size(profile: Profile, tenant: Tenant) -> int:
    """A job size that divides the tenant's quota and limit (so 'within' and 'beyond' are whole jobs)."""
    for size in sorted(set(profile.gpu.job_sizes.values()), reverse=True):
        if tenant.quota_gpus % size == 0 and (tenant.limit_gpus or 0) % size == 0 and size <= tenant.quota_gpus:
            return size
    return 1


def submit_and_wait_running(workloads: JobSystem, jobs: list[GangJob], what: str, timeout_s: float) -> float:
    """Submit `jobs`, wait until all have started; seconds from the submission to the last start (watch events)."""
    if not jobs:
        return 0.0
    submitted = time.time()
    for job in jobs:
        workloads.submit(job)
    tracker = workloads.jobs(jobs[0].tenant.namespace)
    tracker.wait_until(what, lambda objs: all(state_is(workloads, j, *STARTED)(objs) for j in jobs), timeout_s,
                       failed=lambda _: workloads.refused(jobs))
    starts = [first_seen(workloads.timeline, tracker.kind, workloads.tracked_name(j), *STARTED) for j in jobs]
    return max((s for s in starts if s is not None), default=time.time()) - submitted


def started_within(workloads: JobSystem, jobs: list[GangJob], what: str, timeout_s: float,
                   states: tuple[str, ...] = STARTED) -> float | None:
    """Watch `jobs` for up to `timeout_s`: the harness time the last of them was seen in `states` (started), or None
    when one of them has not by then (a job held as it should be, or a lender still without its quota)."""
    tracker = workloads.jobs(jobs[0].tenant.namespace)
    try:
        tracker.wait_until(what, lambda objs: all(state_is(workloads, j, *states)(objs) for j in jobs), timeout_s)
    except WaitTimeout:
        return None
    seen = [first_seen(workloads.timeline, tracker.kind, workloads.tracked_name(j), *states) for j in jobs]
    return max((s for s in seen if s is not None), default=time.time())


def held_intervals(workloads: JobSystem, tenant: Tenant, jobs: list[GangJob], now: float) -> list[Interval]:
    """When each pod of `jobs` held its GPUs (running, from the member transitions)."""
    by_name = {j.name: j for j in jobs}
    pods = workloads.members(tenant.namespace)
    seen = {**pods.gone, **pods.objects}
    result = []
    for pod, start, end in running_intervals(workloads.timeline, now):
        job = next((j for j in by_name.values() if pod in seen and belongs(seen[pod], j)), None)
        if job is not None:
            result.append(Interval(tenant.name, start, end, job.gpus_per_pod))
    return result


def held_reason(api: client.ApiClient, workloads: JobSystem, job: GangJob) -> str:
    """Why the scheduler holds `job`: its own status message, else the latest event about the job's objects."""
    status = workloads.status_of(job, workloads.jobs(job.tenant.namespace).objects)
    if status is not None and status.reason and status.reason not in ("Pending", "Inqueue"):
        return status.reason
    events = client.CoreV1Api(api).list_namespaced_event(job.tenant.namespace).items
    about = [e for e in events if job.name in (e.involved_object.name or "") and e.type == "Warning"]
    about.sort(key=lambda e: str(e.last_timestamp or e.event_time or e.metadata.creation_timestamp))
    return f"{about[-1].reason}: {(about[-1].message or '').strip()}" if about else ""

"""Governance 2 — borrowing and reclaim.

While the lender (reference profile: team-a, quota 24) is idle, the borrower (team-b, quota 8,
limit 16) submits up to its limit: it must hold GPUs beyond its quota (the share of its borrowing
allowance in use), as the scheduler's queue object and its metric both say. Then the lender submits
its quota: it must hold it within the threshold, by evictions of the borrower's borrowed jobs only,
each with the scheduler's reason. A cohort or queue that does not reclaim leaves the lender short:
the time is then the whole wait, and the criterion FAILs with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kubernetes import client

from harness.backends import Backend
from harness.jobs.model import GangJob, disruption
from harness.backends.base import BORROWING, QUEUE_QUOTA, QueueUsage
from harness.criteria.governance import borrowing_reclaim as reclaim
from harness.criteria.governance.borrowing_reclaim import CRITERION
from harness.criteria.governance.quota import gpus_over_time
from harness.jobs.system import JobSystem
from harness.config.profile import Profile
from harness.cluster.prometheus import Prometheus
from harness.cluster.wait import poll
from harness.record.evidence import Evidence
from harness.targets.target import Target
from suites.governance.common import (METRIC_SETTLE_S, borrower_and_lender, held_intervals, job_size, queue_gpus,
                                      started_within, submit_and_wait_running)
from harness.core.timeline import running_intervals
from suites.training.common import LONG_RUN_S, belongs, require

CHART_STEP_S = 1.0


def metric_gpus(prometheus: Prometheus, usage: QueueUsage, queue: str, resource: str,
                expected: float, ev: Evidence) -> float | None:
    """The scheduler's metric for the queue, waited for (scrapes lag) until it agrees with `expected` or the
    settle time is over; the last answer."""
    query = usage.promql.format(queue=queue, resource=resource)
    samples = poll(lambda: prometheus.instant(query), lambda found: bool(found) and found[0].value == expected,
                   METRIC_SETTLE_S)
    ev.promql.append((query, f"{samples[0].value:g}" if samples else "no series"))
    return samples[0].value if samples else None


def victims_of(workloads: JobSystem, jobs: list[GangJob], since: float, until: float) -> dict[str, str]:
    """job -> tenant, for each job with a pod that stopped running between `since` and `until` (the jobs run
    far longer than the test, so a pod ending early was evicted)."""
    found: dict[str, str] = {}
    pods: dict[str, dict[str, Any]] = {}
    for tenant in {j.tenant.namespace: j.tenant for j in jobs}.values():
        tracker = workloads.members(tenant.namespace)
        pods.update({**tracker.gone, **tracker.objects})
    for pod, _start, end in running_intervals(workloads.timeline, until):
        if since <= end < until and pod in pods:
            job = next((j for j in jobs if belongs(pods[pod], j)), None)
            if job is not None:
                found[job.name] = job.tenant.name
    return found


def eviction_reason(workloads: JobSystem, job: GangJob) -> str:
    """The scheduler's reason for evicting `job`: its pods' DisruptionTarget condition, else the job's status."""
    tracker = workloads.members(job.tenant.namespace)
    for pod in [*tracker.gone.values(), *tracker.objects.values()]:
        reason = disruption(pod) if belongs(pod, job) else None
        if reason:
            return reason
    status = workloads.status_of(job, {**workloads.jobs(job.tenant.namespace).gone,
                                       **workloads.jobs(job.tenant.namespace).objects})
    return status.reason if status is not None and status.reason else "no reason given"


def run_borrowing_reclaim(api: client.ApiClient, prometheus: Prometheus, backend: Backend, workloads: JobSystem,
                          profile: Profile, ev: Evidence) -> None:
    borrower, lender = borrower_and_lender(profile)
    assert borrower.limit_gpus is not None and backend.queue_usage is not None
    usage, resource = backend.queue_usage, profile.gpu.resource
    size = job_size(profile, borrower)
    borrowed_jobs = [workloads.gang(f"borrow-{i}", borrower, 1, size, run_for_s=LONG_RUN_S)
                     for i in range(borrower.limit_gpus // size)]
    lent_back = [workloads.gang(f"reclaim-{i}", lender, 1, size, run_for_s=LONG_RUN_S)
                 for i in range(lender.quota_gpus // size)]
    ev.note(f"{borrower.name} (quota {borrower.quota_gpus}, limit {borrower.limit_gpus}) submits "
            f"{len(borrowed_jobs)} jobs of {size} GPUs while {lender.name} is idle; then {lender.name} submits "
            f"{len(lent_back)} within its quota of {lender.quota_gpus}")
    started = time.time()
    submit_and_wait_running(workloads, borrowed_jobs, f"{borrower.name} borrows up to its limit",
                            profile.timeouts.admit)
    queue = borrower.queues[backend.queue_system]
    running = float(sum(j.gpus for j in borrowed_jobs))
    held_api = queue_gpus(api, usage, queue, resource, running)
    ev.note(f"{backend.name} {usage.kind} {queue}: {held_api:g} GPUs held (quota {borrower.quota_gpus}), "
            f"{reclaim.borrowed(held_api, borrower.quota_gpus):g} borrowed")
    ev.expect("min_borrowed_share", round(reclaim.borrowed_share(held_api, borrower.quota_gpus,
                                                                 borrower.limit_gpus), 4))
    if usage.promql:
        held_metric = metric_gpus(prometheus, usage, queue, resource, held_api, ev)
        ev.expect("max_borrowed_mismatch", None if held_metric is None else abs(held_metric - held_api))
    else:
        ev.not_checked("max_borrowed_mismatch", usage.no_metric)

    submitted = time.time()
    for job in lent_back:
        workloads.submit(job)
    wait_s = 2 * profile.threshold(CRITERION.id, "reclaim_within_s")
    held_at = started_within(workloads, lent_back, "the lender holds its quota", wait_s)
    ended = time.time()
    ev.note(f"{lender.name} held its quota " + ("never within " + f"{wait_s:g}s" if held_at is None
                                                else f"{held_at - submitted:.1f}s after submitting"))
    ev.expect("reclaim_within_s", round((held_at if held_at is not None else ended) - submitted, 3))
    victims = victims_of(workloads, borrowed_jobs + lent_back, submitted, ended)
    for job in borrowed_jobs + lent_back:
        if job.name in victims:
            ev.note(f"evicted: {job.name} of {victims[job.name]}: {eviction_reason(workloads, job)}")
    borrowed_count = int(reclaim.borrowed(held_api, borrower.quota_gpus) // size)
    ev.expect("max_wrong_victims", reclaim.wrong_victims(victims, lender.name, borrower.name, borrowed_count))
    ev.series["gpus"] = {t.name: gpus_over_time(held_intervals(workloads, t, jobs, ended), started, ended, CHART_STEP_S)
                         for t, jobs in ((borrower, borrowed_jobs), (lender, lent_back))}
    ev.verdict()


def test_borrowing_reclaim(target: Target, backend: Backend, workloads: JobSystem, queue_model: Profile,
                           prometheus: Prometheus, evidence: Callable[[str], Evidence]) -> None:
    require(target, backend, QUEUE_QUOTA, BORROWING)
    run_borrowing_reclaim(target.api, prometheus, backend, workloads, queue_model, evidence(CRITERION.id))

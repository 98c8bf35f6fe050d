"""Batch training 2 — queue fairness.

The first tenant queues three times the cluster; once the cluster is full the others, with other
weights, arrive late and queue twice as much each. Each tenant's share of GPU-seconds over the
contended window (until the first tenant has nothing left waiting) is compared with its configured
share (weights 3:1 on the reference profile), and the time each late tenant took to hold its share.

A scheduler without weights cannot meet that but by chance: first come, first served leaves the late
tenant nothing until the early backlog drains; kube-scheduler's per-pod backoff favours the newer
pods, and with the larger backlog the late tenant then takes far more than its share. The test ends
with the contention; jobs still waiting then are deleted by teardown.
"""

from __future__ import annotations

import time
from collections.abc import Callable


from harness.backends import Backend, GangJob
from harness.backends.base import JOBS_COMPLETE, PROMPT_FAIR_SHARE
from harness.criteria.training import queue_fairness as fairness
from harness.criteria.training.queue_fairness import CRITERION
from harness.profile import Profile
from harness.record.evidence import Evidence
from harness.target import Target
from harness.jobs import JobSystem
from harness.workloads import running_intervals
from suites.training.common import (attach_timeline, bound_pods, first_seen, gpu_nodes, require,
                                    wait_until_a_tenant_has_none_waiting)

OVERSUBSCRIPTION = 3   # the first tenant alone asks for this many times the cluster
LATE_OVERSUBSCRIPTION = 6  # each late tenant: a backlog larger than what the first tenant has left waiting
JOB_RUN_S = 5.0
CHART_STEP_S = 1.0


def run_fairness(workloads: JobSystem, profile: Profile, ev: Evidence) -> None:
    size = profile.gpu.job_sizes.get("medium", profile.gpu.per_node)
    capacity = gpu_nodes(workloads, profile) * profile.gpu.per_node
    early, *late = profile.tenants
    names = [t.name for t in profile.tenants]
    count = {t.name: (OVERSUBSCRIPTION if t is early else LATE_OVERSUBSCRIPTION) * capacity // size
             for t in profile.tenants}
    jobs = {t.name: [GangJob(workloads.job_name(f"fair-{t.name}-{i}"), t, 1, size, run_for_s=JOB_RUN_S)
                     for i in range(count[t.name])]
            for t in profile.tenants}
    ev.note(f"{early.name} queues {count[early.name]} jobs of {size} GPUs ({JOB_RUN_S:g}s each) against {capacity} "
            f"GPUs; once they fill the cluster, " + ", ".join(f"{t.name} arrives with {count[t.name]}" for t in late)
            + "; the contended window ends when a tenant has nothing left waiting.")
    started = time.time()
    for job in jobs[early.name]:
        workloads.submit(job)
    workloads.members(early.namespace).wait_until(
        f"{early.name} fills the cluster", lambda objs: sum(bound_pods(objs, j) for j in jobs[early.name]) * size
        >= capacity, profile.timeouts.admit)
    arrived = time.time()
    for i in range(max(count[t.name] for t in late)):
        for tenant in late:
            if i < count[tenant.name]:
                workloads.submit(jobs[tenant.name][i])
    waiting = wait_until_a_tenant_has_none_waiting(workloads, profile.tenants, jobs, profile.timeouts.complete)
    ended = time.time()
    failed = [(job.name, status.reason) for tenant in profile.tenants for job in jobs[tenant.name]
              if (status := workloads.status_of(job, workloads.jobs(tenant.namespace).objects)) is not None
              and status.state == "failed"]
    if failed:  # their GPU-seconds until then still count; e.g. KAI and Volcano reclaim by evicting pods
        ev.note(f"{len(failed)} jobs failed before finishing, first {failed[0][0]}: {failed[0][1]}")

    tl = workloads.timeline
    kind = workloads.jobs(early.namespace).kind
    intervals = [fairness.Interval(owner, start, end, size) for pod, start, end in running_intervals(tl, ended)
                 if (owner := next((t.name for t in profile.tenants if pod.startswith(f"fair-{t.name}-")), None))]
    pending_since = {t.name: min(first_seen(tl, kind, workloads.tracked_name(j), "queued", "admitted", "running")
                                 or started for j in jobs[t.name]) for t in profile.tenants}
    drained_at = {n: ended if waiting[n] else max((iv.start for iv in intervals if iv.tenant == n), default=ended)
                  for n in names}
    window = fairness.contended_window(pending_since, drained_at)
    measured = fairness.shares(fairness.gpu_seconds(intervals, window), names)
    expected = profile.expected_shares()
    ev.note(f"contended window {window[1] - window[0]:.1f}s (harness clock: watch events); measured shares "
            + ", ".join(f"{t} {measured[t]:.3f} (configured {expected[t]:.3f})" for t in names))
    ev.series["shares"] = {f"share {t}": s for t, s in
                           fairness.share_series(intervals, window, names, CHART_STEP_S).items()}
    ev.expect("min_jain_index", round(fairness.jain_index(measured, expected), 4))
    ev.expect("max_share_deviation", round(fairness.max_deviation(measured, expected), 4))
    for tenant in late:
        entitled = fairness.entitled(expected[tenant.name], capacity, size)
        took = fairness.time_to_share(intervals, tenant.name, arrived, entitled)
        ev.note(f"{tenant.name} arrived {arrived - started:.1f}s in; held its {entitled} GPUs "
                + ("never" if took is None else f"{took:.1f}s later"))
        ev.expect("late_share_within_s", round(took if took is not None else ended - arrived, 3), label=tenant.name)
    attach_timeline(ev, tl, started)
    ev.verdict()


def test_queue_fairness(target: Target, backend: Backend, workloads: JobSystem,
                        queue_model: Profile, evidence: Callable[[str], Evidence]) -> None:
    require(target, backend, JOBS_COMPLETE, PROMPT_FAIR_SHARE)
    run_fairness(workloads, queue_model, evidence(CRITERION.id))

"""Batch training 2 — queue fairness.

Tenants with configured weights saturate the cluster; their measured share of GPU-seconds over
the contended window matches the configured share (Jain's index and largest deviation).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kubernetes import client

from harness.backends import Backend, GangJob
from harness.measure import fairness
from harness.profile import Profile
from harness.record.evidence import Evidence
from harness.workloads import Workloads
from harness.target import Target
from suites.training.common import (attach_timeline, first_seen, gpu_nodes, running_intervals,
                                    skip_unless_jobs_complete, state_is)

CRITERION = "training.queue_fairness"
STATEMENT = ("Tenants with configured weights saturate the cluster; their measured share of GPU-seconds over the "
             "contended window matches the configured share (Jain's index, largest deviation).")
OVERSUBSCRIPTION = 3   # each tenant alone asks for this many times the cluster
JOB_RUN_S = 5.0
CHART_STEP_S = 1.0


def run_fairness(api: client.ApiClient, backend: Backend, workloads: Workloads, profile: Profile,
                 ev: Evidence) -> None:
    size = profile.gpu.job_sizes.get("medium", profile.gpu.per_node)
    capacity = gpu_nodes(api, profile) * profile.gpu.per_node
    per_tenant = OVERSUBSCRIPTION * capacity // size
    names = [t.name for t in profile.tenants]
    jobs = {t.name: [GangJob(f"fair-{t.name}-{i}", t, 1, size, run_for_s=JOB_RUN_S) for i in range(per_tenant)]
            for t in profile.tenants}
    ev.note(f"{len(names)} tenants x {per_tenant} jobs of {size} GPUs ({JOB_RUN_S:g}s each), submitted "
            f"round-robin, against {capacity} GPUs.")
    started = time.time()
    for i in range(per_tenant):
        for tenant in profile.tenants:
            workloads.submit(jobs[tenant.name][i])
    for tenant in profile.tenants:
        tracker = workloads.jobs(tenant.namespace)
        for job in jobs[tenant.name]:
            tracker.wait_until(f"{job.name} finished", state_is(workloads, job, "succeeded", "failed"),
                               profile.timeouts.complete)
    ended = time.time()
    failed = [(job.name, status.reason) for tenant in profile.tenants for job in jobs[tenant.name]
              if (status := workloads.status_of(job, workloads.jobs(tenant.namespace).objects)) is not None
              and status.state == "failed"]
    if failed:  # their GPU-seconds until then still count; e.g. KAI reclaims by deleting bare pods
        ev.note(f"{len(failed)} jobs failed before finishing, first {failed[0][0]}: {failed[0][1]}")

    tl = workloads.timeline
    kind = workloads.jobs(profile.tenants[0].namespace).kind
    pending_since: dict[str, float] = {}
    drained_at: dict[str, float] = {}
    for tenant in profile.tenants:
        submitted = [first_seen(tl, kind, j.name, "queued", "admitted", "running") or started for j in jobs[tenant.name]]
        pending_since[tenant.name] = min(submitted)
    intervals = []
    for pod, start, end in running_intervals(tl, ended):
        owner = next((t.name for t in profile.tenants if pod.startswith(f"fair-{t.name}-")), None)
        if owner:
            intervals.append(fairness.Interval(owner, start, end, size))
    for name in names:
        starts = [iv.start for iv in intervals if iv.tenant == name]
        drained_at[name] = max(starts) if starts else ended
    window = fairness.contended_window(pending_since, drained_at)
    measured = fairness.shares(fairness.gpu_seconds(intervals, window), names)
    expected = profile.expected_shares()
    jain = fairness.jain_index(measured, expected)
    deviation = fairness.max_deviation(measured, expected)
    ev.note(f"contended window {window[1] - window[0]:.1f}s; measured shares "
            + ", ".join(f"{t} {measured[t]:.3f} (expected {expected[t]:.3f})" for t in names))
    ev.series = {f"share {t}": s for t, s in
                 fairness.share_series(intervals, window, names, CHART_STEP_S).items()}
    ev.expect("min_jain_index", round(jain, 4), profile.threshold(CRITERION, "min_jain_index"), ">=")
    ev.expect("max_share_deviation", round(deviation, 4), profile.threshold(CRITERION, "max_share_deviation"), "<=")
    attach_timeline(ev, tl, started)
    ev.verdict()


def test_queue_fairness(api: client.ApiClient, target: Target, backend: Backend, workloads: Workloads,
                        queue_model: Profile, evidence: Callable[[str, str], Evidence]) -> None:
    skip_unless_jobs_complete(target, backend)
    run_fairness(api, backend, workloads, queue_model, evidence(CRITERION, STATEMENT))

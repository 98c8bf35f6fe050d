"""Batch training 5 — queue wait.

p50/p95 time from submission to admission per queue, from the harness's own timeline and from
the scheduler's metrics; a disagreement beyond the profile's tolerance is reported.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kubernetes import client

from harness.backends import Backend, GangJob
from harness.measure.queue_wait import disagreement, summarize
from harness.profile import Profile
from harness.prometheus import Prometheus, histogram_quantile_query
from harness.record.evidence import Evidence
from harness.target import Target
from harness.timeline import Timeline
from harness.workloads import Workloads
from suites.training.common import attach_timeline, first_seen, gpu_nodes, skip_unless_jobs_complete, state_is

CRITERION = "training.queue_wait"
STATEMENT = ("p50/p95 time from submission to admission per queue, from the harness's timeline and from the "
             "scheduler's metrics, within the threshold and in agreement.")
JOB_RUN_S = 4.0
SCRAPE_MARGIN_S = 10  # the last scrape may lag the end of the test by one interval
WAVES = 3  # each queue submits this many times what the cluster holds at once
# scheduler metric of the submission-to-admission wait: (histogram, seconds per unit, per-queue label)
WAIT_METRIC = {"kueue": ("kueue_admission_wait_time_seconds", 1.0, "cluster_queue"),
               "volcano": ("volcano_e2e_job_scheduling_latency_milliseconds", 0.001, "")}


def metric_p95(prometheus: Prometheus, backend: Backend, queue: str, window_s: float,
               ev: Evidence) -> tuple[float | None, list[float]]:
    """The scheduler's own p95 for `queue` over this test, and its histogram's bucket bounds (seconds)."""
    if backend.name not in WAIT_METRIC:
        return None, []
    metric, scale, label = WAIT_METRIC[backend.name]
    window = f"{int(window_s) + SCRAPE_MARGIN_S}s"  # this test's admissions only
    promql = histogram_quantile_query(0.95, metric, (label,) if label else (), window)
    samples = prometheus.instant(promql)
    mine = [s for s in samples if not label or s.labels.get(label) == queue]
    ev.promql.append((promql, ", ".join(f"{s.labels.get(label, 'all')}={s.value * scale:.3f}s" for s in samples)
                      or "no samples"))
    bounds = sorted({float(s.labels["le"]) * scale for s in prometheus.instant(f"{metric}_bucket")
                     if s.labels.get("le") not in (None, "+Inf")})
    return (mine[0].value * scale if mine else None), bounds


def test_queue_wait(api: client.ApiClient, target: Target, backend: Backend, workloads: Workloads,
                    queue_model: Profile, prometheus: Prometheus, evidence: Callable[[str, str], Evidence]) -> None:
    skip_unless_jobs_complete(target, backend)
    profile, ev = queue_model, evidence(CRITERION, STATEMENT)
    per_node = profile.gpu.per_node
    per_queue = WAVES * gpu_nodes(api, profile) // len(profile.tenants)
    jobs = {t.name: [GangJob(f"wait-{t.name}-{i}", t, 1, per_node, run_for_s=JOB_RUN_S) for i in range(per_queue)]
            for t in profile.tenants}
    started = time.time()
    for i in range(per_queue):
        for tenant in profile.tenants:
            workloads.submit(jobs[tenant.name][i])
    for tenant in profile.tenants:
        for job in jobs[tenant.name]:
            workloads.jobs(tenant.namespace).wait_until(f"{job.name} finished", state_is(
                workloads, job, "succeeded", "failed"), profile.timeouts.complete)
    window_s = time.time() - started
    kind = workloads.jobs(profile.tenants[0].namespace).kind
    tl = workloads.timeline
    worst_p95 = 0.0
    for tenant in profile.tenants:
        waits = []
        for job in jobs[tenant.name]:
            tracked = _tracked(tl, kind, job.name)
            submitted = first_seen(tl, kind, tracked, "queued", "admitted", "running")
            pods = {t.name for t in tl.transitions if t.kind == "Pod" and t.name.startswith(f"{job.name}-")}
            admitted = [x for x in [first_seen(tl, kind, tracked, "admitted", "running"),
                                    *(first_seen(tl, "Pod", p, "bound", "running") for p in pods)] if x is not None]
            if submitted is not None and admitted:
                waits.append(min(admitted) - submitted)
        summary = summarize(tenant.queues.get(backend.name, tenant.name), waits)
        worst_p95 = max(worst_p95, summary.p95_s)
        metric, bounds = metric_p95(prometheus, backend, tenant.queues.get("kueue", tenant.name), window_s, ev)
        ev.note(f"queue {summary.queue}: {summary.count} jobs, p50 {summary.p50_s:.2f}s, p95 {summary.p95_s:.2f}s "
                f"(harness); scheduler metric p95: {'none exported' if metric is None else f'{metric:.2f}s'}")
        gap = disagreement(summary.p95_s, metric, bounds)
        if gap is not None:
            ev.expect(f"metric_tolerance_s[{summary.queue}]", round(gap, 3),
                      profile.threshold(CRITERION, "metric_tolerance_s"), "<=", " s")
    ev.expect("p95_s", round(worst_p95, 3), profile.threshold(CRITERION, "p95_s"), "<=", " s")
    attach_timeline(ev, tl, started)
    ev.verdict()


def _tracked(timeline: Timeline, kind: str, job_name: str) -> str:
    """Kueue tracks a Workload named job-<job>-<hash>; the others track the job itself."""
    names = {t.name for t in timeline.transitions if t.kind == kind}
    return next((n for n in names if n == job_name or n.startswith(f"job-{job_name}-")), job_name)

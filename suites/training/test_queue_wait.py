"""Batch training 5 — queue wait.

p50/p95 time from submission to admission per queue, from the harness's own timeline and from
the scheduler's histogram; a disagreement beyond the profile's tolerance is reported. A backend
without such a histogram has that cross-check shown as not checked; one whose histogram has no
samples for the queue after the test's admissions is an ERROR (Prometheus is not seeing it).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kubernetes import client

from harness.backends import Backend, GangJob
from harness.backends.base import JOBS_COMPLETE, WAIT_HISTOGRAM, WaitHistogram
from harness.criteria.training.queue_wait import CRITERION, disagreement, summarize
from harness.errors import HarnessError
from harness.profile import Profile
from harness.prometheus import Prometheus, histogram_quantile_query
from harness.record.evidence import Evidence
from harness.target import Target
from harness.workloads import Workloads
from suites.training.common import attach_timeline, first_seen, gpu_nodes, require, state_is

JOB_RUN_S = 4.0
SCRAPE_MARGIN_S = 10  # the last scrape may lag the end of the test by one interval
WAVES = 3  # each queue submits this many times what the cluster holds at once


def metric_p95(prometheus: Prometheus, histogram: WaitHistogram, queue: str, window_s: float,
               ev: Evidence) -> tuple[float | None, list[float]]:
    """The scheduler's own p95 for `queue` over this test (None: no samples yet), and its bucket bounds (s)."""
    label = histogram.queue_label
    window = f"{int(window_s) + SCRAPE_MARGIN_S}s"  # this test's admissions only
    promql = histogram_quantile_query(0.95, histogram.metric, (label,) if label else (), window)
    samples = [s for s in prometheus.instant(promql) if s.value == s.value]  # NaN: no admissions in the window
    mine = [s for s in samples if not label or s.labels.get(label) == queue]
    scale = histogram.seconds_per_unit
    ev.promql.append((promql, ", ".join(f"{s.labels.get(label, 'all')}={s.value * scale:.3f}s" for s in samples)
                      or "no samples"))
    bounds = sorted({float(s.labels["le"]) * scale for s in prometheus.instant(f"{histogram.metric}_bucket")
                     if s.labels.get("le") not in (None, "+Inf")})
    return (mine[0].value * scale if mine else None), bounds


def scheduler_p95(prometheus: Prometheus, histogram: WaitHistogram, queue: str, window_s: float, timeout_s: float,
                  ev: Evidence) -> tuple[float, list[float]]:
    """The scheduler's p95 once a scrape has it; an ERROR when Prometheus never shows samples for the queue."""
    deadline = time.monotonic() + timeout_s
    while True:
        p95, bounds = metric_p95(prometheus, histogram, queue, window_s + (timeout_s - (deadline - time.monotonic())),
                                 ev)
        if p95 is not None:
            return p95, bounds
        if time.monotonic() >= deadline:
            raise HarnessError(f"Prometheus has no samples of {histogram.metric} for queue {queue} "
                               f"{timeout_s:.0f}s after its jobs were admitted: is the scheduler scraped (up == 1)?")
        time.sleep(2)  # Prometheus scrapes on its own schedule; there is no event to watch for a sample


def test_queue_wait(api: client.ApiClient, target: Target, backend: Backend, workloads: Workloads,
                    queue_model: Profile, prometheus: Prometheus, evidence: Callable[[str], Evidence]) -> None:
    require(target, backend, JOBS_COMPLETE)
    profile, ev = queue_model, evidence(CRITERION.id)
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
    histogram = backend.wait_histogram()
    lacking = backend.lacks(WAIT_HISTOGRAM, target.kind)
    for tenant in profile.tenants:
        waits = []
        for job in jobs[tenant.name]:
            tracked = workloads.tracked_name(job)
            submitted = first_seen(tl, kind, tracked, "queued", "admitted", "running")
            pods = {t.name for t in tl.transitions if t.kind == "Pod" and t.name.startswith(f"{job.name}-")}
            admitted = [x for x in [first_seen(tl, kind, tracked, "admitted", "running"),
                                    *(first_seen(tl, "Pod", p, "bound", "running") for p in pods)] if x is not None]
            if submitted is not None and admitted:
                waits.append(min(admitted) - submitted)
        queue = tenant.queues.get(backend.name, tenant.name)
        summary = summarize(queue, waits)
        ev.expect("p95_s", round(summary.p95_s, 3), label=queue)
        line = (f"queue {queue}: {summary.count} jobs, p50 {summary.p50_s:.2f}s, p95 {summary.p95_s:.2f}s "
                "(harness clock: watch events)")
        if histogram is None or lacking:
            ev.not_checked("metric_tolerance_s", lacking or "no wait histogram", label=queue)
        else:
            metric, bounds = scheduler_p95(prometheus, histogram, queue, window_s, profile.timeouts.metric, ev)
            ev.expect("metric_tolerance_s", round(disagreement(summary.p95_s, metric, bounds), 3), label=queue)
            line += f"; scheduler's histogram p95 {metric:.2f}s"
        ev.note(line)
    attach_timeline(ev, tl, started)
    ev.verdict()

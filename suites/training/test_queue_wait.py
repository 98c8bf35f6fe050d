"""Batch training 5 — queue wait.

p50/p95 time from submission to admission per queue, from the harness's own timeline and from
the scheduler's histogram; a disagreement beyond the profile's tolerance is reported. A backend
without such a histogram has that cross-check shown as not checked; one whose histogram has no
samples for the queue after the test's admissions is an ERROR (Prometheus is not seeing it).
"""

from __future__ import annotations

import time
from collections.abc import Callable


from harness.backends import Backend
from harness.core.estimate import percentile
from harness.backends.base import JOBS_COMPLETE, WAIT_HISTOGRAM, WaitHistogram
from harness.criteria.training.queue_wait import (CRITERION, Buckets, WaitSummary, bucket_delta, bucket_quantile,
                                                  disagreement, summarize)
from harness.core.errors import HarnessError
from harness.config.profile import Profile
from harness.cluster.prometheus import Prometheus
from harness.cluster.wait import poll
from harness.record.evidence import Evidence
from harness.targets.target import Target
from harness.core.timeline import MEMBER_KIND
from harness.jobs.system import JobSystem
from suites.training.common import attach_timeline, first_seen, gpu_nodes, require, state_is

JOB_RUN_S = 4.0
WAVES = 3  # each queue submits this many times what the cluster holds at once


def scraped_after(prometheus: Prometheus, histogram: WaitHistogram, moment: float, timeout_s: float,
                  required: bool) -> dict[str, Buckets]:
    """The histogram once Prometheus has scraped the scheduler after `moment`. A histogram with no series yet is
    empty at the start (nothing admitted so far); after the test's admissions it is an ERROR: Prometheus is not
    seeing the scheduler."""
    found, scraped_at = poll(lambda: prometheus.histogram_buckets(histogram.metric, histogram.queue_label,
                                                                  histogram.seconds_per_unit),
                             lambda r: r[1] >= moment or (not r[0] and not required), timeout_s)
    if scraped_at < moment and (found or required):
        seen = f"its last sample is from {time.time() - scraped_at:.0f}s ago" if scraped_at else "no series"
        raise HarnessError(f"Prometheus has no sample of {histogram.metric} scraped after the test's admissions "
                           f"({seen}, {timeout_s:.0f}s later): is the scheduler scraped (up == 1)?")
    return found


def cross_check(ev: Evidence, histogram: WaitHistogram, key: str, summary: WaitSummary, baseline: dict[str, Buckets],
                observed: dict[str, Buckets]) -> str:
    """The scheduler's p95 over this test's admissions (its buckets, after minus before) against the harness's."""
    delta = bucket_delta(baseline.get(key, {}), observed.get(key, {}))
    metric = bucket_quantile(0.95, delta)
    by = f"le, {histogram.queue_label}" if histogram.queue_label else "le"
    ev.promql.append((f"sum by ({by}) ({histogram.metric}_bucket), before and after the test",
                      f"{key}: {delta.get(float('inf'), 0):g} admissions in this test, p95 "
                      f"{'none' if metric is None else f'{metric:.3f}s'}"))
    if metric is None:
        raise HarnessError(f"{histogram.metric} observed none of the {summary.count} admissions of queue "
                           f"{key}: Prometheus is not seeing the scheduler's admissions")
    bounds = sorted(le for le in delta if le != float("inf"))
    ev.expect("metric_tolerance_s", round(disagreement(summary.p95_s, metric, bounds), 3), label=key)
    return f"; scheduler's histogram p95 {metric:.2f}s (its buckets, this test's admissions only)"


def test_queue_wait(target: Target, backend: Backend, workloads: JobSystem,
                    queue_model: Profile, prometheus: Prometheus, evidence: Callable[[str], Evidence]) -> None:
    require(target, backend, JOBS_COMPLETE)
    profile, ev = queue_model, evidence(CRITERION.id)
    histogram = backend.wait_histogram()
    lacking = backend.lacks(WAIT_HISTOGRAM, target.features)
    baseline = ({} if histogram is None or lacking else
                scraped_after(prometheus, histogram, time.time(), profile.timeouts.metric, required=False))
    per_node = profile.gpu.per_node
    per_queue = WAVES * gpu_nodes(workloads, profile) // len(profile.tenants)
    jobs = {t.name: [workloads.gang(f"wait-{t.name}-{i}", t, 1, per_node, run_for_s=JOB_RUN_S)
                     for i in range(per_queue)]
            for t in profile.tenants}
    started = time.time()
    for i in range(per_queue):
        for tenant in profile.tenants:
            workloads.submit(jobs[tenant.name][i])
    for tenant in profile.tenants:  # until each is admitted (or failed): its running time is not the wait
        for job in jobs[tenant.name]:
            workloads.jobs(tenant.namespace).wait_until(f"{job.name} admitted", state_is(
                workloads, job, "admitted", "running", "succeeded", "failed"), profile.timeouts.complete)
    kind = workloads.jobs(profile.tenants[0].namespace).kind
    tl = workloads.timeline
    last_admission = max(t.seen_at for t in tl.transitions if t.state in ("admitted", "running", "bound"))
    observed = ({} if histogram is None or lacking else
                scraped_after(prometheus, histogram, last_admission, profile.timeouts.metric, required=True))
    every_wait: list[float] = []
    for tenant in profile.tenants:
        waits = []
        for job in jobs[tenant.name]:
            tracked = workloads.tracked_name(job)
            submitted = first_seen(tl, kind, tracked, "queued", "admitted", "running")
            members = {t.name for t in tl.transitions if t.kind == MEMBER_KIND and t.name.startswith(f"{job.name}-")}
            admitted = [x for x in [first_seen(tl, kind, tracked, "admitted", "running"),
                                    *(first_seen(tl, MEMBER_KIND, m, "bound", "running") for m in members)]
                        if x is not None]
            if submitted is not None and admitted:
                waits.append(min(admitted) - submitted)
        every_wait += waits
        queue = tenant.queues.get(backend.queue_system, tenant.name)
        summary = summarize(queue, waits)
        ev.expect("p95_s", percentile(waits, 0.95).rounded(3) if waits else None, label=queue)
        line = (f"queue {queue}: {summary.count} jobs, p50 {summary.p50_s:.2f}s, p95 {summary.p95_s:.2f}s "
                "(harness clock: watch events)")
        if histogram is None or lacking:
            ev.not_checked("metric_tolerance_s", lacking or "no wait histogram", label=queue)
        elif histogram.queue_label:
            line += cross_check(ev, histogram, queue, summary, baseline, observed)
        ev.note(line)
    if histogram is not None and not lacking and not histogram.queue_label:
        # a histogram without a queue label: the harness's waits of every queue against it, once
        summary = summarize("all", every_wait)
        ev.note(f"every queue: {summary.count} jobs, p95 {summary.p95_s:.2f}s (harness clock)"
                + cross_check(ev, histogram, "all", summary, baseline, observed))
    attach_timeline(ev, tl, started)
    ev.verdict()

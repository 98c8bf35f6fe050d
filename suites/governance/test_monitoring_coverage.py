"""Governance 5 — monitoring coverage.

A tenant fills the cluster through the backend and queues two jobs more; then every series the POC
needs from the backend (its catalogue, harness/backends) and from kube-state-metrics is looked up in
Prometheus: present, its scrape target up, its newest sample fresh. The jobs waiting in the tenant's
queue by the scheduler's metric must agree with the API. Counters that appear at their first event
(preemptions, say) are not checked while absent. GPU utilisation needs a DCGM exporter: on the sim,
whose GPUs are simulated, it is not checked.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from harness.backends import Backend
from harness.backends.base import MONITORING
from harness.criteria.governance.monitoring_coverage import Series, CRITERION, GPU_UTILISATION, pod_series
from harness.criteria.governance import monitoring_coverage as coverage
from harness.jobs.system import JobSystem
from harness.config.profile import Profile
from harness.cluster.prometheus import Prometheus
from harness.cluster.wait import poll
from harness.record.evidence import Evidence
from harness.targets.target import Target
from suites.governance.common import STARTED, submit_and_wait_running
from suites.training.common import LONG_RUN_S, gpu_nodes, require, state_is

WAITING_JOBS = 2
SETTLE_SCRAPES = 4  # for a metric to show what the API shows: a few scrapes (5 s each on the sim: 20 s)
SETTLE_S = 30.0  # where Prometheus does not say how often it scrapes


def look_up(prometheus: Prometheus, series: Series) -> coverage.Found:
    """The newest sample of the series and whether every target exporting it is up."""
    if not series.selector:
        return coverage.Found(series, None, False)
    newest = prometheus.instant(f"max by (job, instance) (timestamp({series.selector}))")
    if not newest:
        return coverage.Found(series, None, False)
    up = prometheus.instant("up")
    down = {(s.labels.get("job"), s.labels.get("instance")) for s in up if s.value != 1}
    targets = {(s.labels.get("job"), s.labels.get("instance")) for s in newest}
    return coverage.Found(series, max(s.value for s in newest), not (targets & down))


def run_monitoring_coverage(target: Target, prometheus: Prometheus, backend: Backend, workloads: JobSystem,
                            profile: Profile, ev: Evidence) -> None:
    assert backend.monitoring is not None
    tenant = profile.tenants[0]
    size = profile.gpu.per_node
    capacity = gpu_nodes(workloads, profile) * profile.gpu.per_node
    fill = min(capacity, tenant.limit_gpus or capacity) // size
    jobs = [workloads.gang(f"mon-{i}", tenant, 1, size, run_for_s=LONG_RUN_S)
            for i in range(fill + WAITING_JOBS)]
    ev.note(f"{tenant.name} fills the cluster with {fill} jobs of {size} GPUs and queues {WAITING_JOBS} more")
    submit_and_wait_running(workloads, jobs[:fill], f"{tenant.name} fills the cluster", profile.timeouts.admit)
    for job in jobs[fill:]:
        workloads.submit(job)
    tracker = workloads.jobs(tenant.namespace)
    tracker.wait_until("the extra jobs are seen waiting",
                       lambda objs: all(state_is(workloads, j, "queued")(objs) for j in jobs[fill:]),
                       profile.timeouts.admit)
    waiting = sum(1 for j in jobs if not state_is(workloads, j, *STARTED)(tracker.objects))
    queue = tenant.queues.get(backend.queue_system)
    settle_s = prometheus.settle_s(SETTLE_SCRAPES, SETTLE_S)
    if backend.monitoring.pending and queue:
        query = backend.monitoring.pending.format(queue=queue)
        samples = poll(lambda: prometheus.instant(query), lambda s: bool(s) and s[0].value == waiting, settle_s)
        ev.promql.append((query, f"{samples[0].value:g}" if samples else "no series"))
        ev.note(f"jobs waiting in {queue}: {waiting} by the API, "
                + (f"{samples[0].value:g} by the metric" if samples else "no series"))
        ev.expect("max_pending_mismatch", abs(samples[0].value - waiting) if samples else None)
    else:
        ev.not_checked("max_pending_mismatch", f"{backend.name} exports no count of jobs waiting per queue")
    needed = [*backend.monitoring.series, *(pod_series(profile.gpu.resource) if backend.monitoring.pods else ())]
    if not target.features.simulated_gpus:
        needed.append(GPU_UTILISATION)
    # series of objects just created (kube-state-metrics' of the new pods) show after a scrape or two
    found = poll(lambda: [look_up(prometheus, s) for s in needed],
                 lambda seen: not any(f.state() == coverage.MISSING for f in seen), settle_s)
    if target.features.simulated_gpus:
        ev.note("GPU utilisation (DCGM_FI_DEV_GPU_UTIL) not checked: the sim's GPUs are simulated and it runs no "
                "DCGM exporter")
    now = time.time()
    ev.tables["monitoring: each series the POC needs"] = [f.row(now) for f in found]
    absent = coverage.missing(found)
    for f in absent:
        ev.note(f"missing: {f.series.need}: {f.series.selector or 'no such series exported'} ({f.state()})")
    not_yet = [f.series.need for f in found if f.state() == coverage.NOT_YET]
    if not_yet:
        ev.note("not checked until their first event: " + ", ".join(not_yet))
    ev.expect("max_missing_series", len(absent))
    stale = coverage.staleness(found, now)
    ev.expect("max_staleness_s", round(stale, 1) if stale is not None else None)
    ev.verdict()


def test_monitoring_coverage(target: Target, backend: Backend, workloads: JobSystem, queue_model: Profile,
                             prometheus: Prometheus, evidence: Callable[[str], Evidence]) -> None:
    require(target, backend, MONITORING)
    run_monitoring_coverage(target, prometheus, backend, workloads, queue_model, evidence(CRITERION.id))

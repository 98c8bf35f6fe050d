"""Governance 6 — cost attribution.

Runs after every other test of the run, over every pod the run's jobs ran (every suite, every
backend): GPU-hours per tenant from the API timelines the harness watched, against kube-state-metrics
in Prometheus (GPU requests of the pods while Running, per namespace), and per queue against each
scheduler's own usage metric. Prometheus sees a pod only at its scrapes, so short jobs are counted to
the scrape interval: the threshold is relative, and the subqueries run at the scrape interval.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from collections.abc import Callable

import pytest

from harness import backends
from harness.backends.slurm import SlurmBackend
from harness.cluster.inventory import cluster_inventory
from harness.config.options import RunConfig
from harness.core.estimate import Estimate, quadrature
from harness.criteria.governance import cost_attribution as cost
from harness.criteria.governance.audit import Submitted
from harness.criteria.governance.cost_attribution import CRITERION, Held
from harness.criteria.governance.monitoring_coverage import ksm_resource
from harness.criteria.governance.quota import gpus_over_time
from harness.criteria.training.queue_fairness import Interval
from harness.config.profile import Profile
from harness.cluster.prometheus import Prometheus
from harness.jobs.slurm.system import AUDIT_GROUP, accounted_gpu_seconds, settled_accounting
from harness.cluster.wait import poll
from harness.record.evidence import Evidence
from harness.targets.target import Target

CHART_STEP_S = 5.0
STEP_S = 5  # subquery step: the sim's scrape interval (a coarser scrape blurs what only sampled series say)
ROWS_SHOWN = 300
SETTLE_S = 3 * STEP_S  # the last scrapes of the last pods


def ksm_gpu_hours(prometheus: Prometheus, namespaces: list[str], resource: str, window: tuple[float, float],
                  ev: Evidence, held: list[Held]) -> dict[str, tuple[float, float]]:
    """GPU-hours per namespace from kube-state-metrics, with their resolution: each pod's GPU requests from its
    container's start to its completion (exact series) or its last scrape seen Running."""
    selector = f'namespace=~"{"|".join(namespaces)}"'
    span = f"{int(time.time() - window[0]) + 2 * STEP_S}s"

    def per_pod(query: str) -> dict[tuple[str, str], float]:
        samples = prometheus.instant(query)
        return {(s.labels.get("namespace", ""), s.labels.get("pod", "")): s.value for s in samples}
    newest = "max by (namespace, pod) (max_over_time({}{{{}}}[{}]))"
    requests = f'resource="{ksm_resource(resource)}", {selector}'
    gpus = per_pod(newest.format("kube_pod_container_resource_requests", requests, span))
    # the container's own start (running), not the pod's (accepted by the node, before its containers start)
    starts = {**per_pod(newest.format("kube_pod_start_time", selector, span)),
              **per_pod(newest.format("kube_pod_container_state_started", selector, span))}
    completed = per_pod(newest.format("kube_pod_completion_time", selector, span))
    # timestamp() of a bare selector is the scrape's time; of any other expression it is the evaluation's, which
    # would stretch a deleted pod to the step after its last scrape and on until its series went stale
    phase = f'kube_pod_status_phase{{phase="Running", {selector}}}'
    running = per_pod(f"max by (namespace, pod) (max_over_time((timestamp({phase}) and ({phase} == 1))"
                      f"[{span}:{STEP_S}s]))")
    api_seconds = {h.pod: h.gpu_seconds for h in held}
    seconds_of: dict[str, float] = {}
    uncertain_of: dict[str, list[float]] = {}
    rows = []
    for key, count in sorted(gpus.items(), key=lambda item: starts.get(item[0]) or 0.0):
        pod = cost.PodSeries(count, starts.get(key), completed.get(key), running.get(key))
        seconds, uncertain = cost.pod_gpu_seconds(pod, window, STEP_S)
        seconds_of[key[0]] = seconds_of.get(key[0], 0.0) + seconds
        uncertain_of.setdefault(key[0], []).append(uncertain)
        if seconds or key[1] in api_seconds:
            rows.append({"pod": f"{key[0]}/{key[1]}", "GPUs": f"{count:g}",
                         "GPU-seconds (API)": f"{api_seconds.get(key[1], 0.0):.1f}",
                         "GPU-seconds (kube-state-metrics)": f"{seconds:.1f} ± {uncertain:.1f}"})
    seen = {pod for (_, pod) in running}
    targets = ksm_targets(prometheus, span)
    scrapes = ksm_scrape_times(prometheus, targets, window)
    totals: dict[str, tuple[float, float]] = {}  # namespace -> (GPU-hours, resolution in GPU-hours)
    for namespace in namespaces:
        missed = cost.unseen_resolution([h for h in held if h.namespace == namespace], seen, STEP_S, scrapes)
        resolution = quadrature(uncertain_of.get(namespace, [])) + missed
        totals[namespace] = (seconds_of.get(namespace, 0.0) / 3600, resolution / 3600)
    unseen = [h for h in held if h.pod not in seen]
    ev.note(ksm_scrapes(prometheus, targets, span, window[1] - window[0]))
    ev.tables["cost: each pod of the run"] = rows[:ROWS_SHOWN]
    ev.note(f"{len(unseen)} of the run's {len(held)} pods were never scraped Running (shorter than a scrape "
            f"interval of {STEP_S}s, mostly); their GPU-seconds count in the resolution, not as disagreement")
    ev.promql.append((newest.format("kube_pod_container_state_started", selector, span) + " (and _completion_time, "
                      "GPU requests, last seen Running)",
                      ", ".join(f"{ns}: {h:.4f} ± {r:.4f} GPU-h" for ns, (h, r) in sorted(totals.items()))
                      or "no series"))
    return totals


def ksm_scrape_times(prometheus: Prometheus, targets: list[str], window: tuple[float, float]) -> list[float] | None:
    """When Prometheus scraped kube-state-metrics successfully over the window (None: not found, so the nominal
    interval stands for them): the newest sample's scrape time, evaluated every second (a run of hours: coarser)."""
    times: set[float] = set()
    for labels in targets:
        answers = prometheus.range(f"timestamp(up{labels}) and up{labels} == 1",
                                   datetime.fromtimestamp(window[0] - STEP_S, timezone.utc),
                                   datetime.fromtimestamp(window[1] + STEP_S, timezone.utc),
                                   max(1.0, (window[1] - window[0]) / 10_000))  # Prometheus answers 11,000 points
        times |= {at for _, values in answers for _, at in values}
    return sorted(times) or None


def ksm_targets(prometheus: Prometheus, span: str) -> list[str]:
    """kube-state-metrics' scrape targets, as label selectors: found by the series it exports."""
    targets = prometheus.instant(f"group by (job, instance) (last_over_time(kube_pod_container_resource_requests"
                                 f"[{span}]))")
    return [f'{{job="{t.labels.get("job", "")}", instance="{t.labels.get("instance", "")}"}}' for t in targets]


def ksm_scrapes(prometheus: Prometheus, targets: list[str], span: str, window_s: float) -> str:
    """How often Prometheus scraped kube-state-metrics over the run (its target found by the series it exports):
    on a loaded host, scrapes that fail or come late leave pods unseen."""
    if not targets:
        return "kube-state-metrics: no kube_pod_container_resource_requests series, its scrapes not counted"
    parts = []
    for labels in targets:
        tried = prometheus.instant(f"count_over_time(up{labels}[{span}])")
        succeeded = prometheus.instant(f"sum_over_time(up{labels}[{span}])")
        slowest = prometheus.instant(f"max_over_time(scrape_duration_seconds{labels}[{span}])")
        parts.append(f"{labels}: {succeeded[0].value if succeeded else 0:.0f} of "
                     f"{tried[0].value if tried else 0:.0f} scrapes succeeded (every {STEP_S}s over "
                     f"{window_s:.0f}s: {window_s / STEP_S:.0f} due), slowest "
                     f"{slowest[0].value if slowest else float('nan'):.2f}s")
    return "kube-state-metrics scraped: " + "; ".join(parts)


def expect_agreement(ev: Evidence, name: str, found: Estimate | None, label: str = "") -> None:
    """The worst disagreement against its threshold; not checked where the resolution cannot decide it."""
    reason = cost.too_coarse(found, ev.thresholds[name]) if found is not None else ""
    if reason:
        ev.not_checked(name, reason, label=label)
    else:
        ev.expect(name, found, label=label)


def queue_gpu_hours(prometheus: Prometheus, promql: str, window_s: int, ev: Evidence) -> float | None:
    query = f"sum_over_time(({promql})[{window_s}s:{STEP_S}s]) * {STEP_S} / 3600"
    samples = prometheus.instant(query)
    ev.promql.append((query, f"{samples[0].value:.4f}" if samples else "no series"))
    return samples[0].value if samples else None


def per_model(target: Target, pods: list[Held]) -> list[dict[str, str]]:
    """GPU-hours per GPU model of the nodes the run's pods ran on (the inventory's model; a node gone since: model
    unknown)."""
    inventory = cluster_inventory(target.api)
    model_of_node = {g.node: g.model for g in inventory}
    hours = cost.gpu_hours_by_model(pods, model_of_node)
    total = sum(hours.values()) or 1.0
    return [{"GPU model": model, "nodes now": str(sum(1 for m in model_of_node.values() if m == model)),
             "GPU-hours": f"{h:.4f}", "share": f"{h / total:.1%}"} for model, h in hours.items()]


def slurm_accounting(profile: Profile, held: list[Held], jobs: list[Submitted], ev: Evidence) -> None:
    """GPU-hours per Slurm account: the harness's timelines of the run's jobs against slurmdbd's accounting of the
    same jobs (GPUs allocated x elapsed, whole seconds)."""
    slurm = backends.ALL["slurm"]
    assert isinstance(slurm, SlurmBackend)
    records = settled_accounting(slurm.rest(), jobs)
    accounted = {o.namespace: 0.0 for o in jobs}
    for job in jobs:
        accounted[job.namespace] += accounted_gpu_seconds(records.get(job.name, []))
    rows, found = [], []
    for tenant in profile.tenants:
        if tenant.namespace not in accounted:
            continue
        mine = [h for h in held if h.namespace == tenant.namespace]
        timelines = sum(h.gpu_seconds for h in mine) / 3600
        # each run of a job: its start and end polled every 0.25 s by the harness, whole seconds in slurmdbd
        resolution = quadrature([h.gpus * 1.0 for h in mine], ends=2) / 3600
        theirs = accounted[tenant.namespace] / 3600
        off = cost.disagreement(theirs, timelines, resolution)
        found.append(off)
        rows.append({"account": tenant.queues.get("slurm", ""), "tenant": tenant.name,
                     "GPU-hours (timelines)": f"{timelines:.4f}", "GPU-hours (slurmdbd)": f"{theirs:.4f} ± "
                     f"{resolution:.4f}", "disagreement": f"{off.value:.1%} [{off.low:.1%}, {off.high:.1%}]"})
    ev.tables["cost: GPU-hours per Slurm account, timelines against slurmdbd's accounting"] = rows
    expect_agreement(ev, "max_tenant_disagreement", cost.worst(found), label="slurmdbd")


@pytest.mark.gpupoc_last
def test_cost_attribution(target: Target, queue_model: Profile, prometheus: Prometheus, gpus_held: list[Held],
                          quota_reserved: list[Held], submitted: list[Submitted], gpupoc_config: RunConfig,
                          evidence: Callable[[str], Evidence]) -> None:
    ev = evidence(CRITERION.id)
    if not gpus_held:
        pytest.skip("no job of this run held GPUs before this check: cost attribution is computed over the run's "
                    "jobs, so run it with the suites whose jobs it attributes")
    start, end = min(h.start for h in gpus_held), time.time()
    # every target scraped once more since the last pod ended: the series say all there is to say
    poll(lambda: prometheus.instant("min(timestamp(up))"), lambda s: bool(s) and s[0].value > end, SETTLE_S)
    # a queue that reserves at admission holds quota before its pods run: its metric's window starts with that
    window_s = int(end - min([start, *(h.start for h in quota_reserved)])) + 2 * STEP_S
    tenant_of = {t.namespace: t.name for t in queue_model.tenants}
    pods = [h for h in gpus_held if h.backend != "slurm"]  # kube-state-metrics sees pods; Slurm's jobs: slurmdbd
    api = cost.gpu_hours_by(pods, tenant_of)
    ksm_by_ns = ksm_gpu_hours(prometheus, list(tenant_of), queue_model.gpu.resource, (start, end), ev, pods)
    rows, found = [], []
    for tenant in queue_model.tenants:
        mine = api.get(tenant.name, 0.0)
        theirs, resolution = ksm_by_ns.get(tenant.namespace, (0.0, 0.0))
        off = cost.disagreement(theirs, mine, resolution)
        found.append(off)
        rows.append({"tenant": tenant.name, "GPU-hours (API timelines)": f"{mine:.4f}",
                     "GPU-hours (kube-state-metrics)": f"{theirs:.4f} ± {resolution:.4f}",
                     "disagreement": f"{off.value:.1%} [{off.low:.1%}, {off.high:.1%}]"})
    ev.tables["cost: GPU-hours per tenant over the run"] = rows
    expect_agreement(ev, "max_tenant_disagreement", cost.worst(found))
    ev.tables["cost: GPU-hours per GPU model over the run (API timelines)"] = per_model(target, pods)
    on_slurm = [o for o in submitted if o.group == AUDIT_GROUP]
    if on_slurm:
        slurm_accounting(queue_model, [h for h in gpus_held if h.backend == "slurm"], on_slurm, ev)

    queue_rows: list[dict[str, str]] = []
    by_queue: list[Estimate] = []
    for system in sorted({backends.ALL[h.backend].queue_system for h in [*gpus_held, *quota_reserved]}):
        usage = backends.ALL[system].queue_usage
        promql = usage.promql if usage is not None else backends.ALL[system].usage_metric
        if not promql:
            continue
        running_here = [h for h in gpus_held if backends.ALL[h.backend].queue_system == system]
        # a queue that reserves quota at admission (Kueue) counts it from then until the job ends or is evicted,
        # whether or not its pods run: its metric is compared with the reservations, the pods shown beside them
        owned = backends.ALL[system].owned_kind()
        reserves = owned is not None and owned.reserved is not None
        mine_here = [h for h in quota_reserved if backends.ALL[h.backend].queue_system == system] if reserves \
            else running_here
        what = "quota reserved" if reserves else "pods running"
        own = {t.queues[system]: t.name for t in queue_model.tenants if t.queues.get(system)}
        for queue, tenant_name in cost.charged_queues(own, tenant_of, mine_here).items():
            # by the queue the scheduler charged each job to (a job in another tenant's queue counts there, as the
            # scheduler counts it; a job of one GPU model in its tenant's queue of that model)
            held = [h for h in mine_here if h.queue == queue]
            mine = sum(h.gpu_seconds for h in held) / 3600
            # a sampled gauge: each start and end known to a scrape; what lay between two scrapes may be missed
            resolution = (quadrature([h.gpus * STEP_S for h in held], ends=2)
                          + cost.unseen_resolution(held, set(), STEP_S)) / 3600
            metric = queue_gpu_hours(prometheus, promql.format(queue=queue, resource=queue_model.gpu.resource),
                                     window_s, ev)
            off = cost.disagreement(metric or 0.0, mine, resolution)
            by_queue.append(off)
            row = {"queue": f"{system} {queue}", "tenant": tenant_name, f"GPU-hours (API: {what})": f"{mine:.4f}"}
            if reserves:
                ran = sum(h.gpu_seconds for h in running_here if h.queue == queue) / 3600
                row["GPU-hours (API: pods running)"] = f"{ran:.4f}"
                if mine - ran > resolution:
                    ev.note(f"{system} queue {queue} reserved {mine - ran:.4f} GPU-h of quota more than its jobs' "
                            f"pods ran ({mine:.4f} against {ran:.4f}): admitted jobs whose pods were not running")
            queue_rows.append(row | {"GPU-hours (scheduler metric)": ("no series" if metric is None
                                                                       else f"{metric:.4f} ± {resolution:.4f}"),
                                     "disagreement": f"{off.value:.1%} [{off.low:.1%}, {off.high:.1%}]"})
    ev.tables["cost: GPU-hours per queue over the run"] = queue_rows
    worst_queue = cost.worst(by_queue)
    if worst_queue is None:
        ev.not_checked("max_queue_disagreement", "no job of the run went through a scheduler with a per-queue "
                       "usage metric")
    else:
        expect_agreement(ev, "max_queue_disagreement", worst_queue)
    ev.note(f"{len(gpus_held)} pods held GPUs over {end - start:.0f}s of the run; Prometheus subqueries at "
            f"{STEP_S}s steps")
    ev.series["gpus"] = {t.name: gpus_over_time([Interval(t.name, h.start, h.end, h.gpus) for h in gpus_held
                                                 if h.namespace == t.namespace], start, end, CHART_STEP_S)
                         for t in queue_model.tenants}
    ev.verdict()

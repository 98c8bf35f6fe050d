"""Batch training 3 — priority and preemption.

High-priority work is admitted within the threshold when low-priority work fills the GPUs;
preemptions are counted from the API and from Prometheus, and the two agree.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kubernetes import client

from harness.backends import Backend, GangJob
from harness.errors import WaitTimeout
from harness.profile import Profile
from harness.prometheus import Prometheus
from harness.record.evidence import Evidence
from harness.workloads import Workloads
from suites.training.common import LONG_RUN_S, attach_timeline, belongs, bound_pods, gpu_nodes

CRITERION = "training.priority_preemption"
STATEMENT = ("High-priority work is admitted within the threshold when low-priority work fills the GPUs; "
             "preemptions counted from the API and from Prometheus agree.")
LOW, HIGH = "gpupoc-low", "gpupoc-high"
# What each backend's metrics count as a preemption, and in which unit the API count must be taken.
PREEMPTION_METRIC = {
    "kueue": ("sum(kueue_preempted_workloads_total)", "workloads"),
    "kuberay": ("sum(kueue_preempted_workloads_total)", "workloads"),
    "volcano": ("sum(volcano_pod_preemption_victims)", "pods"),
    "default": ("sum(scheduler_preemption_victims_sum)", "pods"),
    # KAI counts no victims: it counts the gangs its preempt action placed; the API side counts the
    # high-priority jobs that got their GPUs by evicting someone.
    "kai": ('sum(kai_podgroups_scheduled_by_action{action="preempt"})', "preemptors"),
}


def counter(prometheus: Prometheus, promql: str) -> float:
    samples = prometheus.instant(promql)
    return samples[0].value if samples else 0.0


def run_preemption(api: client.ApiClient, backend: Backend, workloads: Workloads, profile: Profile,
                   prometheus: Prometheus, ev: Evidence, high_class: str = HIGH) -> None:
    tenant, per_node = profile.tenants[0], profile.gpu.per_node
    fillers = [GangJob(f"low-{i}", tenant, 1, per_node, priority_class=LOW, run_for_s=LONG_RUN_S,
                       max_retries=6) for i in range(gpu_nodes(api, profile))]
    urgent = GangJob("urgent", tenant, 1, per_node, priority_class=high_class, run_for_s=LONG_RUN_S)
    promql, unit = PREEMPTION_METRIC.get(backend.name, ("", "pods"))
    before = counter(prometheus, promql) if promql else 0.0
    started = time.time()

    ours = {(m["kind"], m["metadata"]["name"]) for job in fillers for m in backend.manifests(job)}
    counted_by = workloads.kueue_workloads(tenant.namespace) if unit == "workloads" else workloads.pods(tenant.namespace)
    for job in fillers:
        workloads.submit(job)
    pods = workloads.pods(tenant.namespace)
    pods.wait_until("low-priority work fills every GPU",
                    lambda objs: all(bound_pods(objs, j) == 1 for j in fillers), profile.timeouts.admit)
    victims: set[str] = set()
    pods.on_event(lambda event, pod: victims.add(pod["metadata"]["name"])
                  if event == "DELETED" and any(belongs(pod, j) for j in fillers) else None)
    workloads.submit(urgent)
    submitted = time.time()
    admitted_s: float | None = None
    try:
        pods.wait_until("the high-priority job bound", lambda objs: bound_pods(objs, urgent) == 1,
                        profile.threshold(CRITERION, "admit_within_s"))
        admitted_s = time.time() - submitted
    except WaitTimeout as exc:
        ev.note(f"not admitted: {exc}")

    def api_count() -> int:
        if unit == "pods":
            return len(victims)
        if unit == "preemptors":
            return int(admitted_s is not None and bool(victims))
        preempted = {t.name for t in workloads.timeline.transitions if t.kind == "Workload" and t.state == "preempted"}
        return sum(1 for name in preempted if queues_a_filler(name))

    def queues_a_filler(workload_name: str) -> bool:  # not a Workload another test left behind
        obj = counted_by.objects.get(workload_name) or counted_by.gone.get(workload_name) or {}
        owners = (obj.get("metadata") or {}).get("ownerReferences") or []
        return any((o.get("kind"), o.get("name")) in ours for o in owners)

    ev.expect("admit_within_s", None if admitted_s is None else round(admitted_s, 3),
              profile.threshold(CRITERION, "admit_within_s"), "<=", " s")
    if promql:
        metric_count = _metric_delta(prometheus, promql, before, api_count(), profile.timeouts.metric)
        if api_count() < metric_count:  # the API's events may trail the scrape: let them arrive
            try:
                counted_by.wait_until("preemptions seen in the API", lambda _: api_count() >= metric_count,
                                      profile.timeouts.metric)
            except WaitTimeout:
                pass  # the mismatch below says it
        api_count_now = api_count()
        ev.promql.append((promql, f"{metric_count:g} (before the test: {before:g})"))
        ev.expect("max_count_mismatch", abs(metric_count - api_count_now), profile.threshold(CRITERION,
                  "max_count_mismatch"), "<=")
    ev.note(f"preemptions counted from the API, in {unit}: {api_count()}")
    attach_timeline(ev, workloads.timeline, started)
    ev.verdict()


def _metric_delta(prometheus: Prometheus, promql: str, before: float, expected: int, timeout_s: float) -> float:
    """The counter's increase since the test began, once a scrape has caught up with the API (or timeout)."""
    deadline = time.monotonic() + timeout_s
    delta = counter(prometheus, promql) - before
    while delta < expected and time.monotonic() < deadline:
        time.sleep(1)  # Prometheus scrapes on its own schedule; there is no event to watch for a sample
        delta = counter(prometheus, promql) - before
    return delta


def test_priority_and_preemption(api: client.ApiClient, backend: Backend, workloads: Workloads,
                                 queue_model: Profile, prometheus: Prometheus,
                                 evidence: Callable[[str, str], Evidence]) -> None:
    run_preemption(api, backend, workloads, queue_model, prometheus, evidence(CRITERION, STATEMENT))

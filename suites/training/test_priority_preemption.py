"""Batch training 3 — priority and preemption.

High-priority work is admitted within the threshold when low-priority work fills the GPUs;
preemptions are counted from the API and from Prometheus, and the two agree.
"""

from __future__ import annotations

import time
from collections.abc import Callable


from harness.backends import Backend
from harness.backends.base import PREEMPTION_COUNTER
from harness.criteria.training.priority_preemption import CRITERION, VICTIM_PODS, VICTIM_WORKLOADS, api_count
from harness.core.errors import WaitTimeout
from harness.config.profile import Profile
from harness.cluster.prometheus import Prometheus
from harness.cluster.wait import poll
from harness.record.evidence import Evidence
from harness.targets.target import Target
from harness.jobs.system import JobSystem
from suites.training.common import (LONG_RUN_S, attach_timeline, belongs, bound_pods, gpu_nodes,
                                    wait_running_for_its_scheduler)


def counter(prometheus: Prometheus, promql: str) -> float:
    samples = prometheus.instant(promql)
    return samples[0].value if samples else 0.0


def run_preemption(target: Target, backend: Backend, workloads: JobSystem, profile: Profile,
                   prometheus: Prometheus, ev: Evidence) -> None:
    tenant, per_node = profile.tenants[0], profile.gpu.per_node
    priorities = profile.workloads.pod_defaults  # the reference model's priority classes, or the cluster's own
    fillers = [workloads.gang(f"low-{i}", tenant, 1, per_node,
                              priority_class=priorities.low_priority_class, run_for_s=LONG_RUN_S, max_retries=6)
               for i in range(gpu_nodes(workloads, profile))]
    urgent = workloads.gang("urgent", tenant, 1, per_node, priority_class=priorities.high_priority_class,
                            run_for_s=LONG_RUN_S)
    counter_lacking = backend.lacks(PREEMPTION_COUNTER, target.features)
    preemption = backend.preemption_counter()
    before = counter(prometheus, preemption.promql) if preemption and not counter_lacking and not preemption.gauge \
        else 0.0
    started = time.time()

    owned = workloads.owned(tenant.namespace)
    ours = {(m["kind"], m["metadata"]["name"]) for job in fillers for m in backend.manifests(job)} if owned else set()
    for job in fillers:
        workloads.submit(job)
    pods = workloads.members(tenant.namespace)
    pods.wait_until("low-priority work fills every GPU",
                    lambda objs: all(bound_pods(objs, j) == 1 for j in fillers), profile.timeouts.admit)
    wait_running_for_its_scheduler(target.api, backend, fillers, profile.timeouts.admit)
    victims: set[str] = set()
    pods.on_event(lambda event, pod: victims.add(pod["metadata"]["name"])
                  if event == "DELETED" and any(belongs(pod, j) for j in fillers) else None)
    workloads.submit(urgent)
    submitted = time.time()
    admitted_s: float | None = None
    waited_s = 0.0
    try:  # bounded by the operation's timeout, not the threshold: a late admission is measured, then compared
        pods.wait_until("the high-priority job bound", lambda objs: bound_pods(objs, urgent) == 1,
                        profile.timeouts.admit)
        admitted_s = time.time() - submitted
    except WaitTimeout as exc:
        waited_s = time.time() - submitted
        ev.note(f"never admitted: {waited_s:.1f}s is a lower bound (the admit timeout); {exc}")

    def counted() -> int:
        unit = preemption.unit if preemption else VICTIM_PODS
        return api_count(unit, len(victims), preempted_fillers(), admitted_s is not None)

    def preempted_fillers() -> int:  # Workloads of our fillers only, never one another test left behind
        if owned is None:
            return 0
        names = {t.name for t in workloads.timeline.transitions if t.kind == owned.kind and t.state == "preempted"}
        return sum(1 for name in names if queues_a_filler(name))

    def queues_a_filler(name: str) -> bool:
        obj = (owned.objects.get(name) or owned.gone.get(name) or {}) if owned else {}
        owners = (obj.get("metadata") or {}).get("ownerReferences") or []
        return any((o.get("kind"), o.get("name")) in ours for o in owners)

    ev.expect("admit_within_s", round(admitted_s if admitted_s is not None else waited_s, 3))
    if preemption is None or counter_lacking:
        ev.not_checked("max_count_mismatch", counter_lacking or f"{backend.name}: no preemption counter")
    else:
        if admitted_s is not None and counted() == 0:  # the urgent job runs on a full cluster: someone made room
            try:  # (a requeued Slurm job's member leaves at the next poll, after the urgent job has started)
                pods.wait_until("the preempted member seen leaving", lambda _: counted() >= 1, profile.timeouts.metric)
            except WaitTimeout:
                pass  # the mismatch below says it
        if preemption.gauge and admitted_s is not None:  # a scrape since the preemption, not an earlier one's value
            poll(lambda: counter(prometheus, f"max(timestamp({preemption.promql}))"),
                 lambda at: at > submitted + admitted_s, profile.timeouts.metric)
        metric_count = _metric_delta(prometheus, preemption.promql, before, counted(), profile.timeouts.metric)
        if counted() < metric_count:  # the API's events may trail the scrape: let them arrive
            try:
                (owned if preemption.unit == VICTIM_WORKLOADS and owned else pods).wait_until(
                    "preemptions seen in the API", lambda _: counted() >= metric_count, profile.timeouts.metric)
            except WaitTimeout:
                pass  # the mismatch below says it
        ev.promql.append((preemption.promql, f"{metric_count:g} (a gauge: its latest preemption's)" if preemption.gauge
                          else f"{metric_count:g} (before the test: {before:g})"))
        ev.expect("max_count_mismatch", abs(metric_count - counted()))
        ev.note(f"preemptions counted from the API, in {preemption.unit}: {counted()}")
    attach_timeline(ev, workloads.timeline, started)
    ev.verdict()


def _metric_delta(prometheus: Prometheus, promql: str, before: float, expected: int, timeout_s: float) -> float:
    """The counter's increase since the test began, once a scrape has caught up with the API (or timeout)."""
    return poll(lambda: counter(prometheus, promql) - before, lambda delta: delta >= expected, timeout_s)


def test_priority_and_preemption(target: Target, backend: Backend, workloads: JobSystem,
                                 queue_model: Profile, prometheus: Prometheus,
                                 evidence: Callable[[str], Evidence]) -> None:
    run_preemption(target, backend, workloads, queue_model, prometheus, evidence(CRITERION.id))

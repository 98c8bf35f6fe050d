"""Operations 1 — schedulers combined: Kueue's queue and admission in front of Volcano's placement.

The first tenant submits one job more than the cluster holds (gangs of 2 whole nodes, each running a few seconds).
The queue must hold what does not fit (no pod of it exists, let alone is bound, before its admission), the placing
scheduler must place each admitted job whole, and every job must end. Measured from the objects: each pod's
PodScheduled time against its job's admission (the Workload's QuotaReserved), the seconds from admission to the
last pod bound, and who owned the queue, the admission, the placement and the lifecycle.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from harness.backends import Backend
from harness.backends.base import COMBINED
from harness.config.profile import Profile
from harness.cluster.wait import poll
from harness.core.errors import WaitTimeout
from harness.criteria.operations.combined import CRITERION, bound_before, owners, unplaced_s
from harness.criteria.training.capacity_elasticity import epoch, scheduled_at
from harness.jobs.kubernetes import Workloads
from harness.jobs.model import GangJob
from harness.jobs.system import JobSystem
from harness.record.evidence import Evidence
from harness.targets.target import Target
from harness.jobs.model import ADMITTED, RUNNING
from suites.training.common import (LONG_RUN_S, belongs, bound_pods, gpu_nodes, require, state_is,
                                    wait_running_for_its_scheduler)

NODES_PER_JOB = 2
RUN_FOR_S = 5.0
GRACE_S = 15.0  # how long past its threshold the urgent job's placement is waited for
UNPLACEABLE_LABEL = "gpupoc.io/no-node-has-this"  # a node selector no node matches: a job that cannot be placed


def test_combined(target: Target, backend: Backend, workloads: JobSystem, queue_model: Profile,
                  evidence: Callable[[str], Evidence]) -> None:
    require(target, backend, COMBINED)
    combined_run(backend, workloads, queue_model, evidence(CRITERION.id))


def combined_run(backend: Backend, workloads: JobSystem, profile: Profile, ev: Evidence) -> None:
    tenant, per_node = profile.tenants[0], profile.gpu.per_node
    count = gpu_nodes(workloads, profile) // NODES_PER_JOB + 1  # one job more than the cluster holds
    jobs = [workloads.gang(f"combined-{i}", tenant, NODES_PER_JOB, per_node, run_for_s=RUN_FOR_S)
            for i in range(count)]
    ev.note(f"{count} jobs of {NODES_PER_JOB} pods x {per_node} GPUs for {tenant.name}, one more than the "
            f"cluster holds; each runs {RUN_FOR_S:g} s")
    queued = workloads.jobs(tenant.namespace)
    pods = workloads.members(tenant.namespace)
    held: list[str] = []  # the cluster full: what the job left out looked like

    def short(_event: str, _pod: dict[str, Any]) -> None:  # the cluster full: the last job, as it waits
        running = sum(1 for p in pods.objects.values() if running_pod(p))
        if not held and running >= (count - 1) * NODES_PER_JOB:
            held.extend(waiting_state(workloads, j, queued.objects, pods.objects) for j in jobs
                        if not any(belongs(p, j) and running_pod(p) for p in pods.objects.values()))

    pods.on_event(short)
    for job in jobs:
        workloads.submit(job)
    def done(objs: dict[str, Any]) -> bool:
        return all(done_pods(objs, j) >= j.pods for j in jobs)

    try:
        pods.wait_until(f"the {count} jobs ended", done, profile.timeouts.complete,
                        describe=lambda objs: f"{sum(done_pods(objs, j) for j in jobs)} of "
                                              f"{sum(j.pods for j in jobs)} pods succeeded")
    except WaitTimeout as exc:
        ev.note(str(exc))
    rows, before, unplaced = tally(workloads, jobs, time.time())
    ev.note("while the cluster was full, the job left out: " + ("; ".join(held) or "none seen waiting"))
    if any(workloads.status_of(j, {**queued.gone, **queued.objects}) for j in jobs):
        urgent_rows, urgent_before = preempting_an_enqueued_job(backend, workloads, profile, ev)
    else:  # the jobs bypassed the queue: there is no admission to preempt for
        urgent_rows, urgent_before = [], 0
        ev.not_checked("max_preemptor_unplaced_s", "no job of the case reached the queue")
    ev.expect("max_pods_bound_before_admission", before + urgent_before)
    ev.expect("max_admitted_unplaced_s", round(max(unplaced), 1) if unplaced else None)
    ev.tables["who owned each job"] = rows + urgent_rows
    ev.verdict()


def tally(workloads: JobSystem, jobs: list[GangJob], end: float) -> tuple[list[dict[str, Any]], int, list[float]]:
    """Per job: who owned it (a table row), its pods bound before its admission, its admission to placement."""
    queued, pods = workloads.jobs(jobs[0].tenant.namespace), workloads.members(jobs[0].tenant.namespace)
    seen, workload_objects = {**pods.gone, **pods.objects}, {**queued.gone, **queued.objects}
    rows, before, unplaced = [], 0, []
    for job in jobs:
        mine = [p for p in seen.values() if belongs(p, job)]
        status = workloads.status_of(job, workload_objects)
        admitted = epoch(status.admitted_at) if status else None
        bound = [scheduled_at(p) for p in mine]
        before += bound_before(admitted, bound)
        wait = unplaced_s(admitted, bound, job.pods, end)
        if wait is not None:
            unplaced.append(wait)
        workload = next((w for w in workload_objects.values() if owned_by(w, job)), None)
        rows.append({"job": job.name, **owners(workload, mine),
                     "admitted to placed s": round(wait, 1) if wait is not None else "never admitted"})
    return rows, before, unplaced


def preempting_an_enqueued_job(backend: Backend, workloads: JobSystem, profile: Profile,
                               ev: Evidence) -> tuple[list[dict[str, Any]], int]:
    """The queue preempts a job the placing scheduler has taken in but cannot place (its pods fit no node, on
    purpose), to admit an urgent one: the urgent job must still be placed, on the node left free. Its rows, and
    its pods bound before its admission; the seconds from its admission to placement go into the evidence.

    Each step waits for the placing scheduler's own record, so that the mechanism decides, not a race with its
    once-a-second status writes: the low-priority jobs running for it, the job to preempt taken in (Volcano: its
    PodGroup Inqueue) and tried."""
    tenant, per_node = profile.tenants[0], profile.gpu.per_node
    classes = profile.workloads.pod_defaults
    fillers = [workloads.gang(f"fill-{i}", tenant, 1, per_node, run_for_s=LONG_RUN_S,
                              priority_class=classes.low_priority_class)
               for i in range(gpu_nodes(workloads, profile) - 1)]
    stuck = workloads.gang("unplaceable", tenant, 1, per_node, run_for_s=LONG_RUN_S,
                           priority_class=classes.low_priority_class, node_selector={UNPLACEABLE_LABEL: "true"})
    urgent = workloads.gang("urgent", tenant, 1, per_node, run_for_s=LONG_RUN_S,
                            priority_class=classes.high_priority_class)
    queued, pods = workloads.jobs(tenant.namespace), workloads.members(tenant.namespace)
    for job in fillers:
        workloads.submit(job)
    pods.wait_until("low-priority work on every node but one", lambda o: all(bound_pods(o, j) == 1 for j in fillers),
                    profile.timeouts.admit)
    assert isinstance(workloads, Workloads)  # the pair's jobs are Kubernetes Jobs
    api = workloads.api
    workloads.submit(stuck)
    try:
        wait_running_for_its_scheduler(api, backend, fillers, profile.timeouts.admit)
        queued.wait_until(f"{stuck.name} admitted (its pods fit no node)", state_is(workloads, stuck, ADMITTED,
                                                                                     RUNNING), profile.timeouts.admit)
        pods.wait_until(f"{stuck.name} tried by the placing scheduler (its pod marked unschedulable)",
                        lambda o: any(belongs(p, stuck) and refused(p) for p in o.values()), profile.timeouts.admit)
        taken_in = poll(lambda: backend.taken_in(api, tenant.namespace, stuck.name), bool, profile.timeouts.admit)
        if not taken_in:
            raise WaitTimeout(f"{stuck.name} not taken in by the placing scheduler after "
                              f"{profile.timeouts.admit:.0f}s (Volcano: its PodGroup not Inqueue)")
    except WaitTimeout as exc:
        ev.not_checked("max_preemptor_unplaced_s", f"the job to preempt could not be set up: {exc}")
        return [], 0
    workloads.submit(urgent)
    submitted = time.time()
    limit = ev.thresholds["max_admitted_unplaced_s"] + GRACE_S
    try:
        queued.wait_until(f"{urgent.name} admitted", state_is(workloads, urgent, ADMITTED, RUNNING),
                          profile.timeouts.admit)
        pods.wait_until(f"{urgent.name} placed on the free node", lambda o: bound_pods(o, urgent) == 1, limit,
                        describe=lambda o: ", ".join(f"{p['metadata']['name']} {(p.get('status') or {}).get('phase')}"
                                                     for p in o.values() if belongs(p, urgent)) or "no pod yet")
    except WaitTimeout as exc:
        ev.note(f"preemption across the two: {exc}")
    end = time.time()
    [stuck_row], _, _ = tally(workloads, [stuck], end)
    stuck_row["admitted to placed s"] = "preempted by the queue; its pods fit no node, on purpose"
    urgent_rows, before, waits = tally(workloads, [urgent], end)
    urgent_pod = next((p for p in pods.objects.values() if belongs(p, urgent)), None)
    why = next((c.get("message", "") for c in ((urgent_pod or {}).get("status") or {}).get("conditions") or []
                if c.get("type") == "PodScheduled" and c.get("status") != "True"), "")
    stuck_state = workloads.status_of(stuck, queued.objects)
    ev.note(f"preemption across the two: {len(fillers)} low-priority jobs on all nodes but one, {stuck.name} "
            f"admitted but fitting no node, then {urgent.name} (high priority): {stuck.name} "
            f"{stuck_state.state if stuck_state else 'gone'}, {urgent.name} "
            + (f"placed {waits[0]:.1f} s after its admission" if waits and bound_pods(pods.objects, urgent)
               else ("not admitted" if not waits else "not placed") + (f" ({why})" if why else "")))
    # never admitted: the queue did not preempt for it, which leaves it as unplaced as a refusal would
    ev.expect("max_preemptor_unplaced_s", round(waits[0] if waits else end - submitted, 1))
    return [stuck_row, *urgent_rows], before


def refused(pod: dict[str, Any]) -> bool:
    """The scheduler tried the pod and found no node for it (PodScheduled False, Unschedulable)."""
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
               for c in (pod.get("status") or {}).get("conditions") or [])


def running_pod(pod: dict[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName")) and (pod.get("status") or {}).get("phase") == "Running"


def done_pods(objs: dict[str, Any], job: GangJob) -> int:
    return sum(1 for p in objs.values() if belongs(p, job) and (p.get("status") or {}).get("phase") == "Succeeded")


def owned_by(obj: dict[str, Any], job: GangJob) -> bool:
    return any(r.get("name") == job.name for r in obj["metadata"].get("ownerReferences") or [])


def waiting_state(workloads: JobSystem, job: GangJob, queued: dict[str, Any], pods: dict[str, Any]) -> str:
    status = workloads.status_of(job, queued)
    mine = [p for p in pods.values() if belongs(p, job)]
    bound = sum(1 for p in mine if (p.get("spec") or {}).get("nodeName"))
    return (f"{job.name}: {status.state if status else 'unknown to the queue'}"
            + (f" ({status.reason})" if status and status.reason else "")
            + f", {len(mine)} pods ({bound} bound)")

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
from harness.core.errors import WaitTimeout
from harness.criteria.operations.combined import CRITERION, bound_before, owners, unplaced_s
from harness.criteria.training.capacity_elasticity import epoch, scheduled_at
from harness.jobs.model import GangJob
from harness.jobs.system import JobSystem
from harness.record.evidence import Evidence
from harness.targets.target import Target
from suites.training.common import belongs, gpu_nodes, require

NODES_PER_JOB = 2
RUN_FOR_S = 5.0


def test_combined(target: Target, backend: Backend, workloads: JobSystem, queue_model: Profile,
                  evidence: Callable[[str], Evidence]) -> None:
    require(target, backend, COMBINED)
    combined_run(workloads, queue_model, evidence(CRITERION.id))


def combined_run(workloads: JobSystem, profile: Profile, ev: Evidence) -> None:
    tenant, per_node = profile.tenants[0], profile.gpu.per_node
    count = gpu_nodes(workloads, profile) // NODES_PER_JOB + 1  # one job more than the cluster holds
    jobs = [GangJob(workloads.job_name(f"combined-{i}"), tenant, NODES_PER_JOB, per_node, run_for_s=RUN_FOR_S)
            for i in range(count)]
    ev.note(f"{count} jobs of {NODES_PER_JOB} pods x {per_node} GPUs for {tenant.name}, one more than the "
            f"cluster holds; each runs {RUN_FOR_S:g} s")
    queued = workloads.jobs(tenant.namespace)
    pods = workloads.members(tenant.namespace)
    held: list[str] = []

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
    end = time.time()
    seen = {**pods.gone, **pods.objects}
    rows, before, unplaced = [], 0, []
    for job in jobs:
        mine = [p for p in seen.values() if belongs(p, job)]
        status = workloads.status_of(job, {**queued.gone, **queued.objects})
        admitted = epoch(status.admitted_at) if status else None
        bound = [scheduled_at(p) for p in mine]
        before += bound_before(admitted, bound)
        wait = unplaced_s(admitted, bound, job.pods, end)
        if wait is not None:
            unplaced.append(wait)
        workload = next((w for w in {**queued.gone, **queued.objects}.values() if owned_by(w, job)), None)
        rows.append({"job": job.name, **owners(workload, mine),
                     "admitted to placed s": round(wait, 1) if wait is not None else "never admitted"})
    ev.expect("max_pods_bound_before_admission", before)
    ev.expect("max_admitted_unplaced_s", round(max(unplaced), 1) if unplaced else None)
    ev.tables["who owned each job"] = rows
    ev.note("while the cluster was full, the job left out: " + ("; ".join(held) or "none seen waiting"))
    ev.verdict()


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

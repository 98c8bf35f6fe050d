"""Batch training 6 — control-plane recovery.

One tenant's job runs through the whole case; the other tenant fills the rest of the cluster and has
as many jobs again waiting. The backend's scheduling controllers are stopped; while they are down the
running jobs that filled the cluster are deleted, so capacity frees that nobody can hand out; then the
controllers start again. Measured: the time from the controllers back to the first admission of a
waiting job, the waiting jobs never admitted (listed), jobs admitted twice, and whether the job that
ran through the restart kept its pods. On the sim the controllers are the backend's processes; on a
real cluster their Deployments are scaled to zero and back (only with --allow-destructive).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from harness.backends import Backend
from harness.jobs.model import GangJob, job_of
from harness.backends.base import CONTROLLER_RESTART
from harness.criteria.training.control_plane_recovery import (CRITERION, Bind, admitted_twice, disturbed,
                                                              first_admission_after, lost)
from harness.core.errors import WaitTimeout
from harness.jobs.system import JobSystem
from harness.config.profile import Profile, Tenant
from harness.record.evidence import Evidence
from harness.targets.restart import controller_restart
from harness.targets.target import Target
from harness.cluster.tracker import Objects
from suites.training.common import LONG_RUN_S, attach_timeline, belongs, bound_pods, gpu_nodes, require, state_is


def running_uids(objects: Objects, job: GangJob) -> set[str]:
    return {p["metadata"]["uid"] for p in objects.values() if belongs(p, job)
            and (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")}


def test_control_plane_recovery(target: Target, backend: Backend, workloads: JobSystem, queue_model: Profile,
                                destructive: Callable[[str], None], disrupts: Callable[[str], None],
                                evidence: Callable[[str], Evidence]) -> None:
    require(target, backend, CONTROLLER_RESTART)
    destructive(f"stop and start {backend.name}'s scheduling controllers")
    profile, ev = queue_model, evidence(CRITERION.id)
    steady_tenant, busy = profile.tenants[-1], profile.tenants[0]
    per_node, nodes = profile.gpu.per_node, gpu_nodes(workloads, profile)
    def whole_node(name: str, tenant: Tenant) -> GangJob:
        return GangJob(workloads.job_name(name), tenant, 1, per_node, run_for_s=LONG_RUN_S)

    steady = whole_node("cpr-steady", steady_tenant)
    fillers = [whole_node(f"cpr-fill-{i}", busy) for i in range(nodes - 1)]
    waiting = [whole_node(f"cpr-wait-{i}", busy) for i in range(nodes - 1)]
    restart = controller_restart(target, backend, profile.timeouts.run)
    for part in restart.names:
        disrupts(part)
    ev.note(f"{nodes} nodes x {per_node} GPUs: {steady.name} runs through the restart, {len(fillers)} fillers "
            f"hold the rest, {len(waiting)} jobs wait; controllers restarted: {', '.join(restart.names)}.")
    started = time.time()

    binds: list[Bind] = []
    seen: set[str] = set()

    def on_pod(_event: str, pod: dict[str, Any]) -> None:
        uid = pod["metadata"].get("uid", "")
        if (pod.get("spec") or {}).get("nodeName") and uid not in seen and job_of(pod):
            seen.add(uid)
            binds.append(Bind(str(job_of(pod)), uid, time.time()))

    steady_pods, busy_pods = workloads.members(steady_tenant.namespace), workloads.members(busy.namespace)
    steady_pods.on_event(on_pod)
    busy_pods.on_event(on_pod)
    workloads.submit(steady)
    for job in fillers:
        workloads.submit(job)
    steady_pods.wait_until(f"{steady.name} running", lambda o: len(running_uids(o, steady)) == 1, profile.timeouts.run)
    busy_pods.wait_until(f"{len(fillers)} fillers bound", lambda o: all(bound_pods(o, j) == 1 for j in fillers),
                         profile.timeouts.admit)
    for job in waiting:
        workloads.submit(job)
    jobs = workloads.jobs(busy.namespace)
    for job in waiting:
        jobs.wait_until(f"{job.name} queued", state_is(workloads, job, "queued"), profile.timeouts.apply)

    before = {steady.name: running_uids(steady_pods.objects, steady)}
    stopped_at = time.time()
    try:
        restart.stop()
        ev.note(workloads.end_while_stopped(fillers, profile.timeouts.delete))
    finally:  # whatever happened, the controllers come back before anything else runs
        back_at = restart.start()
    ev.note(f"controllers down for {back_at - stopped_at:.1f}s; capacity for {len(fillers)} jobs freed meanwhile.")
    try:  # bounded by the admission timeout: what is still waiting then is lost, and listed
        busy_pods.wait_until(f"the {len(waiting)} waiting jobs admitted after the restart",
                             lambda o: all(bound_pods(o, j) == 1 for j in waiting), profile.timeouts.admit)
    except WaitTimeout as exc:
        ev.note(str(exc))

    names = {j.name for j in waiting}
    resume = first_admission_after(binds, names, back_at)
    never = lost(binds, {j.name: j.pods for j in waiting})
    twice = admitted_twice(binds, {j.name: j.pods for j in [steady, *fillers, *waiting]})
    shaken = disturbed(before, {steady.name: running_uids(steady_pods.objects, steady)})
    ev.expect("resume_within_s", None if resume is None else round(resume, 3))
    ev.expect("max_jobs_lost", len(never))
    ev.expect("max_admitted_twice", len(twice))
    ev.expect("max_running_disturbed", len(shaken))
    for label, found in (("lost (never admitted after the restart)", never), ("admitted twice", twice),
                         ("disturbed", shaken)):
        if found:
            ev.note(f"{label}: {', '.join(found)}")
    attach_timeline(ev, workloads.timeline, started)
    ev.verdict()

"""A busy queue through a controller outage: the shape of training.control_plane_recovery and operations.upgrade.

One tenant's job runs through the whole case; the other tenant fills the rest of the cluster and has as many jobs
again waiting. While the controllers are out the fillers are deleted, so capacity frees that only the controllers
back can hand out. Every pod bound is recorded (job, pod, when) from the watch, and measured against the moment
the controllers were back: the first admission of a waiting job, the waiting jobs never admitted, the jobs admitted
twice, and whether the job running through kept its pods.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from harness.cluster.tracker import Objects
from harness.config.profile import Profile, Tenant
from harness.core.errors import WaitTimeout
from harness.criteria.training.control_plane_recovery import (Bind, admitted_twice, disturbed, first_admission_after,
                                                              lost)
from harness.jobs.model import GangJob, job_of
from harness.jobs.system import JobSystem
from harness.record.evidence import Evidence
from suites.training.common import LONG_RUN_S, attach_timeline, belongs, bound_pods, gpu_nodes, state_is


def running_uids(objects: Objects, job: GangJob) -> set[str]:
    return {p["metadata"]["uid"] for p in objects.values() if belongs(p, job)
            and (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")}


@dataclass
class BusyQueue:
    workloads: JobSystem
    profile: Profile
    prefix: str  # of the jobs' names: cpr, upg
    steady: GangJob = field(init=False)
    fillers: list[GangJob] = field(init=False)
    waiting: list[GangJob] = field(init=False)
    binds: list[Bind] = field(default_factory=list)
    started: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        per_node, nodes = self.profile.gpu.per_node, gpu_nodes(self.workloads, self.profile)
        self.steady_tenant, self.busy = self.profile.tenants[-1], self.profile.tenants[0]

        def whole_node(name: str, tenant: Tenant) -> GangJob:
            return self.workloads.gang(f"{self.prefix}-{name}", tenant, 1, per_node, run_for_s=LONG_RUN_S)

        self.steady = whole_node("steady", self.steady_tenant)
        self.fillers = [whole_node(f"fill-{i}", self.busy) for i in range(nodes - 1)]
        self.waiting = [whole_node(f"wait-{i}", self.busy) for i in range(nodes - 1)]
        self.nodes, self.per_node = nodes, per_node
        self._seen: set[str] = set()
        self.steady_pods = self.workloads.members(self.steady_tenant.namespace)
        self.busy_pods = self.workloads.members(self.busy.namespace)

    def describe(self, outage: str) -> str:
        return (f"{self.nodes} nodes x {self.per_node} GPUs: {self.steady.name} runs through {outage}, "
                f"{len(self.fillers)} fillers hold the rest, {len(self.waiting)} jobs wait")

    def _on_pod(self, _event: str, pod: dict[str, Any]) -> None:
        uid = pod["metadata"].get("uid", "")
        if (pod.get("spec") or {}).get("nodeName") and uid not in self._seen and job_of(pod):
            self._seen.add(uid)
            self.binds.append(Bind(str(job_of(pod)), uid, time.time()))

    def fill(self) -> dict[str, set[str]]:
        """The steady job running, the fillers bound, the waiting jobs queued; the steady job's running pods."""
        timeouts = self.profile.timeouts
        self.steady_pods.on_event(self._on_pod)
        self.busy_pods.on_event(self._on_pod)
        self.workloads.submit(self.steady)
        for job in self.fillers:
            self.workloads.submit(job)
        self.steady_pods.wait_until(f"{self.steady.name} running",
                                    lambda o: len(running_uids(o, self.steady)) == 1, timeouts.run)
        self.busy_pods.wait_until(f"{len(self.fillers)} fillers bound",
                                  lambda o: all(bound_pods(o, j) == 1 for j in self.fillers), timeouts.admit)
        for job in self.waiting:
            self.workloads.submit(job)
        jobs = self.workloads.jobs(self.busy.namespace)
        for job in self.waiting:
            jobs.wait_until(f"{job.name} queued", state_is(self.workloads, job, "queued"), timeouts.apply)
        return {self.steady.name: running_uids(self.steady_pods.objects, self.steady)}

    def wait_admitted(self, after: str, ev: Evidence) -> None:
        """The waiting jobs admitted, bounded by the admission timeout: what is still waiting then is lost."""
        try:
            self.busy_pods.wait_until(f"the {len(self.waiting)} waiting jobs admitted after {after}",
                                      lambda o: all(bound_pods(o, j) == 1 for j in self.waiting),
                                      self.profile.timeouts.admit)
        except WaitTimeout as exc:
            ev.note(str(exc))

    def measure(self, ev: Evidence, since: float, before: dict[str, set[str]], after: str,
                resume: str = "resume_within_s") -> None:
        """`resume` (seconds from `since` to the first admission of a waiting job), max_jobs_lost,
        max_admitted_twice and max_running_disturbed into `ev`."""
        names = {j.name for j in self.waiting}
        first = first_admission_after(self.binds, names, since)
        never = lost(self.binds, {j.name: j.pods for j in self.waiting})
        twice = admitted_twice(self.binds, {j.name: j.pods for j in [self.steady, *self.fillers, *self.waiting]})
        shaken = disturbed(before, {self.steady.name: running_uids(self.steady_pods.objects, self.steady)})
        ev.expect(resume, None if first is None else round(first, 3))
        ev.expect("max_jobs_lost", len(never))
        ev.expect("max_admitted_twice", len(twice))
        ev.expect("max_running_disturbed", len(shaken))
        for label, found in ((f"lost (never admitted after {after})", never), ("admitted twice", twice),
                             ("disturbed", shaken)):
            if found:
                ev.note(f"{label}: {', '.join(found)}")
        attach_timeline(ev, self.workloads.timeline, self.started)

"""Batch training 9 — GPUs claimed through Dynamic Resource Allocation (DRA).

The profile names the DeviceClass a cluster's GPUs are claimed from and the driver whose ResourceSlices publish them
(gpu.dra). The last tenant's jobs claim GPUs from that class, a ResourceClaimTemplate per job (a claim per pod), up
to its GPU limit; then one job more, beyond its limit, which its queue must hold; then the first tenant's jobs claim
what is left. Read back from the API server: each pod's claim and the devices allocated to it (as many as asked,
none in two claims), and none allocated to the held job.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from harness.cluster.apply import dynamic_client
from harness.backends import Backend
from harness.backends.base import DRA, QUEUE_QUOTA
from harness.config.profile import Profile, Tenant
from harness.core.errors import WaitTimeout
from harness.cluster.wait import WaitFailed
from harness.criteria.training.dra_allocation import (CRITERION, PodClaim, count_mismatch, devices_shared,
                                                      pod_claims, unallocated)
from harness.jobs.kubernetes import Workloads
from harness.jobs.model import GPU_CLAIM, GangJob
from harness.jobs.system import JobSystem
from harness.record.evidence import Evidence
from harness.targets.target import Target
from suites.training.common import LONG_RUN_S, belongs, bound_pods, require

PODS_PER_JOB = 2
UNSCHEDULABLE_FOR_S = 5.0  # every waiting pod unschedulable this long: the scheduler's answer, not a moment's


def test_dra_allocation(target: Target, backend: Backend, workloads: JobSystem, queue_model: Profile,
                        evidence: Callable[[str], Evidence]) -> None:
    profile, ev = queue_model, evidence(CRITERION.id)
    if profile.gpu.dra is None:
        pytest.skip("the profile names no DRA DeviceClass (gpu.dra: device_class and driver): the cluster's GPUs are "
                    "claimed through the device plugin's resource only")
    require(target, backend, DRA)
    assert isinstance(workloads, Workloads)  # a backend with DRA runs its jobs on Kubernetes
    dra = profile.gpu.dra
    capacity = published_devices(workloads, dra.driver)
    size = profile.gpu.job_sizes.get("medium", max(1, profile.gpu.per_node // 2))
    per_job = PODS_PER_JOB * size
    owner, tenant = profile.tenants[0], profile.tenants[-1]
    limit = min(tenant.limit_gpus or capacity, capacity)
    if limit < per_job:
        pytest.skip(f"{capacity} devices of driver {dra.driver} published on the nodes the profile's pods may use "
                    f"(ResourceSlices), {tenant.name} may hold {limit}: fewer than one job of {per_job}")
    ev.note(f"{capacity} devices of driver {dra.driver} in the ResourceSlices; jobs of {PODS_PER_JOB} pods x {size} "
            f"claimed from DeviceClass {dra.device_class}; {tenant.name} may hold {limit}")

    def jobs(base: str, who: Tenant, count: int) -> list[GangJob]:
        return [workloads.gang(f"{base}-{i}", who, PODS_PER_JOB, size, run_for_s=LONG_RUN_S,
                               device_class=dra.device_class) for i in range(count)]

    within = jobs("dra", tenant, limit // per_job)
    placed = claimed(workloads, profile, ev, within)
    quota = not backend.lacks(QUEUE_QUOTA, target.features) and tenant.limit_gpus is not None \
        and capacity - limit >= per_job
    if quota:
        [over] = jobs("dra-over", tenant, 1)
        workloads.submit(over)
        pods = workloads.members(tenant.namespace)
        held_for = profile.timeouts.observe
        pods.hold(held_for, until=lambda: bool(allocated_to(workloads, [over])), recheck_s=0.5)
        over_gpus = sum(len(c.devices) for c in allocated_to(workloads, [over]))
        ev.note(f"a job of {per_job} more by {tenant.name}, beyond its limit of {tenant.limit_gpus}: "
                f"{over_gpus} devices allocated to it in {held_for:.0f}s")
        ev.expect("max_gpus_over_limit", over_gpus)
        workloads.delete(over)  # its pods gone, their claims' devices are free again for the rest
        pods.wait_until(f"the pods of {over.name} gone", lambda o: not any(belongs(p, over) for p in o.values()),
                        profile.timeouts.delete)
    else:
        ev.not_checked("max_gpus_over_limit", backend.lacks(QUEUE_QUOTA, target.features) or
                       f"{tenant.name} has no GPU limit below the {capacity} devices published")
    rest = jobs("dra-rest", owner, (capacity - limit) // per_job) if placed else []
    if rest:
        placed += claimed(workloads, profile, ev, rest)
    expected = (len(within) + len(rest)) * PODS_PER_JOB
    seen = claims_of(workloads, [*within, *rest])
    shared = devices_shared(seen)
    record(ev, seen)
    allocated = len(seen) - unallocated(seen)
    ev.note(f"{placed} of {expected} pods bound; {len(seen)} with a claim, {allocated} of those allocated"
            + (f"; devices in two claims: {', '.join(shared[:8])}" if shared else ""))
    ev.expect("max_unallocated_claims", expected - allocated)
    ev.expect("max_count_mismatch", count_mismatch(seen))
    ev.expect("max_devices_shared", len(shared))
    ev.verdict()


def published_devices(workloads: Workloads, driver: str) -> int:
    """Devices of `driver` in the ResourceSlices of the nodes the profile's pods may land on."""
    nodes = set(workloads.node_names())
    slices = dynamic_client(workloads.api).resources.get(api_version="resource.k8s.io/v1", kind="ResourceSlice")
    return sum(len(s["spec"].get("devices") or []) for s in slices.get().to_dict()["items"]
               if s["spec"].get("driver") == driver and s["spec"].get("nodeName") in nodes)


def claimed(workloads: Workloads, profile: Profile, ev: Evidence, jobs: list[GangJob]) -> int:
    """Submit `jobs` and wait until every pod is bound, or every waiting one has been unschedulable for a while;
    the pods bound."""
    namespace = jobs[0].tenant.namespace
    for job in jobs:
        workloads.submit(job)
    pods = workloads.members(namespace)
    want = len(jobs) * PODS_PER_JOB
    since: list[float] = []

    def refused(objs: dict[str, dict[str, Any]]) -> str | None:
        mine = [p for p in objs.values() if any(belongs(p, j) for j in jobs)]
        waiting = [p for p in mine if not (p.get("spec") or {}).get("nodeName")]
        why = [unschedulable(p) for p in waiting]
        if not waiting or not all(why):
            since.clear()
            return None
        since[:] = since or [time.monotonic()]
        return f"{len(waiting)} pods unschedulable: {why[0]}" if time.monotonic() - since[0] >= \
            UNSCHEDULABLE_FOR_S else None
    try:
        objs = pods.wait_until(f"the {want} pods of {len(jobs)} DRA jobs bound", lambda o: bound(o, jobs) >= want,
                               profile.timeouts.admit, failed=refused)
    except (WaitFailed, WaitTimeout) as exc:
        ev.note(f"{jobs[0].tenant.name}'s jobs: {exc}")
        objs = pods.objects
    return bound(objs, jobs)


def bound(objs: dict[str, dict[str, Any]], jobs: list[GangJob]) -> int:
    return sum(bound_pods(objs, j) for j in jobs)


def unschedulable(pod: dict[str, Any]) -> str:
    """The scheduler's message on a pod it could not place ('' otherwise)."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "Unschedulable":
            return str(condition.get("message") or "Unschedulable")[:300]
    return ""


def claims_of(workloads: Workloads, jobs: list[GangJob]) -> list[PodClaim]:
    """The pods of `jobs` with their GPU claims, read now."""
    found: list[PodClaim] = []
    claims = dynamic_client(workloads.api).resources.get(api_version="resource.k8s.io/v1", kind="ResourceClaim")
    for namespace in sorted({j.tenant.namespace for j in jobs}):
        pods = [p for p in workloads.members(namespace).objects.values() if any(belongs(p, j) for j in jobs)]
        found += pod_claims(pods, claims.get(namespace=namespace).to_dict()["items"], GPU_CLAIM)
    return found


def allocated_to(workloads: Workloads, jobs: list[GangJob]) -> list[PodClaim]:
    return [c for c in claims_of(workloads, jobs) if c.allocated]


def record(ev: Evidence, claims: list[PodClaim]) -> None:
    ev.tables["each pod's GPU claim (ResourceClaim status.allocation)"] = [
        {"pod": c.pod, "claim": c.claim or "(none yet)", "asked": c.asked,
         "devices": ", ".join(d.split("/", 1)[-1] for d in c.devices) or "(not allocated)"} for c in claims]

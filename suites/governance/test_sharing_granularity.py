"""Governance 8 — GPU sharing granularity (the Run:ai row).

Two tenants ask for fractions of one GPU: the first 0.5 and 0.25, the second 0.5 and a quarter of a device's
memory (KAI's `gpu-fraction` and `gpu-memory`), 1.5 GPUs in all. Read back from the API server, as the scheduler
and the nodes wrote it: each pod's BindRequest (the fraction given and the scheduler's device group), the
reservation pod that holds each group's device (the GPU UUID its node reported: simulated on the sim), and each
tenant's queue charge (its Queue's status, before and after). The device memory is the GPU Feature Discovery
label the scheduler reads (its memory label: harness/config/accelerators.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from harness.backends import Backend
from harness.backends import kai
from harness.backends.base import GPU_SHARING
from harness.cluster.apply import dynamic_client
from harness.cluster.wait import WaitFailed, poll
from harness.config.profile import Profile
from harness.core.errors import WaitTimeout
from harness.criteria.governance.sharing_granularity import (CRITERION, Share, by_device, device_commit,
                                                             grant_error, jobs_per_device, quota_error,
                                                             tenants_per_device)
from harness.jobs.kubernetes import Workloads
from harness.jobs.model import GangJob, GpuShare
from harness.jobs.system import JobSystem
from harness.record.evidence import Evidence
from harness.targets.target import Target
from suites.governance.common import queue_gpus, queue_held
from suites.training.common import LONG_RUN_S, belongs, require

SIM_SHARING = ("kai-admission", "kai-gpu-reservations")
DEVICE_REPORT_S = 20.0


def test_sharing_granularity(target: Target, backend: Backend, workloads: JobSystem, queue_model: Profile,
                             evidence: Callable[[str], Evidence]) -> None:
    profile, ev = queue_model, evidence(CRITERION.id)
    require(target, backend, GPU_SHARING)
    down = target.controllers_down(SIM_SHARING)
    if down:
        pytest.skip(f"the sim runs without {', '.join(down)}: gpupoc sim down, "
                    "then gpupoc sim up (KAI's GPU sharing starts with KAI)")
    if len(profile.tenants) < 2:
        pytest.skip("the profile has one tenant: sharing between tenants needs two")
    assert isinstance(workloads, Workloads) and backend.queue_usage is not None  # KAI: pods and its Queues
    memory_label = profile.gpu.accelerator.discovery.memory  # KAI reads GPU Feature Discovery's
    memory = device_memory_mib(client.CoreV1Api(workloads.api), profile.gpu.resource, memory_label)
    if memory is None:
        pytest.skip(f"no GPU node has the {memory_label} label ({profile.gpu.accelerator.discovery.tool}): KAI "
                    "cannot place a request by memory")
    first, second = profile.tenants[:2]
    asks = [(first, GpuShare(0.5)), (first, GpuShare(0.25)), (second, GpuShare(0.5)),
            (second, GpuShare(memory_mib=int(round(memory / 4, -3))))]
    usage, resource = backend.queue_usage, profile.gpu.resource
    queues = {t.name: t.queues.get(backend.queue_system, "") for t in (first, second)}
    before = {t: queue_held(workloads.api, usage, q, resource) if q else 0.0 for t, q in queues.items()}
    jobs = [workloads.gang(f"share-{i}", tenant, 1, 0, run_for_s=LONG_RUN_S, gpu_share=share)
            for i, (tenant, share) in enumerate(asks)]
    for job in jobs:
        workloads.submit(job)
    ev.note("asked: " + ", ".join(f"{j.name} ({j.tenant.name}) {j.gpu_share}" for j in jobs)
            + f"; device memory {memory} MiB ({memory_label})")
    if target.features.simulated_gpus:
        ev.note("simulated: the GPU UUIDs are written by the sim's device side (harness/sim/gpu_reservations.py); "
                "the placement, the fractions given and the queue charges are KAI's own")
    pods = {t.namespace: workloads.members(t.namespace) for t in (first, second)}
    seen: dict[str, dict[str, Any]] = {}  # each pod as its tenant's wait saw it running, then as last seen
    for tenant in (first, second):
        mine = [j for j in jobs if j.tenant is tenant]
        try:
            seen |= pods[tenant.namespace].wait_until(f"{tenant.name}'s {len(mine)} fractional pods running",
                                                      all_running(mine), profile.timeouts.admit)
        except (WaitTimeout, WaitFailed) as exc:
            ev.note(f"not running after {profile.timeouts.admit:.0f}s: {exc}")
    for tracker in pods.values():
        seen |= tracker.snapshot()
    # a running fraction's group had its device reported before the bind (KAI's binder waits for it); a group read
    # without one is a reservation pod being replaced: read again until each says its device
    shares = poll(lambda: read_shares(workloads.api, list(seen.values()), [t.namespace for t in (first, second)],
                                      jobs, memory), lambda got: not unreported(got), DEVICE_REPORT_S)
    held = {t.name: sum(s.granted or 0.0 for s in shares if s.tenant == t.namespace) for t in (first, second)}
    within = ev.thresholds["max_quota_error"]  # KAI charges a request by memory as asked, not as given
    charged = {t.namespace: (queue_gpus(workloads.api, usage, queues[t.name], resource, before[t.name] + held[t.name],
                                        within) - before[t.name]) if queues[t.name] else 0.0 for t in (first, second)}
    record(ev, shares, charged, jobs)
    ev.verdict()


def all_running(jobs: list[GangJob]) -> Callable[[dict[str, dict[str, Any]]], bool]:
    def done(objs: dict[str, dict[str, Any]]) -> bool:
        return sum(1 for p in objs.values() if any(belongs(p, j) for j in jobs)
                   and (p.get("status") or {}).get("phase") == "Running") >= len(jobs)
    return done


def device_memory_mib(core: client.CoreV1Api, resource: str, memory_label: str | None) -> int | None:
    """The smallest GPU memory the GPU nodes' discovery label gives (MiB; bytes above 2^20, as KAI reads it)."""
    values = []
    for node in core.list_node().items:
        label = (node.metadata.labels or {}).get(memory_label or "")
        if label and label.isdigit() and int((node.status.allocatable or {}).get(resource, "0")) > 0:
            values.append(int(label) if int(label) < 1 << 20 else int(label) >> 20)
    return min(values) if values else None


def read_shares(api: client.ApiClient, pods: list[dict[str, Any]], namespaces: list[str], jobs: list[GangJob],
                memory: int) -> list[Share]:
    """The jobs' pods as KAI placed them: their BindRequests and the reservation pods of their device groups."""
    dynamic = dynamic_client(api)
    requests = dynamic.resources.get(api_version=kai.BIND_REQUEST[0], kind=kai.BIND_REQUEST[1])
    mine = [p for p in pods if any(belongs(p, j) for j in jobs)]
    binds = {b["metadata"]["name"]: b for namespace in namespaces
             for b in requests.get(namespace=namespace).to_dict()["items"]}
    reservations = client.CoreV1Api(api).list_namespaced_pod(kai.RESERVATION_NAMESPACE,
                                                             label_selector=kai.GPU_GROUP_LABEL)
    return kai.gpu_shares(mine, binds, [api.sanitize_for_serialization(p) for p in reservations.items], memory)


def unreported(shares: list[Share]) -> list[str]:
    """The device groups of placed fractions whose reservation pod reports no device."""
    return sorted({s.group for s in shares if s.group and not s.device})


def record(ev: Evidence, shares: list[Share], charged: dict[str, float], jobs: list[GangJob]) -> None:
    placed = [s for s in shares if s.group]
    missing = unreported(shares)
    if not placed or missing:
        why = (f"no device reported for group {', '.join(missing)} after {DEVICE_REPORT_S:.0f}s (its reservation "
               "pod's run.ai/reserve_for_gpu_index): which fractions share a device is not known") if placed else \
            "no fractional pod was placed"
        for name in ("min_jobs_per_device", "max_device_commit", "max_tenants_per_device"):
            ev.not_checked(name, why)
    else:
        ev.expect("min_jobs_per_device", jobs_per_device(placed))
        ev.expect("max_device_commit", round(device_commit(placed), 4))
        ev.expect("max_tenants_per_device", tenants_per_device(placed))
    error = grant_error(shares)
    if error is None:
        ev.not_checked("max_grant_error", "no BindRequest says what the scheduler gave")
    else:
        ev.expect("max_grant_error", round(error, 4))
    ev.expect("max_quota_error", round(quota_error(charged, shares), 4))
    devices = len(by_device(placed))
    ev.note(f"{len(placed)} of {len(jobs)} fractional pods placed on {devices} device{'' if devices == 1 else 's'}; "
            "queue charges: "
            + ", ".join(f"{t} {c:.4g} GPU" for t, c in sorted(charged.items())))
    ev.tables["fractional jobs"] = [
        {"pod": s.pod, "tenant": s.tenant, "asked GPU": round(s.asked, 4),
         "given GPU": "-" if s.granted is None else round(s.granted, 4), "node": s.node,
         "device": s.device or "-"} for s in shares]
    ev.tables["devices shared"] = [
        {"device": device, "jobs": len(on), "tenants": ", ".join(sorted({s.tenant for s in on})),
         "given GPU": round(sum(s.granted or 0.0 for s in on), 4)} for device, on in sorted(by_device(placed).items())]

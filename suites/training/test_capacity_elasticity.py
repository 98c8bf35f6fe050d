"""Batch training 10 — GPU capacity that comes when jobs queue and goes when idle (cloud GPU elasticity).

The profile names the cluster's autoscaled GPU pool (gpu.autoscaled): the node selector of its nodes and the
tolerations of its taints. The first tenant submits a job of whole nodes there, more than the pool has (on a pool
that scales from zero: any); the autoscaler must add nodes, the job's scheduler place the whole job on them, and
once the job is deleted the autoscaler must remove them. Everything is read from the API server: the new Nodes'
creation, Ready and deletion timestamps, the pods' scheduling and start; nothing about the autoscaler is assumed
(on the sim it is Karpenter with its kwok provider, harness/sim/karpenter.py; on a cloud cluster its own).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import pytest

from harness.backends import Backend
from harness.backends.base import AUTOSCALING
from harness.cluster.tracker import Tracker
from harness.cluster.wait import WaitFailed
from harness.config.profile import Profile
from harness.core.errors import WaitTimeout
from harness.core.objects import condition_true
from harness.criteria.training.capacity_elasticity import (CRITERION, NewNode, idle_gpu_hours, new_node,
                                                           partial_hold_s, running_at, scheduled_at, timestamp)
from harness.jobs.kubernetes import Workloads
from harness.jobs.model import GangJob
from harness.jobs.system import JobSystem
from harness.record.evidence import Evidence
from harness.targets.target import Target
from suites.training.common import LONG_RUN_S, belongs, require

SCALE_DOWN_GRACE_S = 15.0  # how long past its threshold the removal of the new nodes is waited for


def test_capacity_elasticity(target: Target, backend: Backend, workloads: JobSystem, queue_model: Profile,
                             evidence: Callable[[str], Evidence]) -> None:
    profile, ev = queue_model, evidence(CRITERION.id)
    pool = profile.gpu.autoscaled
    if pool is None:
        pytest.skip("the profile names no autoscaled GPU pool (gpu.autoscaled: its node selector and tolerations)")
    require(target, backend, AUTOSCALING)
    if target.controllers_down(("karpenter",)):
        pytest.skip("the sim runs without its autoscaler: gpupoc sim build --with karpenter, then "
                    "gpupoc sim up --schedulers ...,karpenter")
    assert isinstance(workloads, Workloads)  # a backend with AUTOSCALING runs its jobs on Kubernetes
    tenant = profile.tenants[0]
    job = workloads.gang("elastic", tenant, pool.nodes, profile.gpu.per_node, run_for_s=LONG_RUN_S,
                         node_selector=pool.node_selector, tolerations=pool.tolerations)
    if tenant.limit_gpus is not None and job.gpus > tenant.limit_gpus:
        pytest.skip(f"a job of {pool.nodes} whole nodes ({job.gpus} GPUs) is beyond {tenant.name}'s limit of "
                    f"{tenant.limit_gpus}: lower gpu.autoscaled.nodes")
    nodes = Tracker(workloads.api, "v1", "Node", describe=node_state, timeline=workloads.timeline).start()
    try:
        measure(workloads, profile, ev, job, nodes)
    finally:
        nodes.stop(wait=False)
    ev.verdict()


def measure(workloads: Workloads, profile: Profile, ev: Evidence, job: GangJob, nodes: Tracker) -> None:
    nodes.wait_until("the cluster's nodes listed", lambda _: nodes.synced, profile.timeouts.apply)
    before = set(nodes.objects)
    ev.note(f"{len(before)} nodes before; a job of {job.pods} pods x {job.gpus_per_pod} GPUs for "
            f"{job.tenant.name} on the pool {fmt(job.node_selector)}")
    submitted = time.time()
    workloads.submit(job)
    submitted = next((s.created_at.timestamp() for s in workloads.created if s.name == job.name), submitted)
    pods = workloads.members(job.tenant.namespace)
    wait_s = profile.timeouts.admit
    try:
        pods.wait_until(f"the {job.pods} pods of {job.name} running", lambda o: running(o, job) >= job.pods, wait_s)
    except (WaitTimeout, WaitFailed) as exc:
        ev.note(f"not running after {wait_s:.0f}s: {exc}")
    seen = time.time()
    mine = [p for p in pods.objects.values() if belongs(p, job)]
    added = [new_node(n, profile.gpu.resource) for name, n in every_node(nodes).items() if name not in before]
    used = {p["spec"]["nodeName"]: scheduled_at(p) for p in mine if (p.get("spec") or {}).get("nodeName")}
    ready = sorted(n.ready for n in added if n.name in used and n.ready is not None)
    ev.expect("nodes_ready_within_s", round((ready[-1] if len(used) >= job.pods and ready else seen) - submitted, 1))
    started = [running_at(p) for p in mine]
    all_running = len(started) == job.pods and all(t is not None for t in started)
    ev.expect("running_within_s", round((max(t for t in started if t is not None) if all_running else seen)
                                        - submitted, 1))
    bound = [scheduled_at(p) for p in mine] + [None] * (job.pods - len(mine))
    ev.expect("max_partial_hold_s", round(partial_hold_s(bound, seen), 1))
    ev.note(f"{len(added)} nodes added: " + (", ".join(describe(n, submitted) for n in added) or "none")
            + f"; {sum(1 for t in bound if t)} of {job.pods} pods bound, {sum(1 for t in started if t)} running")

    workloads.delete(job)
    pods.wait_until(f"the pods of {job.name} gone", lambda o: not any(belongs(p, job) for p in o.values()),
                    profile.timeouts.delete)
    ended = max((timestamp(p["metadata"].get("deletionTimestamp")) or 0.0 for p in pods.gone.values()
                 if belongs(p, job)), default=time.time())
    ev.tables["the job's pods"] = [{"pod": p["metadata"]["name"], "node": (p.get("spec") or {}).get("nodeName", ""),
                                    "bound after s": after(scheduled_at(p), submitted),
                                    "running after s": after(running_at(p), submitted)} for p in mine]
    names = {n.name for n in added}
    if not names:
        ev.not_checked("scale_down_within_s", "no node was added")
        ev.not_checked("max_idle_gpu_hours", "no node was added")
        return
    limit = ev.thresholds["scale_down_within_s"] + SCALE_DOWN_GRACE_S
    try:
        nodes.wait_until(f"the {len(names)} added nodes removed", lambda o: not names & set(o), limit)
    except (WaitTimeout, WaitFailed) as exc:
        ev.note(f"added nodes still there {limit:.0f}s after the job ended: {exc}")
    end = time.time()
    first = {n.name: n for n in added}  # Ready as first seen: a node being removed goes NotReady
    final = [with_job(new_node(n, job.gpu_resource), first[name], used, ended)
             for name, n in every_node(nodes).items() if name in names]
    removed = [n.removed for n in final]
    last = end if None in removed else max(r for r in removed if r is not None)
    ev.expect("scale_down_within_s", round(last - ended, 1))
    ev.expect("max_idle_gpu_hours", round(idle_gpu_hours(final, end), 3))
    ev.tables["nodes the autoscaler added"] = [
        {"node": n.name, "GPUs": n.gpus, "created after s": after(n.created, submitted),
         "Ready after s": after(n.ready, submitted), "removed after the job's end s": after(n.removed, ended),
         "idle GPU-h": round(n.gpus * n.idle_s(end) / 3600.0, 3)} for n in final]


def running(objs: dict[str, dict[str, Any]], job: GangJob) -> int:
    return sum(1 for p in objs.values() if belongs(p, job) and running_at(p) is not None)


def every_node(nodes: Tracker) -> dict[str, dict[str, Any]]:
    """Each node the watch saw, in its last state: those still there and those deleted meanwhile."""
    return {**nodes.gone, **nodes.objects}


def with_job(node: NewNode, first: NewNode, used: dict[str, float | None], ended: float) -> NewNode:
    """The node's last state with its Ready time as first seen and the job's time on it."""
    on_it = node.name in used
    return dataclasses.replace(node, ready=first.ready, used_from=used[node.name] if on_it else None,
                               used_until=ended if on_it else None)


def node_state(node: dict[str, Any]) -> str:
    if node["metadata"].get("deletionTimestamp"):
        return "removing"
    return "Ready" if condition_true(node, "Ready") else "NotReady"


def describe(node: NewNode, since: float) -> str:
    return f"{node.name} ({node.gpus} GPUs, Ready after {after(node.ready, since)}s)"


def after(moment: float | None, since: float) -> str:
    return "-" if moment is None else f"{moment - since:.1f}"


def fmt(selector: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))

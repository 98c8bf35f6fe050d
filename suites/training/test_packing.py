"""Batch training — packing.

A burst of gangs, four times the cluster's GPUs, is submitted at once by one tenant (criteria/training/packing.py:
burst): single-GPU jobs, half-node pairs, the largest gang (one GPU on every GPU of the cluster), then as many small
jobs again, a gang of every node whole and quarter-node gangs. Each runs a short while. From every event of their
pods: the share of the GPUs held while work waited (the first submission to the last gang's start), the longest any
gang held some but not all of its pods bound, and how long the largest gang still waited once a gang submitted after
it had started. kube-scheduler alone (`default`) binds pod by pod: the baseline for partial gangs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from harness.backends import Backend
from harness.criteria.training.packing import CRITERION, Gang, burst, occupancy, starved_s
from harness.config.profile import Profile
from harness.jobs.model import GangJob, job_of
from harness.jobs.system import JobSystem
from harness.record.evidence import Evidence
from suites.training.common import attach_timeline, gpu_nodes

JOB_S = 10.0  # each gang's run: the burst drains in about four of them where it is packed


# Alone on the host: its occupancy is how fast each scheduler reacts, the host's CPU (kueue-volcano 0.49 beside make poc's
# other parts, 0.72 alone, 2026-12-06), and its burst of 68 pods slowed the other parts' cases
@pytest.mark.quiet
def test_packing(backend: Backend, workloads: JobSystem, queue_model: Profile,
                 evidence: Callable[[str], Evidence]) -> None:
    profile, ev = queue_model, evidence(CRITERION.id)
    if not backend.jobs_on_kubernetes:
        pytest.skip(f"{backend.name}: a job's members are its nodes, one each: a gang of a pod per GPU needs as "
                    "many nodes")
    nodes, per_node = gpu_nodes(workloads, profile), profile.gpu.per_node
    capacity, owner = nodes * per_node, profile.tenants[0]
    jobs = [workloads.gang(f"pack-{i}", owner, pods=pods, gpus_per_pod=gpus, run_for_s=JOB_S)
            for i, (pods, gpus) in enumerate(burst(nodes, per_node))]
    largest = max(jobs, key=lambda job: (job.gpus, job.pods)).name  # the most GPUs, then pods
    gangs: dict[str, Gang] = {}
    pods = workloads.members(owner.namespace)

    def observe(event: str, pod: dict[str, Any]) -> None:
        gang = gangs.get(job_of(pod) or "")
        if gang is not None:
            gang.observe(event, pod, time.time())
    pods.on_event(observe)
    demand = sum(job.gpus for job in jobs)
    ev.note(f"{len(jobs)} gangs of {owner.name}, {demand} GPUs in all on {nodes} nodes x {per_node} GPUs "
            f"({demand / capacity:.1f} times the cluster), each running {JOB_S:.0f}s, submitted at once; "
            f"the largest: {largest}")
    started = time.time()
    for job in jobs:
        gangs[job.name] = Gang(job.pods, time.time())
        workloads.submit(job)
    budget = demand / capacity * JOB_S * 4 + profile.timeouts.admit
    pods.hold(budget, until=lambda: all(g.started_at is not None for g in gangs.values()), recheck_s=0.5)
    now = time.time()
    waiting = [name for name, g in gangs.items() if g.started_at is None]
    last_start = now if waiting else max(g.started_at or now for g in gangs.values())
    if waiting:
        ev.note(f"{len(waiting)} gang(s) had not started after {budget:.0f}s: {', '.join(waiting)}")
    held = [(h.start, h.end, h.gpus) for h in workloads.gpus_held(profile.gpu.resource, now)]
    ev.tables["the burst's gangs"] = [gang_row(job, gangs[job.name], started, now) for job in jobs]
    ev.expect("min_occupancy", occupancy(held, capacity, started, last_start, ev.lag_s()).rounded(4))
    ev.expect("max_partial_held_s", round(max(g.partial_s(now) for g in gangs.values()), 3))
    ev.expect("largest_gang_starved_s", round(starved_s(gangs, largest, now), 3))
    for job in jobs:
        workloads.delete(job)
    attach_timeline(ev, workloads.timeline, started)
    ev.verdict()


def gang_row(job: GangJob, gang: Gang, started: float, now: float) -> dict[str, Any]:
    """One row of the evidence's table: the gang's shape, when it was submitted and started, its partial hold."""
    return {"gang": job.name, "pods x GPUs": f"{job.pods} x {job.gpus_per_pod}",
            "submitted (s)": round(gang.submitted_at - started, 2),
            "started (s)": None if gang.started_at is None else round(gang.started_at - started, 2),
            "partial held (s)": round(gang.partial_s(now), 2)}

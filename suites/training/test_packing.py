"""Batch training — packing.

A burst of gangs, four times the cluster's GPUs, is submitted at once by one tenant (criteria/training/packing.py:
burst): single-GPU jobs, half-node pairs, the largest gang (one GPU on every GPU of the cluster), then as many small
jobs again, a gang of every node whole and quarter-node gangs. Each runs a short while. From every event of their
pods: the share of the GPUs held while work waited (the first submission to the last gang's start), the longest any
gang held some but not all of its pods bound, and how long the largest gang still waited once a gang submitted after
it had started. kube-scheduler alone (`default`) binds pod by pod: the baseline for partial gangs.

Before the burst, a fragmented cluster that no race decides: a pin on every node (one pod, on that node) leaves
g + 1 GPUs free there (g: half a node), then a gang of one pod more than there are nodes, g GPUs each, asks for
exactly the GPUs that are free. They are free in sum, so a queue that admits by quota lets it in; no node has room
for two of its pods, so a gang scheduler places none of them until a pin ends, and binding pod by pod holds all but
one bound until then.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from harness.backends import Backend
from harness.criteria.training.packing import CRITERION, Gang, burst, occupancy, starved_s
from harness.config.profile import Profile, Tenant
from harness.jobs.model import GangJob, job_of
from harness.jobs.system import JobSystem
from harness.record.evidence import Evidence
from suites.training.common import attach_timeline, bound_pods, gpu_nodes
from suites.training.sample import HOSTNAME_LABEL

JOB_S = 10.0  # each gang's run: the burst drains in about four of them where it is packed
PIN_S = 15.0  # the pins' run: pod by pod, the fragmented gang holds all but one pod bound until the first pin ends


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
    fragmented = fragmented_gang(workloads, profile, owner, gangs)
    if fragmented:
        gang, pins = fragmented[0], fragmented[1:]
        ev.note(f"first, on a fragmented cluster: {gang.name}, {gang.pods} pods x {gang.gpus_per_pod} GPUs, exactly "
                f"the GPUs free beside {len(pins)} pins of {pins[0].gpus if pins else 0} GPUs, one on each node, "
                f"running {PIN_S:.0f} s: held part of its pods bound for {gangs[gang.name].partial_s(time.time()):.1f}"
                " s")
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
    ev.tables["the burst's gangs"] = [gang_row(job, gangs[job.name], started, now) for job in [*fragmented, *jobs]
                                      if job.name in gangs]
    ev.expect("min_occupancy", occupancy(held, capacity, started, last_start, ev.lag_s()).rounded(4))
    ev.expect("max_partial_held_s", round(max(g.partial_s(now) for g in gangs.values()), 3))
    ev.expect("largest_gang_starved_s", round(starved_s(gangs, largest, now), 3))
    for job in [*fragmented, *jobs]:
        workloads.delete(job)
    attach_timeline(ev, workloads.timeline, started)
    ev.verdict()


def fragmented_gang(workloads: JobSystem, profile: Profile, owner: Tenant,
                    gangs: dict[str, Gang]) -> list[GangJob]:
    """The pins, then the fragmented gang once every pin runs (its Gang in `gangs`); the gang and the pins. None
    where a node has too few GPUs for half of it, or there are fewer nodes than that half."""
    per_node, resource = profile.gpu.per_node, profile.gpu.resource
    names = sorted(workloads.node_domains(resource, per_node, HOSTNAME_LABEL))
    half = per_node // 2
    if half < 1 or half > len(names):  # the gang's GPUs would be more than the free ones
        return []
    pins = [workloads.gang(f"pin-{i}", owner, pods=1, gpus_per_pod=per_node - half - 1, run_for_s=PIN_S,
                           node_selector={HOSTNAME_LABEL: name}) for i, name in enumerate(names)]
    pins = [pin for pin in pins if pin.gpus]
    pods = workloads.members(owner.namespace)
    for pin in pins:
        workloads.submit(pin)
    pods.wait_until(f"{len(pins)} pins running, one on each node", lambda o: all(bound_pods(o, p) for p in pins),
                    profile.timeouts.admit, failed=lambda _: workloads.refused(pins))
    gang = workloads.gang("pack-fragmented", owner, pods=len(names) + 1, gpus_per_pod=half, run_for_s=JOB_S)
    gangs[gang.name] = Gang(gang.pods, time.time())
    workloads.submit(gang)
    budget = PIN_S + profile.timeouts.admit
    pods.hold(budget, until=lambda: gangs[gang.name].started_at is not None, recheck_s=0.5)
    return [gang, *pins]


def gang_row(job: GangJob, gang: Gang, started: float, now: float) -> dict[str, Any]:
    """One row of the evidence's table: the gang's shape, when it was submitted and started, its partial hold."""
    return {"gang": job.name, "pods x GPUs": f"{job.pods} x {job.gpus_per_pod}",
            "submitted (s)": round(gang.submitted_at - started, 2),
            "started (s)": None if gang.started_at is None else round(gang.started_at - started, 2),
            "partial held (s)": round(gang.partial_s(now), 2)}

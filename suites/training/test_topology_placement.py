"""Large-scale training — topology placement.

A gang asks its scheduler to keep all its pods within one domain of the profile's gang level (a leaf switch, an
NVLink domain). Another tenant's fillers leave every domain one node short of the gang, so the cluster's free GPUs
would hold it only split across domains: none of its pods may be bound, at any moment. Then one domain's fillers end:
the gang lands whole inside that domain within the threshold. kube-scheduler without a gang or topology (`default`)
is the baseline expected to violate it: the record shows the domains its pods were split over.

Then one of the gang's nodes is lost (a NoExecute taint; on Slurm the node set DOWN): no pod of the gang may be bound
outside its domain (the free nodes elsewhere would take a replacement at once): the replacement waits for room in the
domain, or the whole gang is requeued. The node comes back, and the gang is whole again within the threshold.

Then the gang goes: its domain is whole again, the others still a node short. A second gang only prefers one domain;
it must use the fewest domains the free nodes allow (one), as a scheduler that places a whole gang by topology does
(Kueue's, KAI's, Slurm's topology/tree); kube-scheduler has no such preference, and Volcano's soft mode places task by
task (the leaves it uses vary from run to run): not checked there. On Slurm a domain is a leaf switch of
topology.conf, and a required placement is a matching OR over the nodes' leaf features, `--constraint=[leaf-0|...]`.

Then the cluster is emptied, and small jobs worth one domain's GPUs arrive one after another: they must touch no more
domains than the fewest that hold them, so the other domains stay whole for the next gang (a placement that spreads
over nodes, kube-scheduler's default scoring, breaks every domain).

"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from harness.backends import Backend
from harness.backends.base import RETRY_POLICY, TOPOLOGY
from harness.cluster.tracker import Objects, Tracker
from harness.core.errors import HarnessError
from harness.config.profile import HOSTNAME, Profile
from harness.criteria.training.gang_admission import GangWatch
from harness.criteria.training.topology_placement import (CRITERION, PlacementWatch, fewest_domains, fragmentation,
                                                          members)
from harness.jobs.model import GangJob, Placement
from harness.jobs.system import JobSystem
from harness.record.evidence import Evidence
from harness.targets.target import Target
from suites.training.common import LONG_RUN_S, Refusal, attach_timeline, belongs, bound_pods, require

REFUSAL_CONFIRM_S = 3.0  # three scheduling cycles after every pod was refused (as gang admission)
LOST_NODE_CONFIRM_S = 5.0  # watched this long after the lost pod's replacement was made, for a straggler
GANG_RETRIES = 2  # the placed gang's retry policy lets it outlive a lost node
NODE_LOSS_CHECKS = ("max_pods_outside_domain_after_node_loss", "rejoined_within_s")
SMALL_JOB_GPUS = 1  # (d): one GPU each, so a placement blind to domains cannot pack them by chance


def all_bound(jobs: list[GangJob]) -> Callable[[Objects], bool]:
    return lambda objs: sum(bound_pods(objs, job) for job in jobs) == len(jobs)


def test_topology_placement(backend: Backend, target: Target, workloads: JobSystem, queue_model: Profile,
                            evidence: Callable[[str], Evidence],
                            destructive_refused: Callable[[str], str | None]) -> None:
    profile, ev = queue_model, evidence(CRITERION.id)
    require(target, backend, TOPOLOGY)
    topology = profile.gpu.topology
    if topology is None:
        pytest.skip("the profile names no topology (gpu.topology): there is no domain to ask the scheduler for")
    per_node, level = profile.gpu.per_node, topology.gang_level
    domains = members(workloads.node_domains(profile.gpu.resource, per_node, level))
    size = min((len(nodes) for nodes in domains.values()), default=0)
    if len(domains) < 2 or size < 2:
        pytest.skip(f"{len(domains)} domain(s) of {level} with whole GPU nodes, the smallest of {size}: the case needs "
                    "two domains of two nodes or more")
    lender, owner = profile.tenants[-1], profile.tenants[0]
    # each domain one node short of the gang; the first domain's fillers end later (the domain that frees). They are
    # the lender's, the others the gang's own tenant's: no tenant over its quota, so a scheduler that reclaims
    # (KAI, Volcano) frees no domain for the gang early
    fill = {domain: nodes[:len(nodes) - size + 1] for domain, nodes in domains.items()}
    fillers = {domain: [workloads.gang(f"topo-filler-{i}-{j}", lender if i == 0 else owner, pods=1,
                                       gpus_per_pod=per_node, run_for_s=LONG_RUN_S, node_selector={HOSTNAME: node})
                        for j, node in enumerate(nodes)] for i, (domain, nodes) in enumerate(fill.items())}
    placement = Placement(level, required=True, tier=topology.tier(level))
    gang = workloads.gang("topo-gang", owner, pods=size, gpus_per_pod=per_node, run_for_s=LONG_RUN_S,
                          placement=placement, max_retries=GANG_RETRIES)
    free = sum(len(nodes) - len(fill[d]) for d, nodes in domains.items())
    ev.note(f"{len(domains)} domains of {level}: " + "; ".join(f"{d}: {', '.join(n)}" for d, n in domains.items()))
    ev.note(f"fillers (the first domain's of {lender.name}, the others' of {owner.name}) leave {size - 1} node(s) "
            f"free in each domain ({free} in all); the gang of "
            f"{owner.name} needs {size} whole nodes ({size} pods x {per_node} GPUs) in one domain, asked as "
            f"{'required' if placement.required else 'preferred'} at {level}.")
    started = time.time()

    every_filler = [job for jobs in fillers.values() for job in jobs]
    for job in every_filler:
        workloads.submit(job)
    for tenant in {job.tenant.name: job.tenant for job in every_filler}.values():
        theirs = [job for job in every_filler if job.tenant == tenant]
        workloads.members(tenant.namespace).wait_until(f"{len(theirs)} fillers of {tenant.name} bound",
                                                       all_bound(theirs), profile.timeouts.admit)

    domain_of = {node: domain for domain, nodes in domains.items() for node in nodes}
    placed, refusals = PlacementWatch(gang.pods, domain_of), GangWatch(gang.pods)
    owner_pods = workloads.members(owner.namespace)

    def observe(event: str, pod: dict[str, Any]) -> None:
        if belongs(pod, gang):
            placed.observe(event, pod, time.time())
            refusals.observe(event, pod, time.time())
    owner_pods.on_event(observe)
    submitted = time.time()
    workloads.submit(gang)
    refusal = Refusal(workloads, gang, refusals, workloads.jobs(owner.namespace), owner_pods)

    def seen_enough() -> bool:  # as many pods bound as a split placement can reach, or the scheduler said no
        refused = refusal.since()
        return placed.bound_while_blocked >= min(free, gang.pods) or (
            refused is not None and time.time() - refused >= REFUSAL_CONFIRM_S)
    owner_pods.hold(profile.timeouts.observe, until=seen_enough, recheck_s=0.25)
    refused_at = refusal.since()
    ev.note(f"watched the gang for {time.time() - submitted:.1f}s while no domain could hold it: "
            f"{placed.bound_while_blocked} pod(s) bound" + (
                f", in {', '.join(placed.domains())}" if placed.nodes else "") + (
                f"; the scheduler refused it {refused_at - submitted:.1f}s after submission"
                if refused_at is not None else ""))

    freed_domain = next(iter(fillers))
    for job in fillers[freed_domain]:
        workloads.delete(job)
    placed.free_a_domain()
    freed_at = time.time()
    owner_pods.wait_until(f"all {gang.pods} pods of the gang bound after {freed_domain} freed",
                          lambda objs: placed.all_bound_at is not None, profile.timeouts.admit)
    landed = placed.domains()
    ev.note(f"{freed_domain} freed; the gang's pods are in {', '.join(landed)} "
            f"({', '.join(sorted(placed.nodes.values()))})")
    ev.tables["the gang's domains, each time they changed"] = domains_over_time(placed, started)

    ev.expect("max_domains_spanned", placed.max_spanned)
    ev.expect("max_pods_bound_while_no_domain_fits", placed.bound_while_blocked)
    ev.expect("placed_within_s", round(max(0.0, (placed.all_bound_at or freed_at) - freed_at), 3))
    refused = backend.lacks(RETRY_POLICY, target.features) or destructive_refused("lose a node of a placed gang")
    if refused:  # without a retry policy nothing replaces a lost pod: no straggler to look for
        for name in NODE_LOSS_CHECKS:
            ev.not_checked(name, refused)
    else:
        lost_node(workloads, profile, ev, gang, owner_pods, domain_of, started)

    workloads.delete(gang)
    owner_pods.wait_until("the first gang's pods gone", lambda objs: not any(belongs(p, gang) for p in objs.values()),
                          profile.timeouts.delete)
    ended = list(every_filler)
    if not backend.preferred_topology:
        ev.not_checked("max_extra_domains", f"{backend.name}: {backend.preferred_topology_unchecked}")
    else:
        free_now = {d: len(nodes) - (0 if d == freed_domain else len(fill[d])) for d, nodes in domains.items()}
        fewest = fewest_domains(free_now, size)
        preferring = workloads.gang("topo-prefer", owner, pods=size, gpus_per_pod=per_node, run_for_s=LONG_RUN_S,
                                    placement=Placement(level, required=False, tier=placement.tier))
        second = PlacementWatch(size, domain_of)
        second.free_a_domain()

        def observe_second(event: str, pod: dict[str, Any]) -> None:
            if belongs(pod, preferring):
                second.observe(event, pod, time.time())
        owner_pods.on_event(observe_second)
        workloads.submit(preferring)
        owner_pods.wait_until(f"all {size} pods of the gang preferring one domain bound",
                              lambda objs: second.all_bound_at is not None, profile.timeouts.admit)
        ev.note(f"free nodes per domain before the gang preferring one ({backend.preferred_topology}): "
                + ", ".join(f"{d}: {n}" for d, n in free_now.items()) + f"; the fewest domains that hold it: {fewest}; "
                f"it used {', '.join(second.domains())}")
        ev.expect("max_extra_domains", max(0, len(second.domains()) - fewest))
        workloads.delete(preferring)
        ended.append(preferring)
    for job in [job for domain, jobs in fillers.items() if domain != freed_domain for job in jobs]:
        workloads.delete(job)
    for tenant in (owner, lender):  # the small jobs start on an empty cluster
        workloads.members(tenant.namespace).wait_until(
            f"{tenant.name}'s pods of the case gone", lambda objs: not any(
                belongs(p, job) for job in ended for p in objs.values()), profile.timeouts.delete)
    small_jobs_stream(workloads, profile, backend, ev, domains, placement)
    attach_timeline(ev, workloads.timeline, started)
    ev.verdict()


def domains_over_time(watch: PlacementWatch, started: float, since: float = 0.0) -> list[dict[str, Any]]:
    """The evidence's table of the domains a gang's bound pods were in, each time they changed (from `since`)."""
    return [{"t (s)": round(at - started, 3), "domains": ", ".join(used) or "(none bound)"}
            for at, used in watch.spans if at >= since]


def lost_node(workloads: JobSystem, profile: Profile, ev: Evidence, gang: GangJob, pods: Tracker,
              domain_of: dict[str, str], started: float) -> None:
    """(e) One node of the placed gang is lost. Its domain (where the pods that stay are) has no other free node, and
    other domains have: a replacement bound there is a straggler. Watched until one is seen, or for
    LOST_NODE_CONFIRM_S after the lost pod went and its replacement was made (or the whole gang went, requeued); then
    the node comes back and the gang must be whole again."""
    def bound(objs: Objects) -> dict[str, str]:
        return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in objs.values()
                if belongs(p, gang) and (p.get("spec") or {}).get("nodeName")}
    now = bound(pods.objects)
    node = sorted(now.values())[0]
    # its domain: where most of the pods that stay are (a gang placed whole: its one domain)
    staying = [domain_of.get(n, n) for n in now.values() if n != node] or [domain_of.get(node, node)]
    home = max(sorted(set(staying)), key=staying.count)
    watch = PlacementWatch(gang.pods, domain_of, nodes=dict(now), blocked=False, home=home,
                           placed_before=frozenset(now.items()))
    pods.on_event(lambda event, pod: watch.observe(event, pod, time.time()) if belongs(pod, gang) else None)
    how = workloads.lose_node(node)
    if how is None:
        for name in NODE_LOSS_CHECKS:
            ev.not_checked(name, "this job system cannot lose a node here")
        return
    lost_at, settled_since = time.time(), [0.0]

    def settled() -> bool:  # a straggler; or the lost pod gone and its replacement made (or the gang requeued whole)
        if watch.max_outside:
            return True
        live = [p for p in pods.objects.values() if belongs(p, gang) and not p["metadata"].get("deletionTimestamp")]
        if node in watch.nodes.values() or 0 < len(live) < gang.pods:  # a batch Job makes it after its backoff (10 s)
            settled_since[0] = 0.0
            return False
        settled_since[0] = settled_since[0] or time.time()
        return time.time() - settled_since[0] >= LOST_NODE_CONFIRM_S
    try:
        pods.hold(profile.timeouts.admit, until=settled, recheck_s=0.25)
        if node in watch.nodes.values() and not watch.max_outside:
            raise HarnessError(f"the gang's pod on {node} was not evicted within {profile.timeouts.admit:.0f}s of "
                               f"{how}: the lost node could not be made")
        after = dict(watch.nodes)
        ev.note(f"{how} ({home} had no other free node; other domains had). "
                f"{time.time() - lost_at:.1f}s later: {len(after)} of {gang.pods} pods bound ("
                + (", ".join(f"{n} in {domain_of.get(n, '?')}" for n in sorted(after.values())) or "none")
                + f"); {watch.max_outside} outside {home} at most")
        ev.tables[f"the gang's domains after {node} was lost"] = domains_over_time(watch, started, since=lost_at)
    finally:
        workloads.restore_node(node)
    restored_at = watch.all_bound_at = time.time()
    if len(watch.nodes) < gang.pods:
        watch.all_bound_at = None
        pods.hold(profile.timeouts.admit, until=lambda: watch.all_bound_at is not None, recheck_s=0.25)
    ev.note(f"{node} back: the gang's pods are in {', '.join(watch.domains()) or '(none bound)'}" + (
        "" if watch.all_bound_at else f", {len(watch.nodes)} of {gang.pods} bound after {profile.timeouts.admit:.0f}s"))
    ev.expect("max_pods_outside_domain_after_node_loss", watch.max_outside)
    ev.expect("rejoined_within_s", round(watch.all_bound_at - restored_at, 3) if watch.all_bound_at
              else profile.timeouts.admit)  # not rejoined: at least the wait


def small_jobs_stream(workloads: JobSystem, profile: Profile, backend: Backend, ev: Evidence,
                      domains: dict[str, list[str]], placement: Placement) -> None:
    """(d) On the emptied cluster, small jobs of one GPU each, worth the smallest domain's GPUs, submitted one after
    another: a placement that keeps the next gang in mind packs them into the fewest domains and leaves the others
    whole. They prefer one domain where the backend can say so, as a topology-aware cluster's jobs do. One GPU each,
    so the verdict does not vary: a placement blind to domains that picks among fitting nodes at random keeps 16 of
    them under one leaf of two 8-GPU nodes about once in 30,000 runs."""
    per_node, owner = profile.gpu.per_node, profile.tenants[0]
    count = min(len(nodes) for nodes in domains.values()) * per_node // SMALL_JOB_GPUS
    prefer = Placement(placement.level, required=False, tier=placement.tier) if backend.preferred_topology else None
    pods = workloads.members(owner.namespace)
    stream = [workloads.gang(f"topo-small-{i}", owner, pods=1, gpus_per_pod=SMALL_JOB_GPUS,
                             run_for_s=LONG_RUN_S, placement=prefer) for i in range(count)]
    for job in stream:
        workloads.submit(job)
    pods.wait_until(f"the {count} small jobs bound", all_bound(stream), profile.timeouts.admit)
    used: dict[str, int] = {}
    for pod in pods.objects.values():
        node = (pod.get("spec") or {}).get("nodeName")
        if node and any(belongs(pod, job) for job in stream):
            used[node] = used.get(node, 0) + SMALL_JOB_GPUS
    found = fragmentation(used, domains, per_node)
    ev.tables["the small jobs' GPUs on each node, by domain"] = [
        {"domain": domain, "node": node, "GPUs held": used.get(node, 0)}
        for domain, nodes in domains.items() for node in nodes]
    preferring = f", each preferring one {placement.level}" if prefer else ""
    ev.note(f"{count} small jobs of {SMALL_JOB_GPUS} GPU, submitted one after another{preferring}: they touched "
            f"{', '.join(found.touched)} (the fewest that hold them: {found.fewest}); {len(found.wholly_free)} of "
            f"{len(domains)} domains still wholly free; the largest gang one domain can still take: "
            f"{found.largest_gang_nodes} whole nodes")
    ev.expect("max_extra_domains_fragmented", found.extra_domains)
    for job in stream:
        workloads.delete(job)

"""Batch training 1 — gang admission.

When free GPUs are fewer than a job needs, none of its pods is bound, at any moment; when
capacity appears, all are bound within the threshold. The default scheduler is the baseline
expected to violate it: the record shows how many pods it bound while the rest waited.
"""

from __future__ import annotations

import time
from collections.abc import Callable


from harness.backends import Backend
from harness.criteria.training.gang_admission import CRITERION, GangWatch
from harness.config.profile import Profile
from harness.record.evidence import Evidence
from harness.jobs.system import JobSystem
from suites.training.common import LONG_RUN_S, Refusal, attach_timeline, belongs, bound_pods, gpu_nodes

REFUSAL_CONFIRM_S = 3.0  # three scheduling cycles of Volcano, KAI and Slurm (1 s each) after every pod was refused


def test_gang_admission(backend: Backend, workloads: JobSystem, queue_model: Profile,
                        evidence: Callable[[str], Evidence]) -> None:
    profile, ev = queue_model, evidence(CRITERION.id)
    lender, owner = profile.tenants[-1], profile.tenants[0]
    per_node, nodes = profile.gpu.per_node, gpu_nodes(workloads, profile)
    filler = workloads.gang("gang-filler", lender, pods=1, gpus_per_pod=per_node, run_for_s=LONG_RUN_S)
    gang = workloads.gang("gang", owner, pods=nodes, gpus_per_pod=per_node, run_for_s=LONG_RUN_S)
    ev.note(f"{nodes} nodes x {per_node} GPUs; a filler of {per_node} GPUs leaves {(nodes - 1) * per_node} free; "
            f"the gang needs {gang.gpus} ({gang.pods} pods x {per_node}).")
    started = time.time()

    workloads.submit(filler)
    lender_pods = workloads.members(lender.namespace)
    lender_pods.wait_until("filler bound", lambda objs: bound_pods(objs, filler) == 1,
                           profile.timeouts.admit)

    watch = GangWatch(gang.pods)
    owner_pods = workloads.members(owner.namespace)
    owner_pods.on_event(lambda event, pod: watch.observe(event, pod, time.time()) if belongs(pod, gang)
                        else None)
    submitted = time.time()
    workloads.submit(gang)
    # The gang cannot fit: every event of its pods is checked, until the observation window ends, or as many of its
    # pods are bound as there are free nodes (the most a partial placement can reach: watching longer shows no
    # more), or the scheduler has refused the gang (every pod Unschedulable; a queue that creates no pod yet: the
    # job held with the queue's reason) and REFUSAL_CONFIRM_S more show no binding (its next cycles decided alike).
    refusal = Refusal(workloads, gang, watch, workloads.jobs(owner.namespace), owner_pods)

    def seen_enough() -> bool:
        refused = refusal.since()
        return watch.partial_while_blocked() >= nodes - 1 or (
            refused is not None and time.time() - refused >= REFUSAL_CONFIRM_S)
    owner_pods.hold(profile.timeouts.observe, until=seen_enough, recheck_s=0.25)
    blocked_partial = watch.partial_while_blocked()
    refused_at = refusal.since()
    ev.note(f"watched the gang for {time.time() - submitted:.1f}s while it could not fit; " + (
        f"{blocked_partial} pods bound, as many as there are free nodes" if blocked_partial >= nodes - 1 else
        f"the scheduler refused it {refused_at - submitted:.1f}s after submission" if refused_at is not None else
        "no refusal seen: the whole observation window"))

    workloads.delete(filler)
    freed_at = time.time()
    owner_pods.wait_until(f"all {gang.pods} pods of the gang bound after capacity was freed",
                          lambda objs: watch.all_bound_at is not None, profile.timeouts.admit)
    all_bound_s = (watch.all_bound_at or freed_at) - freed_at

    ev.expect("max_partial_pods", blocked_partial)
    ev.expect("all_bound_within_s", round(all_bound_s, 3))
    if blocked_partial:
        ev.note(f"{blocked_partial} of {gang.pods} pods were bound while the gang could not fit.")
    attach_timeline(ev, workloads.timeline, started)
    ev.verdict()

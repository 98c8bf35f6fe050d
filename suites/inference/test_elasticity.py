"""Inference 2 — elasticity.

Scale 1 -> N -> 1 by hand: the time to N Ready replicas and back to one. Then beyond the free GPUs: the pods the
scheduler cannot place are reported with its reason and not counted as reached. Scaling by the
HorizontalPodAutoscaler under load needs an external-metrics adapter on the target: until the sim has one, that
sub-check is shown as not checked.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.backends import Backend
from harness.criteria.inference.elasticity import CRITERION, unplaced
from harness.profile import Profile
from harness.record.evidence import Evidence
from harness.serving import ModelService
from harness.target import Target
from harness.workloads import Workloads
from suites.inference.common import SERVING, deploy, of, ready_pods, require, scale, traffic_for, wait_ready

SCALE_TO = 4


def test_elasticity(backend: Backend, workloads: Workloads, queue_model: Profile, target: Target,
                    evidence: Callable[[str], Evidence]) -> None:
    require(target, backend, SERVING)
    traffic_for(target, queue_model)
    profile, ev = queue_model, evidence(CRITERION.id)
    per_node = profile.gpu.per_node
    service = ModelService(workloads.job_name("llm-scale"), profile.tenants[0], replicas=1, gpus=per_node,
                           server={"load-time": "1s"})
    deploy(workloads, backend, service)
    wait_ready(workloads, service, 1, profile.timeouts.admit)
    asked = scale(workloads, service, SCALE_TO)
    ev.expect("scale_out_within_s", round(wait_ready(workloads, service, SCALE_TO, profile.timeouts.admit) - asked, 3))
    asked = scale(workloads, service, 1)
    ev.expect("scale_in_within_s", round(wait_ready(workloads, service, 1, profile.timeouts.admit) - asked, 3))

    nodes = workloads.capacity_nodes(profile.gpu.resource, per_node)
    beyond = nodes + 2  # whole-node replicas: two more than there are nodes
    scale(workloads, service, beyond)
    pods = workloads.pods(service.namespace)
    pods.wait_until(f"{beyond} replicas placed or refused by the scheduler",
                    lambda objs: len(ready_pods(service, objs)) + len(unplaced(of(service, objs))) >= beyond,
                    profile.timeouts.admit)
    refused = unplaced(of(service, pods.objects))
    reached = len(ready_pods(service, pods.objects))
    ev.tables["pods the scheduler could not place"] = [{"pod": name, "scheduler's reason": why}
                                                      for name, why in sorted(refused.items())]
    ev.note(f"scaled to {beyond} whole-node replicas ({per_node} GPUs each) on {nodes} GPU nodes: {reached} reached "
            f"Ready, {len(refused)} not placed (not counted as reached).")
    ev.not_checked("max_flaps", "load-driven scaling (HorizontalPodAutoscaler on the model server's queue metric) "
                   "needs an external-metrics adapter on the target; the sim has none yet")
    ev.verdict()

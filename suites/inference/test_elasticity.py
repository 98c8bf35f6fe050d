"""Inference 2 — elasticity.

Scale 1 -> N -> 1 by hand: the time to N Ready replicas and back to one. Then beyond the free GPUs: the pods the
scheduler cannot place are reported with its reason and not counted as reached.

The HorizontalPodAutoscaler under load (inference.autoscaling) is checked once per cluster, its replicas placed by
kube-scheduler: the HPA, the metrics adapter and Prometheus decide the replica count, whatever the scheduler.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from harness.backends import Backend
from harness.criteria.inference.elasticity import AUTOSCALING, CRITERION, flaps, held_by_queue, unplaced
from harness.core.errors import WaitTimeout
from harness.config.profile import Profile
from harness.record.evidence import Evidence
from harness.jobs.service import ModelService
from harness.targets.target import Target
from harness.jobs.kubernetes import Workloads
from suites.inference.common import SERVING, deploy, of, ready_pods, require, scale, traffic_for, wait_ready

SCALE_TO = 4


def test_elasticity(backend: Backend, workloads: Workloads, queue_model: Profile, target: Target,
                    evidence: Callable[[str], Evidence], tmp_path: Path) -> None:
    require(target, backend, SERVING)
    traffic_for(target, queue_model)
    profile, ev = queue_model, evidence(CRITERION.id)
    per_node = profile.gpu.per_node
    service = workloads.service("llm-scale", profile.tenants[0], replicas=1, gpus=per_node,
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
    pods.wait_until(f"{beyond} replicas placed, refused by the scheduler or held by the queue",
                    lambda objs: len(ready_pods(service, objs)) + len(unplaced(of(service, objs)))
                    + len(held_by_queue(of(service, objs))) >= beyond, profile.timeouts.admit)
    refused, held = unplaced(of(service, pods.objects)), held_by_queue(of(service, pods.objects))
    reached = len(ready_pods(service, pods.objects))
    ev.tables["pods that could not be placed"] = [{"pod": name, "reason": why} for name, why in sorted(refused.items())] \
        + [{"pod": name, "reason": "held by the queue (scheduling gate): beyond the tenant's GPU limit"} for name in held]
    ev.note(f"scaled to {beyond} whole-node replicas ({per_node} GPUs each) on {nodes} GPU nodes: {reached} reached "
            f"Ready, {len(refused)} refused by the scheduler and {len(held)} held by the queue (not counted as "
            "reached).")
    ev.verdict()


@pytest.mark.parametrize("backend", ["default"], indirect=True)
def test_autoscaling(backend: Backend, workloads: Workloads, queue_model: Profile, target: Target,
                     evidence: Callable[[str], Evidence], tmp_path: Path) -> None:
    require(target, backend, SERVING)
    ev = evidence(AUTOSCALING.id)
    autoscale_run(backend, workloads, queue_model, target, ev, tmp_path)
    ev.verdict()


def autoscale_run(backend: Backend, workloads: Workloads, profile: Profile, target: Target, ev: Evidence,
                  tmp_path: Path, selector: dict[str, str] | None = None) -> None:
    """The HPA scales on the model servers' waiting requests (Prometheus, through the external metrics API) while a
    steady load exceeds what even HPA_MAX replicas serve: out to HPA_MAX, no turning back under the load, back to
    one after it."""
    traffic = traffic_for(target, profile)
    service = workloads.service("llm-hpa", profile.tenants[0], replicas=1, model=workloads.job_name("llm-hpa"),
                                server={"load-time": "1s", "ttft": "500ms", "max-num-seqs": "1"})
    deploy(workloads, backend, service)
    wait_ready(workloads, service, 1, profile.timeouts.admit)
    deployments = workloads.track(service.namespace, "apps/v1", "Deployment")
    replicas: list[tuple[float, float]] = []
    started = time.time()
    deployments.on_event(lambda _e, d: replicas.append((time.time() - started, float(d["spec"].get("replicas", 0))))
                         if d["metadata"]["name"] == service.name else None)
    workloads.apply(service.tenant, [hpa(service, selector or {"model_name": service.model})])
    url = traffic.service_url(target.api, service.namespace, service.app)
    load_started = time.time()
    probe = traffic.probe(url, HPA_LOAD_RATE, HPA_LOAD_S, tmp_path / "hpa-load.jsonl", model=service.model)
    limit = ev.thresholds["hpa_out_within_s"]
    try:
        reached = wait_ready(workloads, service, HPA_MAX, min(limit + 10, HPA_LOAD_S))
        ev.expect("hpa_out_within_s", round(reached - load_started, 3))
    except WaitTimeout:
        ev.expect("hpa_out_within_s", None)
        ev.note(f"the HPA did not reach {HPA_MAX} replicas under load: {hpa_conditions(workloads, service)}")
    probe.samples(HPA_LOAD_S + 30)  # a request given up on (5 s) is aborted by its server, as vLLM does
    load_ended = time.time()
    during = [r for t, r in replicas if t <= load_ended - started]
    ev.expect("max_flaps", flaps([int(r) for r in during]))
    scaled_in = wait_ready(workloads, service, 1, profile.timeouts.admit)
    ev.expect("hpa_in_within_s", round(scaled_in - load_ended, 3))
    ev.series["replicas"] = {"HPA's replicas": replicas}
    ev.note(f"HPA: {HPA_LOAD_RATE:g} requests/s for {HPA_LOAD_S:g} s against replicas serving one sequence of 0.5 s "
            f"each (at most {2 * HPA_MAX}/s at {HPA_MAX} replicas); target {HPA_TARGET} waiting request(s) per "
            f"replica of vllm:num_requests_waiting from Prometheus; replicas over time: "
            f"{', '.join(f'{r:g}@{t:.0f}s' for t, r in replicas)}.")


HPA_MAX, HPA_LOAD_RATE, HPA_LOAD_S, HPA_TARGET = 3, 10.0, 20.0, "1"


def hpa(service: ModelService, selector: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": service.name, "namespace": service.namespace},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": service.name},
                     "minReplicas": 1, "maxReplicas": HPA_MAX,
                     "metrics": [{"type": "External", "external": {
                         "metric": {"name": "vllm_num_requests_waiting", "selector": {"matchLabels": selector}},
                         "target": {"type": "AverageValue", "averageValue": HPA_TARGET}}}],
                     "behavior": {"scaleUp": {"stabilizationWindowSeconds": 0},
                                  "scaleDown": {"stabilizationWindowSeconds": 5}}}}


def hpa_conditions(workloads: Workloads, service: ModelService) -> str:
    found = client.AutoscalingV2Api(workloads.client_for(service.tenant)).read_namespaced_horizontal_pod_autoscaler(
        service.name, service.namespace)
    return "; ".join(f"{c.type}={c.status} ({c.reason}: {c.message})" for c in found.status.conditions or [])

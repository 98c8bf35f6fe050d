"""Inference 4 — service discovery.

After every pod transition (scale out, a pod deleted, scale in), the Service's EndpointSlices converge to exactly
the Ready, non-terminating pods; every pod and slice event is compared, and the longest divergence is the measure.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kubernetes import client

from harness.backends import Backend
from harness.criteria.inference.service_discovery import CRITERION, Convergence, expected, published
from harness.config.profile import Profile
from harness.record.evidence import Evidence
from harness.jobs.service import PORT_NAME
from harness.targets.target import Target
from harness.jobs.kubernetes import Workloads
from suites.inference.common import SERVING, deploy, endpoint_slices, of, require, scale, traffic_for, wait_ready

STEPS = (3, "delete one", 1)  # replicas after each step


def discovery_run(backend: Backend, workloads: Workloads, profile: Profile, target: Target, ev: Evidence,
                  publish_not_ready: bool = False, load_time: str = "2s") -> None:
    require(target, backend, SERVING)
    traffic_for(target, profile)
    service = workloads.service("llm-disc", profile.tenants[0], replicas=1,
                                server={"load-time": load_time}, publish_not_ready=publish_not_ready)
    pods, slices = workloads.pods(service.namespace), endpoint_slices(workloads, service)
    convergence, started = Convergence(), time.time()

    def compare(_event: str, _obj: dict[str, Any]) -> None:
        convergence.observe(time.time() - started, expected(of(service, dict(pods.objects))),
                            published(list(slices.objects.values()), PORT_NAME))
        slices.poke()  # the wait below reads the comparison, whichever watch saw the change

    pods.on_event(compare)
    slices.on_event(compare)
    deploy(workloads, backend, service)
    replicas = 1
    wait_ready(workloads, service, replicas, profile.timeouts.admit)
    for step in STEPS:
        if step == "delete one":
            victim = sorted(p["metadata"]["name"] for p in of(service, pods.objects))[0]
            client.CoreV1Api(workloads.client_for(service.tenant)).delete_namespaced_pod(victim, service.namespace)
            ev.note(f"deleted pod {victim}")  # the ReplicaSet replaces it: the count stays
        else:
            scale(workloads, service, int(step))
            replicas = int(step)
        wait_ready(workloads, service, replicas, profile.timeouts.admit)
        slices.wait_until("the EndpointSlices match the Ready pods", lambda _: convergence.diverged_since is None,
                          profile.timeouts.admit,
                          describe=lambda _: f"they differ by {len(convergence.last_difference)} endpoint(s)")
    now = time.time() - started
    ev.series["ready_endpoints"] = convergence.points
    ev.expect("converge_within_s", round(convergence.worst(now), 3))
    ev.expect("max_mismatched_at_end", len(convergence.last_difference))
    ev.note(f"{len(convergence.points['Ready pods'])} pod and slice events compared; {convergence.episodes} divergence(s) "
            f"(a pod changed before its slice did).")
    ev.verdict()


def test_service_discovery(backend: Backend, workloads: Workloads, queue_model: Profile, target: Target,
                           evidence: Callable[[str], Evidence]) -> None:
    discovery_run(backend, workloads, queue_model, target, evidence(CRITERION.id))

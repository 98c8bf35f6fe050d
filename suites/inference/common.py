"""Shared steps of the inference suite: deploy a model service, watch its pods and endpoints, send traffic."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from harness.backends import Backend
from harness.backends.base import SERVED_MODEL, SERVING
from harness.criteria.inference.elasticity import unplaced
from harness.cluster.manifests import dressed
from harness.cluster.refusals import not_created, not_started
from harness.criteria.inference.service_discovery import published
from harness.config.profile import Profile
from harness.jobs.service import APP_LABEL, PORT_NAME, TRACK_LABEL, ModelService
from harness.targets.target import Target
from harness.cluster.tracker import Objects, Tracker
from harness.serving.traffic import Traffic, inside
from harness.jobs.kubernetes import Workloads
from suites.training.common import require

__all__ = ["require", "SERVING", "SERVED_MODEL", "deploy", "traffic_for", "ready_pods", "endpoint_slices",
           "wait_ready", "is_ready", "scale", "PORT_NAME", "roll_out"]


def traffic_for(target: Target, profile: Profile) -> Traffic:
    """Where probe and load come from, or SKIP with the reason nothing can reach the Service from here."""
    if target.features.runs_sim_workloads:  # the sim, also when reached through another identity's kubeconfig
        plane = target.data_plane()
        if plane is None:
            pytest.skip("the sim runs without its data plane (`gpupoc sim up --no-serving`): no Service answers")
        return inside(plane)
    if profile.inference_url:
        return Traffic(None, profile.inference_url)
    pytest.skip("no route to the model Service from here: set inference.url in the profile (an ingress or gateway "
                "URL in front of the Service; a port-forward reaches one pod, not the Service)")


def deploy(workloads: Workloads, backend: Backend, service: ModelService, with_service: bool = True) -> None:
    """What serves the model on the backend (a Deployment and, once per app, its Service; a RayService); pods
    and slices watched first."""
    workloads.pods(service.namespace)
    if with_service:
        endpoint_slices(workloads, service, backend.serving_route(service).service)
    workloads.apply(service.tenant, backend.serving_manifests(service, with_service))


def endpoint_slices(workloads: Workloads, service: ModelService, service_name: str = "") -> Tracker:
    """The EndpointSlices of the app's Service (or of `service_name`: one a controller made), watched once."""
    return workloads.track(service.namespace, "discovery.k8s.io/v1", "EndpointSlice",
                           label_selector=f"kubernetes.io/service-name={service_name or service.app}")


def is_ready(pod: dict[str, Any]) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or [])


def of(service: ModelService, pods: Objects, track: str | None = None) -> list[dict[str, Any]]:
    labels = {APP_LABEL: service.app, **({TRACK_LABEL: track} if track else {})}
    return [p for p in pods.values()
            if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in labels.items())]


def ready_pods(service: ModelService, pods: Objects, track: str | None = None) -> list[dict[str, Any]]:
    return [p for p in of(service, pods, track) if is_ready(p)]


REFUSED_FOR_S = 15.0  # a pod refused this long is not waiting for a previous test's GPUs to be freed


def wait_ready(workloads: Workloads, service: ModelService, count: int, timeout_s: float,
               track: str | None = None) -> float:
    """Block until exactly `count` pods of the service are Ready and no other is left; when it was seen."""
    pods = workloads.pods(service.namespace)

    def settled(objs: Objects) -> bool:
        return len(ready_pods(service, objs, track)) == count and len(of(service, objs, track)) == count

    def stuck(objs: Objects) -> str | None:
        """Pods it waits for that the scheduler has refused for a while (while scaling in, those are the ones going),
        that a kubelet cannot start, or that the platform refused to create (Pod Security, a quota, a webhook)."""
        mine = of(service, objs, track)
        since_before = datetime.now(timezone.utc) - timedelta(seconds=REFUSED_FOR_S)
        lost = unplaced(mine, since_before=since_before)
        waiting_for_them = len(mine) <= count
        if lost and waiting_for_them:
            return f"{len(lost)} pod(s) cannot be placed: {next(iter(lost.values()))}"
        if len(mine) < count:
            return not_created(workloads.api, service.namespace, f"{service.name}-", since_before)
        return not_started(mine)

    pods.wait_until(f"{count} Ready pod(s) of {service.app}", settled, timeout_s, failed=stuck,
                    describe=lambda objs: f"{len(ready_pods(service, objs, track))} Ready of "
                                          f"{len(of(service, objs, track))} pods")
    return time.time()


def scale(workloads: Workloads, service: ModelService, replicas: int) -> float:
    """Scale the Deployment (its scale subresource, as a user would); when the request was made."""
    at = time.time()
    client.AppsV1Api(workloads.client_for(service.tenant)).patch_namespaced_deployment_scale(
        service.name, service.namespace, {"spec": {"replicas": replicas}})
    return at


def roll_out(workloads: Workloads, backend: Backend, new: ModelService) -> float:
    """Replace the Deployment's pod template with `new` (a new version): a rolling update."""
    apps = client.AppsV1Api(workloads.client_for(new.tenant))
    current = apps.read_namespaced_deployment(new.name, new.namespace).spec.template.metadata.annotations or {}
    deployment = dressed([new.deployment(backend.serving_pod(new.tenant))], workloads.workload_spec)[0]
    template = deployment["spec"]["template"]
    annotations = template["metadata"]["annotations"]
    annotations.update({key: None for key in current if key not in annotations})  # a merge patch keeps what it omits
    at = time.time()
    apps.patch_namespaced_deployment(new.name, new.namespace, {"spec": {"template": template}})
    return at


def wait_routed(traffic: Traffic, slices: Tracker, service: ModelService, count: int, timeout_s: float,
                port_name: str = PORT_NAME) -> None:
    """Until the Service's EndpointSlices list `count` ready endpoints and kube-proxy has programmed them."""
    slices.wait_until(f"{count} ready endpoints of {service.app}",
                      lambda objs: len(published(list(objs.values()), port_name)) == count, timeout_s,
                      describe=lambda objs: f"{len(published(list(objs.values()), port_name))} ready endpoints")
    traffic.wait_programmed(slices.last_event_at)  # the change as our watch saw it, not when this line ran


def wait_served(workloads: Workloads, traffic: Traffic, backend: Backend, service: ModelService,
                timeout_s: float) -> str:
    """Until the backend's Service to the model (a RayService's is made once its Serve applications run) lists every
    replica ready and kube-proxy has programmed it; its URL."""
    route = backend.serving_route(service)
    wait_routed(traffic, endpoint_slices(workloads, service, route.service), service, service.replicas, timeout_s,
                route.port_name)
    return traffic.service_url(workloads.api, service.namespace, route.service, route.port)


def route_url(workloads: Workloads, traffic: Traffic, backend: Backend, service: ModelService,
              timeout_s: float) -> str:
    """The URL of the backend's Service to the model once it exists (ours at once; KubeRay makes a RayService's
    once its Serve applications run): its EndpointSlices' watch (deploy's) sees the first slice of it."""
    route = backend.serving_route(service)
    endpoint_slices(workloads, service, route.service).wait_until(
        f"Service {route.service} (to {service.name}'s servers) made", bool, timeout_s,
        describe=lambda objs: f"{len(objs)} EndpointSlices")
    return traffic.service_url(workloads.api, service.namespace, route.service, route.port)


def standin_server(profile: Profile, changes: dict[str, str] | None = None) -> dict[str, str]:
    """The sim's stand-in settings for a load case: the profile's `inference.standin`, a 1 s load, and `changes`."""
    return {"load-time": "1s", **profile.standin, **(changes or {})}


def servers_selector(service: ModelService) -> str:
    """The PromQL label matchers of the service's model servers' series (the pods of its Deployment)."""
    return f'namespace="{service.namespace}",pod=~"{service.name}-.*"'


def probe_file(tmp_path: Path, name: str) -> Path:
    return tmp_path / f"{name}.jsonl"

"""An inference service as the POC deploys it: a Deployment of model-server pods behind a Service (on KubeRay, a
RayService: harness/backends/kuberay.py).

On the sim each pod asks the data plane for a model-server stand-in (annotations: latency model, load time)
and turns Ready only once that server answers /health; on a real cluster the pod runs the profile's
model-server image and its own readiness probe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from harness.config.accelerators import DEFAULT
from harness.config.profile import Tenant
from harness.config.workloads import MODEL_ANNOTATION, SERVER_CONTAINER, ModelServer

APP_LABEL = "gpupoc.io/app"
TRACK_LABEL = "gpupoc.io/track"   # stable | canary: one Deployment each, behind the app's one Service
VERSION_LABEL = "version"         # what a pod serves; changes in a rollout (not part of the selector)
SERVER_PORT = 8000
PORT_NAME = "http"  # the server's port and the Service's: its number is the profile's (workloads.model_server.port)
SERVICE_PORT = 80
PRE_STOP_S = 3
SIM = "sim.gpupoc.io/"


class Route(NamedTuple):
    """The Service that reaches a model's servers: its name, its port and that port's name in its EndpointSlices."""

    service: str
    port: int = SERVICE_PORT
    port_name: str = PORT_NAME


@dataclass(frozen=True)
class ModelService:
    """`replicas` pods of `version`, each with `gpus` GPUs, serving `model` for a tenant. `server` holds the
    stand-in's latency model on the sim (annotation suffix -> value, e.g. {"ttft": "40ms"})."""

    app: str
    tenant: Tenant
    replicas: int = 1
    version: str = "v1"
    track: str = "stable"
    gpus: int = 1
    model: str = "sim-llm"
    image: str = ModelServer.image  # none: the job system puts the profile's in (cluster/manifests.py: dressed)
    server: dict[str, str] = field(default_factory=dict)
    ready_gate: bool = True          # Ready only when the server answers /health (a readiness probe's job)
    max_unavailable: int = 0
    max_surge: int = 1
    gpu_resource: str = DEFAULT.resource
    publish_not_ready: bool = False  # the Service lists pods before they are Ready (a misconfiguration)

    @property
    def name(self) -> str:
        """The Deployment: one per app and track (stable and canary side by side)."""
        return f"{self.app}-{self.track}"

    @property
    def namespace(self) -> str:
        return self.tenant.inference_namespace

    def deployment(self, placement: dict[str, Any]) -> dict[str, Any]:
        """`placement`: the backend's scheduler name, labels and annotations for the pods (Backend.serving_pod)."""
        annotations = {f"{SIM}model-server": "true", MODEL_ANNOTATION: self.model, f"{SIM}version": self.version,
                       f"{SIM}model-port": str(SERVER_PORT),
                       **{f"{SIM}{k}": v for k, v in self.server.items()},
                       **placement.get("annotations", {})}
        if self.ready_gate:
            annotations[f"{SIM}ready-when"] = "server-health"
        pod_spec: dict[str, Any] = {
            "terminationGracePeriodSeconds": 5,
            "containers": [{
                "name": SERVER_CONTAINER, "image": self.image,
                "ports": [{"name": PORT_NAME, "containerPort": SERVER_PORT}],
                "readinessProbe": {"httpGet": {"path": "/health", "port": SERVER_PORT}, "periodSeconds": 2},
                # Endpoints and kube-proxy drop a terminating pod before it stops listening (a rollout without
                # refused connections); the kubelet's own sleep action, no shell needed in the image.
                "lifecycle": {"preStop": {"sleep": {"seconds": PRE_STOP_S}}},
                "resources": {"requests": {"cpu": "1", "memory": "2Gi"},
                              "limits": {"cpu": "1", "memory": "2Gi", self.gpu_resource: str(self.gpus)}}}]}
        if placement.get("schedulerName"):
            pod_spec["schedulerName"] = placement["schedulerName"]
        labels = {APP_LABEL: self.app, TRACK_LABEL: self.track, VERSION_LABEL: self.version,
                  **placement.get("labels", {})}
        return {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": self.name, "namespace": self.namespace, "labels": dict(labels)},
                "spec": {"replicas": self.replicas,
                         "selector": {"matchLabels": {APP_LABEL: self.app, TRACK_LABEL: self.track}},
                         "strategy": {"type": "RollingUpdate", "rollingUpdate": {
                             "maxUnavailable": self.max_unavailable, "maxSurge": self.max_surge}},
                         "template": {"metadata": {"labels": labels, "annotations": annotations},
                                      "spec": pod_spec}}}

    def service(self) -> dict[str, Any]:
        """One Service per app: it selects every version (stable and canary share it)."""
        return {"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": self.app, "namespace": self.namespace, "labels": {APP_LABEL: self.app}},
                "spec": {"selector": {APP_LABEL: self.app}, "publishNotReadyAddresses": self.publish_not_ready,
                         "ports": [{"name": PORT_NAME, "port": SERVICE_PORT, "targetPort": PORT_NAME}]}}

    def but(self, **changes: Any) -> ModelService:
        """A copy with some fields changed (a new version to roll out, a canary track)."""
        values = {**self.__dict__, **changes}
        values["server"] = dict(values["server"])
        return ModelService(**values)

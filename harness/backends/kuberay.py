"""KubeRay: a RayJob (head + workers = the gang) queued by Kueue in the tenant's LocalQueue.

The operator submits the entrypoint to the head's Ray dashboard itself (HTTPMode: no submitter pod) and follows
the Ray job there until it is terminal. On the sim the dashboard is the data plane's stand-in on the head pod's IP
(harness/sim/ray_dashboard.py, simulated), reached through the Service as in a cluster.
"""

from __future__ import annotations

from typing import Any

import yaml
from kubernetes import client

from harness.backends.base import (TOPOLOGY, CONTROLLER_RESTART, MODEL_QUOTA, DRA, GPU_SHARING, SAMPLE, SERVING, Capabilities, Releases,
                                   Controllers, ElasticJob)
from harness.jobs.model import ADMITTED, FAILED, QUEUED, RUNNING, SUCCEEDED, GangJob, JobStatus, tenant_queue
from harness.core.objects import created_at, parse_time
from harness.backends.detect import missing_controller_reason, missing_crd_reason
from harness.backends.kueue import PREEMPTED_WORKLOADS, QUEUE_LABEL, WORKLOAD_KIND
from harness.jobs.service import SERVER_PORT, ModelService, Route
from harness.targets.target import Target

RAY_PORTS = [{"name": "dashboard", "containerPort": 8265}, {"name": "serve", "containerPort": SERVER_PORT},
             {"name": "gcs-server", "containerPort": 6379}, {"name": "client", "containerPort": 10001}]

API_VERSION = "ray.io/v1"
WORKER_GROUP = "workers"
# Kueue's elastic jobs (its ElasticJobsViaWorkloadSlices gate, beta and on from v0.18): a resized job is admitted as
# a new slice of its Workload; its pods wait behind this scheduling gate until their slice is admitted.
ELASTIC_ANNOTATION = "kueue.x-k8s.io/elastic-job"
ELASTIC_GATE = "kueue.x-k8s.io/elastic-job"


def rayjob_status(obj: dict[str, Any]) -> JobStatus:
    """Pure: a RayJob's jobDeploymentStatus as a job state."""
    status = obj.get("status") or {}
    deployment = status.get("jobDeploymentStatus", "")
    submitted = created_at(obj)
    started = parse_time(status.get("startTime"))
    if deployment == "Complete" and status.get("jobStatus") == "SUCCEEDED":
        return JobStatus(SUCCEEDED, "", submitted, started, parse_time(status.get("endTime")))
    if deployment in ("Complete", "Failed"):
        return JobStatus(FAILED, f"{status.get('reason', '')}: {status.get('message', '')}".strip(": "), submitted,
                         started, parse_time(status.get("endTime")))
    if deployment == "Running":  # the operator's phase: the Ray job itself runs once its dashboard says so
        state = RUNNING if status.get("jobStatus") == "RUNNING" else ADMITTED
        return JobStatus(state, "", submitted, started)
    if deployment == "Initializing":
        return JobStatus(ADMITTED, "", submitted, started)
    return JobStatus(QUEUED, deployment or "", submitted)


class KubeRayBackend(Capabilities):
    name = "kuberay"
    preemption = PREEMPTED_WORKLOADS  # RayJobs are queued, and preempted, by Kueue
    queued_by = "kueue"
    owned = WORKLOAD_KIND
    lacking = {TOPOLOGY: "a RayJob's worker group asking Kueue for one topology domain is not built yet",
               MODEL_QUOTA: "its RayJobs queue in Kueue's queues: the quota per GPU model is Kueue's (the kueue "
                            "backend's case)",
               SERVING: "serves through a RayService (its cold start and latency are measured), whose pods are the Ray "
                        "cluster's, not a Deployment's: the rollout, scaling and endpoint cases are written for "
                        "Deployments",
               GPU_SHARING: "a RayJob's pods take whole GPUs from the device plugin; Ray's fractional num_gpus share "
                            "a GPU inside one Ray worker, not between the cluster's tenants",
               DRA: "a RayJob's head and worker groups are given the device plugin's GPUs; DRA claims in Ray groups "
                    "are not built yet",
               SAMPLE: "a RayJob's pods run Ray (KubeRay starts it); the workload sample is a batch job, not a Ray "
                       "program",
               CONTROLLER_RESTART: (
        "capacity cannot free while its controllers are down: a deleted RayJob keeps its cluster until the operator "
        "removes its finalizer, and that update is refused while Kueue (whose webhook validates RayJobs) is down")}
    controllers = Controllers(("kueue",), ("kueue-controller-manager",), needs=("kuberay-operator", "kube-scheduler"))
    releases = Releases(("kuberay",), ("kuberay-operator",))  # the operator's; Kueue queues through it

    def unavailable_reason(self, target: Target) -> str | None:
        return (missing_crd_reason(target.api, "ray.io", "RayJob", self.name)
                or missing_controller_reason(target, self.name, ("kuberay-operator",), ("kuberay-operator",))
                or missing_crd_reason(target.api, "kueue.x-k8s.io", "Workload", "kueue (queues RayJobs)"))

    def manifests(self, job: GangJob) -> list[dict[str, Any]]:
        queue = tenant_queue(job, "kueue", ": RayJobs are queued by Kueue")
        return [{"apiVersion": API_VERSION, "kind": "RayJob",
                 "metadata": {"name": job.name, "namespace": job.tenant.namespace, "labels": {QUEUE_LABEL: queue}},
                 "spec": {"entrypoint": "python train.py", "shutdownAfterJobFinishes": True,
                          "submissionMode": "HTTPMode",
                          "backoffLimit": job.max_retries, "rayClusterSpec": cluster_spec(job, job.pods - 1)}}]

    def elastic(self, job: GangJob, max_workers: int) -> ElasticJob:
        """A RayCluster queued by Kueue as an elastic job: its worker group resized by `replicas`, which is what the
        Ray autoscaler changes (KubeRay clamps it to maxReplicas)."""
        queue = tenant_queue(job, "kueue", ": RayClusters are queued by Kueue")
        spec = cluster_spec(job, max_workers, gate=ELASTIC_GATE)
        for group in spec["workerGroupSpecs"]:
            group["replicas"] = group["minReplicas"] = job.pods - 1
        manifest = {"apiVersion": API_VERSION, "kind": "RayCluster",
                    "metadata": {"name": job.name, "namespace": job.tenant.namespace, "labels": {QUEUE_LABEL: queue},
                                 "annotations": {ELASTIC_ANNOTATION: "true"}},
                    "spec": spec}

        def resize(api: client.ApiClient, workers: int) -> None:
            client.CustomObjectsApi(api).patch_namespaced_custom_object(
                "ray.io", "v1", job.tenant.namespace, "rayclusters", job.name,
                [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": workers}],
                _content_type="application/json-patch+json")

        return ElasticJob([manifest], resize, is_ray_worker)

    def serving_manifests(self, service: ModelService, with_service: bool = True) -> list[dict[str, Any]]:
        return [ray_service(service)]

    def serving_route(self, service: ModelService) -> Route:
        return Route(f"{service.name}-serve-svc", SERVER_PORT, "serve")  # KubeRay's, of the Serve replicas

    def tracked_kind(self) -> tuple[str, str]:
        return API_VERSION, "RayJob"

    def status(self, obj: dict[str, Any]) -> JobStatus:
        return rayjob_status(obj)


def cluster_spec(job: GangJob, workers: int, gate: str = "") -> dict[str, Any]:
    """A Ray cluster for `job`: a head, and a worker group of `workers` (none: a head alone); every pod behind the
    scheduling `gate` when one is named."""
    template = job.pod_template()
    pod_spec = {**template["spec"], "restartPolicy": "Always",
                **({"schedulingGates": [{"name": gate}]} if gate else {})}
    head = {"metadata": template["metadata"],
            "spec": {**pod_spec, "containers": [{**template["spec"]["containers"][0], "name": "ray-head"}]}}
    worker = {"metadata": template["metadata"], "spec": pod_spec}
    spec: dict[str, Any] = {"headGroupSpec": {"rayStartParams": {}, "template": head}, "workerGroupSpecs": []}
    if workers:
        spec["workerGroupSpecs"] = [{"groupName": WORKER_GROUP, "replicas": workers, "minReplicas": workers,
                                     "maxReplicas": workers, "rayStartParams": {}, "template": worker}]
    return spec


def is_ray_worker(pod: dict[str, Any]) -> bool:
    return (pod["metadata"].get("labels") or {}).get("ray.io/node-type") == "worker"


def ray_service(service: ModelService) -> dict[str, Any]:
    """A RayService serving the model: a head (dashboard, no GPU, left out of the serve Service) and `replicas`
    GPU workers, each a replica of the Serve application (the profile's `workloads.ray.serve_app`, put in with
    the image when the manifest is dressed), reached through KubeRay's `<name>-serve-svc`. On the sim each
    worker asks the data plane for the model-server stand-in (the Deployment's pod annotations, simulated)."""
    pod = service.deployment({})["spec"]["template"]
    server = pod["spec"]["containers"][0]
    worker = {"metadata": pod["metadata"], "spec": {
        "terminationGracePeriodSeconds": pod["spec"]["terminationGracePeriodSeconds"],
        "containers": [{"name": "ray-worker", "image": server["image"], "resources": server["resources"],
                        "ports": [{"name": "serve", "containerPort": SERVER_PORT}]}]}}
    head = {"metadata": {"labels": {}}, "spec": {"containers": [{
        "name": "ray-head", "image": server["image"], "ports": RAY_PORTS,
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}}}]}}
    replicas = service.replicas
    app = {"name": "llm", "route_prefix": "/", "import_path": "",
           "args": {"llm_configs": [{"model_loading_config": {"model_id": service.model},
                                     "deployment_config": {"num_replicas": replicas}}]}}
    return {"apiVersion": API_VERSION, "kind": "RayService",
            "metadata": {"name": service.name, "namespace": service.namespace,
                         "labels": dict(pod["metadata"]["labels"])},
            "spec": {"excludeHeadPodFromServeSvc": True,
                     "serveConfigV2": yaml.safe_dump({"applications": [app]}, sort_keys=False),
                     "rayClusterConfig": {
                         "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0"}, "template": head},
                         "workerGroupSpecs": [{"groupName": "gpu", "replicas": replicas, "minReplicas": replicas,
                                               "maxReplicas": replicas, "rayStartParams": {}, "template": worker}]}}}

"""The abstract job every backend runs: a gang of pods for a tenant, its states, and its members (pods) read back."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from harness.config.accelerators import DEFAULT
from harness.config.profile import Tenant
from harness.config.workloads import RUN_FOR_ANNOTATION, TRAIN_CONTAINER, Trainer
from harness.core.errors import ConfigError

QUEUED, ADMITTED, RUNNING, SUCCEEDED, FAILED, PREEMPTED = (
    "queued", "admitted", "running", "succeeded", "failed", "preempted")
JOB_LABEL = "gpupoc.io/job"  # on every pod of a job, whatever the backend: how its pods are found
GPU_CLAIM = "gpus"  # a DRA job's pods: the name of their GPU claim (pod.spec.resourceClaims, and its one request)
DEFAULT_RUN_FOR_S = 30.0


@dataclass(frozen=True)
class GpuShare:
    """A share of one GPU a pod asks for: a fraction of the device, or MiB of its memory (KAI's `gpu-fraction` and
    `gpu-memory`); the backend that shares GPUs says how (Capabilities: GPU_SHARING)."""

    fraction: float | None = None
    memory_mib: int | None = None

    def __post_init__(self) -> None:
        if (self.fraction is None) == (self.memory_mib is None):
            raise ConfigError("a GPU share is a fraction or an amount of memory, one of the two")

    def asked(self, device_memory_mib: int) -> float:
        """The fraction of one device asked for."""
        return self.fraction if self.fraction is not None else (self.memory_mib or 0) / device_memory_mib

    def __str__(self) -> str:
        return f"{self.fraction:g} GPU" if self.fraction is not None else f"{self.memory_mib} MiB of a GPU"


@dataclass(frozen=True)
class Placement:
    """Where a gang's pods must (or should) be together: within one domain of a topology level, a node label's key
    (the profile's gpu.topology); each backend asks its scheduler in its own words."""

    level: str
    required: bool = True
    tier: int = 1  # the level's tier counted up from the nodes (Volcano's HyperNodes: profile Topology.tier)


# A member's SIGTERM trap ends it within a second (harness/config/workloads.py); a signal that comes before the shell
# has set the trap is ignored (PID 1), and the kubelet then waits out the grace period: 30 s by default held a
# preempted job's GPUs past priority_preemption's threshold on a real node (make poc 2026-12-05: Kueue preempted a
# member 0.04 s after its container started; it ended 29.9 s later). Five seconds bounds that for the harness's jobs.
TERMINATION_GRACE_S = 5


@dataclass(frozen=True)
class GangJob:
    """A gang of `pods` pods x `gpus_per_pod` GPUs for a tenant, at a priority, running `run_for_s` on the sim."""

    name: str
    tenant: Tenant
    pods: int
    gpus_per_pod: int
    gpu_resource: str = DEFAULT.resource
    priority_class: str | None = None
    run_for_s: float = DEFAULT_RUN_FOR_S
    max_retries: int = 0          # restarts of the whole job before it is failed
    restart_on_failure: bool = True
    image: str = Trainer.image  # none: the job system puts the profile's in (cluster/manifests.py: dressed)
    labels: dict[str, str] = field(default_factory=dict)
    container: str = TRAIN_CONTAINER  # what its pods run: a trainer, or the workload sample (config/workloads.py)
    node_selector: dict[str, str] = field(default_factory=dict)  # beside the profile's (one node: a co-location)
    device_class: str | None = None  # its GPUs claimed through DRA from this DeviceClass, not the device plugin's
    tolerations: tuple[dict[str, Any], ...] = ()  # beside the profile's (an autoscaled pool's taint)
    gpu_share: GpuShare | None = None  # each pod asks for a share of one GPU instead of whole GPUs
    placement: Placement | None = None  # its pods within one topology domain (a backend that can: TOPOLOGY)
    gpu_model: str | None = None  # its GPUs of this model, under the tenant's quota of it (one that can: MODEL_QUOTA)

    def __post_init__(self) -> None:
        if self.pods < 1 or self.gpus_per_pod < 0:
            raise ConfigError(f"job {self.name}: needs at least 1 pod and 0 or more GPUs per pod")
        if self.gpu_share and self.gpus_per_pod:
            raise ConfigError(f"job {self.name}: a share of a GPU or whole GPUs per pod, not both")

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod

    @property
    def claim_template_name(self) -> str:
        return f"{self.name}-{GPU_CLAIM}"

    def claim_template(self) -> dict[str, Any] | None:
        """A DRA job's ResourceClaimTemplate (each pod gets a claim of its own from it): `gpus_per_pod` devices of
        its DeviceClass; None for a job of the device plugin's GPUs."""
        if not self.device_class:
            return None
        request = {"name": GPU_CLAIM, "exactly": {"deviceClassName": self.device_class, "allocationMode": "ExactCount",
                                                  "count": self.gpus_per_pod}}
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": self.claim_template_name, "namespace": self.tenant.namespace,
                             "labels": {JOB_LABEL: self.name}},
                "spec": {"spec": {"devices": {"requests": [request]}}}}

    def pod_template(self) -> dict[str, Any]:
        limits = {"cpu": "1", "memory": "1Gi"}
        if not self.device_class and not self.gpu_share:
            limits[self.gpu_resource] = str(self.gpus_per_pod)
        container: dict[str, Any] = {"name": self.container, "image": self.image,
                                     "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": limits}}
        spec: dict[str, Any] = {"restartPolicy": "Never", "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
                                "containers": [container]}
        if self.device_class:
            container["resources"]["claims"] = [{"name": GPU_CLAIM}]
            spec["resourceClaims"] = [{"name": GPU_CLAIM, "resourceClaimTemplateName": self.claim_template_name}]
        if self.priority_class:
            spec["priorityClassName"] = self.priority_class
        if self.node_selector:
            spec["nodeSelector"] = dict(self.node_selector)
        if self.tolerations:
            spec["tolerations"] = [dict(t) for t in self.tolerations]
        return {"metadata": {"labels": {**self.labels, JOB_LABEL: self.name},
                             "annotations": {RUN_FOR_ANNOTATION: f"{self.run_for_s:g}s"}},
                "spec": spec}


class MakesJobs:
    """What a case asks its job system for: a gang of the profile's accelerator, named for this run and test (the
    job systems carry `gpu_resource` from the profile and name jobs their own way)."""

    gpu_resource: str = DEFAULT.resource

    def job_name(self, base: str) -> str:
        raise NotImplementedError

    def gang(self, base: str, tenant: Tenant, pods: int, gpus_per_pod: int, **options: Any) -> GangJob:
        """A gang named for `base`, its pods asking for the profile's accelerator."""
        return GangJob(self.job_name(base), tenant, pods, gpus_per_pod, gpu_resource=self.gpu_resource, **options)


@dataclass(frozen=True)
class JobStatus:
    """A job's state, read from server-side facts, with the server's timestamps where it has them."""

    state: str
    reason: str = ""
    submitted_at: datetime | None = None
    admitted_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass(frozen=True)
class OwnedKind:
    """Objects a controller makes for our jobs (Kueue's Workloads): tracked, and waited out at teardown."""

    api_version: str
    kind: str
    status: Callable[[dict[str, Any]], JobStatus]
    job_uid_label: str  # the label naming the UID of the job it belongs to
    # (object, GPU resource) -> (the queue it charged, the GPUs of its quota) while admitted: a queue's usage metric
    # that counts reservations (Kueue's) is compared with these, not with the pods (cost attribution)
    reserved: Callable[[dict[str, Any], str], tuple[str, float]] | None = None


def pod_state(pod: dict[str, Any]) -> str:
    """Pure: 'pending', 'bound', 'running', 'succeeded', 'failed' of a Pod dict."""
    status = pod.get("status") or {}
    phase = status.get("phase", "Pending")
    if phase == "Pending":
        return "bound" if (pod.get("spec") or {}).get("nodeName") else "pending"
    return str(phase).lower()


def job_of(obj: dict[str, Any]) -> str | None:
    """The gpupoc job an object (a pod) belongs to: its JOB_LABEL."""
    return ((obj.get("metadata") or {}).get("labels") or {}).get(JOB_LABEL)


def tenant_queue(job: GangJob, backend: str, why: str = "") -> str:
    """The tenant's queue for `backend` from the profile, or an error naming the missing field."""
    queue = job.tenant.queues.get(backend)
    if not queue:
        raise ConfigError(f"tenant {job.tenant.name} has no {backend} queue in the profile "
                         f"(tenants[].queues.{backend}){why}")
    return queue


def model_slug(model: str) -> str:
    """Pure: a GPU model as its discovery names it (NVIDIA-L40S) in an object's name (nvidia-l40s)."""
    return re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")


def model_queue_name(queue: str, model: str) -> str:
    """Pure: a tenant's queue of one GPU model (Volcano's, KAI's): its queue's name suffixed with the model."""
    return f"{queue}-{model_slug(model)}"


def model_queue(job: GangJob, backend: str) -> str:
    """The queue of the job's GPU model for `backend` (gpupoc setup makes one per tenant and model of gpu.models);
    the tenant's own queue for a job of no model."""
    queue = tenant_queue(job, backend)
    return model_queue_name(queue, job.gpu_model) if job.gpu_model else queue


def disruption(pod: dict[str, Any]) -> str | None:
    """Why a pod was evicted, from its DisruptionTarget condition (first line of the message: KAI appends its
    per-queue usage lines); None without one."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    target = next((c for c in conditions if c.get("type") == "DisruptionTarget" and c.get("status") == "True"), None)
    if target is None:
        return None
    first_line = (str(target.get("message") or "").splitlines() or [""])[0]
    return f"{target.get('reason', '')}: {first_line}"


class JobKinds(Protocol):
    """What the Kubernetes job system asks of a backend: its manifests, the object that says a job's state, and
    the objects its controller makes (the rest of a backend, capabilities and monitoring, is the backend's own)."""

    name: str
    queued_by: str

    def manifests(self, job: GangJob) -> list[dict[str, Any]]:
        ...

    def charged_queue(self, job: GangJob) -> str:
        ...

    def queue_named_on(self, pod: dict[str, Any]) -> str:
        """The queue a pod that is no job's (a served model's replica) names for itself; '' none."""
        ...

    def tracked_kind(self) -> tuple[str, str]:
        ...

    def status(self, obj: dict[str, Any]) -> JobStatus:
        ...

    def owned_kind(self) -> OwnedKind | None:
        ...

"""What every backend adapter offers: an abstract gang job in, manifests out, states read back."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from collections.abc import Callable
from typing import Any, Protocol

from kubernetes import client

from harness.errors import ConfigError, HarnessError
from harness.profile import Profile, Tenant

QUEUED, ADMITTED, RUNNING, SUCCEEDED, FAILED, PREEMPTED = (
    "queued", "admitted", "running", "succeeded", "failed", "preempted")
RUN_FOR_ANNOTATION = "sim.gpupoc.io/run-for"
JOB_LABEL = "gpupoc.io/job"  # on every pod of a job, whatever the backend: how its pods are found
DEFAULT_RUN_FOR_S = 30.0


@dataclass(frozen=True)
class GangJob:
    """A gang of `pods` pods x `gpus_per_pod` GPUs for a tenant, at a priority, running `run_for_s` on the sim."""

    name: str
    tenant: Tenant
    pods: int
    gpus_per_pod: int
    gpu_resource: str = "nvidia.com/gpu"
    priority_class: str | None = None
    run_for_s: float = DEFAULT_RUN_FOR_S
    max_retries: int = 0          # restarts of the whole job before it is failed
    restart_on_failure: bool = True
    image: str = "sim/trainer:1"
    labels: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.pods < 1 or self.gpus_per_pod < 0:
            raise ConfigError(f"job {self.name}: needs at least 1 pod and 0 or more GPUs per pod")

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod

    def pod_template(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [{
            "name": "train", "image": self.image,
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                          "limits": {"cpu": "1", "memory": "1Gi", self.gpu_resource: str(self.gpus_per_pod)}}}]}
        if self.priority_class:
            spec["priorityClassName"] = self.priority_class
        return {"metadata": {"labels": {**self.labels, JOB_LABEL: self.name},
                             "annotations": {RUN_FOR_ANNOTATION: f"{self.run_for_s:g}s"}},
                "spec": spec}


@dataclass(frozen=True)
class JobStatus:
    """A job's state, read from server-side facts, with the server's timestamps where it has them."""

    state: str
    reason: str = ""
    submitted_at: datetime | None = None
    admitted_at: datetime | None = None
    finished_at: datetime | None = None


# Capabilities a suite may ask for; a backend says which it lacks, and why (the SKIP or "not checked" reason).
GANG = "gang admission"                      # all-or-nothing admission of a job's pods
RETRY_POLICY = "retry policy"                # a failed pod is retried by the job's own policy
JOBS_COMPLETE = "jobs complete"              # a job runs to completion on this target
PREEMPTION_COUNTER = "preemption counter"    # the scheduler counts preemptions in Prometheus
WAIT_HISTOGRAM = "wait histogram"            # the scheduler exports a submission-to-admission histogram
CONTROLLER_RESTART = "controller restart"    # the harness can stop and start the controllers that admit jobs
QUEUE_QUOTA = "queue quota"                  # tenants' queues with a GPU limit the scheduler enforces
BORROWING = "borrowing"                      # quota lent to other tenants while idle and reclaimed, usage on the queue
MONITORING = "monitoring catalogue"          # the harness knows which of its series a POC needs
SERVING = "serving"                          # it places a Deployment's pods (an inference service)
PROMPT_FAIR_SHARE = "prompt fair share"      # its fair share acts within seconds of a tenant arriving
RANKED_FAIR_SHARE = "ranked fair share"      # it ranks tenants by recorded usage every period; the harness can
#                                              start their usage from zero for the fairness case
CAPABILITIES = (GANG, RETRY_POLICY, JOBS_COMPLETE, PREEMPTION_COUNTER, WAIT_HISTOGRAM, CONTROLLER_RESTART, QUEUE_QUOTA,
                BORROWING, MONITORING, SERVING, PROMPT_FAIR_SHARE, RANKED_FAIR_SHARE)


@dataclass(frozen=True)
class Controllers:
    """The controllers that admit a backend's jobs: processes of the sim, Deployments of a real cluster
    (none where they cannot be restarted through the API, e.g. kube-scheduler as a static pod)."""

    sim: tuple[str, ...]
    deployments: tuple[str, ...] = ()
    why_not_elsewhere: str = ""
    needs: tuple[str, ...] = ()  # other processes of the sim its jobs rely on (watched, not restarted)


@dataclass(frozen=True)
class PreemptionCounter:
    """The scheduler's own preemption count, and the unit it counts in (pods, workloads or preemptors)."""

    promql: str
    unit: str


@dataclass(frozen=True)
class OwnedKind:
    """Objects a controller makes for our jobs (Kueue's Workloads): tracked, and waited out at teardown."""

    api_version: str
    kind: str
    status: Callable[[dict[str, Any]], JobStatus]
    job_uid_label: str  # the label naming the UID of the job it belongs to


@dataclass(frozen=True)
class WaitHistogram:
    """The scheduler's submission-to-admission histogram: name, seconds per unit, per-queue label ('' if none)."""

    metric: str
    seconds_per_unit: float = 1.0
    queue_label: str = ""


@dataclass(frozen=True)
class QueueUsage:
    """Where a scheduler says how many GPUs a tenant's queue holds: the queue object in its API, and its metric
    (PromQL with {queue} and {resource}; '' when it exports none, with the reason in `no_metric`)."""

    api_version: str
    kind: str
    held: Callable[[dict[str, Any], str], float]  # (queue object, GPU resource) -> GPUs its jobs hold
    promql: str = ""
    no_metric: str = ""


@dataclass(frozen=True)
class Series:
    """A series a POC needs from a backend's monitoring: what it tells, its selector, and whether it appears only
    at its first event (a counter of preemptions, say; absent until then). No selector: the backend exports none."""

    need: str
    selector: str
    event: bool = False


@dataclass(frozen=True)
class Monitoring:
    """What a backend exports for a POC, and the PromQL of jobs waiting in a queue ({queue}; '' when none)."""

    series: tuple[Series, ...]
    pending: str = ""
    pods: bool = True  # its jobs run as pods: kube-state-metrics' pod series are needed too


def allocated_gpus(queue: dict[str, Any], resource: str) -> float:
    """Volcano's and KAI's Queue status: `allocated` per resource."""
    return float(((queue.get("status") or {}).get("allocated") or {}).get(resource, 0) or 0)


class Backend(Protocol):
    name: str
    queued_by: str  # the backend whose queues hold its jobs when not its own ('')

    @property
    def controllers(self) -> Controllers | None:
        """The controllers that admit its jobs (restarted by control-plane recovery, watched during its tests)."""
        ...

    def lacks(self, capability: str, target_kind: str) -> str | None:
        """None when this backend has `capability` on a target of `target_kind`, else why not."""
        ...

    def usage_from_zero(self, profile: Profile) -> float:
        """RANKED_FAIR_SHARE: the tenants' recorded usage starts from zero (for the fairness case), once the backend
        has ranked them on it; returns how often it ranks them (seconds)."""
        ...

    def preemption_counter(self) -> PreemptionCounter | None:
        ...

    def wait_histogram(self) -> WaitHistogram | None:
        ...

    def owned_kind(self) -> OwnedKind | None:
        """Objects a controller makes for our jobs (tracked, and waited out at teardown), if any."""
        ...

    def unavailable_reason(self, api: client.ApiClient) -> str | None:
        """None when the backend can be used on this cluster, else why not (the SKIP reason)."""
        ...

    @property
    def monitoring(self) -> Monitoring | None:
        """The series a POC needs from it (None: no catalogue)."""
        ...

    @property
    def queue_usage(self) -> QueueUsage | None:
        """Where it says what a tenant's queue holds (None: it has no queues with quota)."""
        ...

    @property
    def usage_metric(self) -> str:
        """PromQL of the GPUs a queue uses where it has no queue object (Slurm's accounts); '' otherwise."""
        ...

    def manifests(self, job: GangJob) -> list[dict[str, Any]]:
        """The objects to apply for `job`, in the tenant's namespace."""
        ...

    def serving_pod(self, tenant: Tenant) -> dict[str, Any]:
        """What a serving Deployment's pod template needs to be placed by this backend for `tenant`:
        {"schedulerName": ..., "labels": {...}, "annotations": {...}} (empty: the default scheduler)."""
        ...

    def tracked_kind(self) -> tuple[str, str]:
        """(apiVersion, kind) of the object whose status says the job's state."""
        ...

    def status(self, obj: dict[str, Any]) -> JobStatus:
        """Pure: the job's state from its tracked object (as a dict)."""
        ...



class Capabilities:
    """What a backend can do, as data: the capabilities it lacks everywhere and those it lacks on the sim."""

    name = ""
    lacking: dict[str, str] = {}          # capability -> why this backend never has it
    lacking_on_sim: dict[str, str] = {}   # capability -> why not on the sim
    preemption: PreemptionCounter | None = None
    wait: WaitHistogram | None = None
    owned: OwnedKind | None = None
    controllers: Controllers | None = None
    queue_usage: QueueUsage | None = None
    usage_metric = ""  # PromQL of the GPUs a queue ({queue}) uses, where it has no queue object to read (Slurm)
    monitoring: Monitoring | None = None
    queued_by = ""  # the backend whose queues hold its jobs when not its own (KubeRay's RayJobs: Kueue's)

    def lacks(self, capability: str, target_kind: str) -> str | None:
        if capability not in CAPABILITIES:
            raise ValueError(f"unknown capability {capability!r}; known: {', '.join(CAPABILITIES)}")
        if capability in self.lacking:
            return f"{self.name}: {self.lacking[capability]}"
        if target_kind == "sim" and capability in self.lacking_on_sim:
            return f"{self.name}: {self.lacking_on_sim[capability]}"
        if capability == PREEMPTION_COUNTER and self.preemption is None:
            return f"{self.name}: no preemption counter exported"
        if capability == WAIT_HISTOGRAM and self.wait is None:
            return f"{self.name}: no submission-to-admission histogram exported"
        if capability == MONITORING and self.monitoring is None:
            return f"{self.name}: no catalogue of the series it exports (it hands its pods to a scheduler)"
        if capability == QUEUE_QUOTA and self.queue_usage is None:
            return f"{self.name}: no queues with a GPU quota and limit"
        if capability == BORROWING and self.queue_usage is None:
            return f"{self.name}: no queue lends its idle quota and reclaims it"
        if capability == RANKED_FAIR_SHARE and type(self).usage_from_zero is Capabilities.usage_from_zero:
            return f"{self.name}: its fair share does not rank tenants by recorded usage"
        if capability == CONTROLLER_RESTART and (self.controllers is None or (
                target_kind != "sim" and not self.controllers.deployments)):
            why = self.controllers.why_not_elsewhere if self.controllers else "no controller known to restart"
            return f"{self.name}: {why}"
        return None

    def usage_from_zero(self, profile: Profile) -> float:
        raise HarnessError(f"{self.name}: its fair share does not rank tenants by recorded usage")

    def preemption_counter(self) -> PreemptionCounter | None:
        return self.preemption

    def wait_histogram(self) -> WaitHistogram | None:
        return self.wait

    def owned_kind(self) -> OwnedKind | None:
        return self.owned

    def serving_pod(self, tenant: Tenant) -> dict[str, Any]:
        return {}


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


def disruption(pod: dict[str, Any]) -> str | None:
    """Why a pod was evicted, from its DisruptionTarget condition (first line of the message: KAI appends its
    per-queue usage lines); None without one."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    target = next((c for c in conditions if c.get("type") == "DisruptionTarget" and c.get("status") == "True"), None)
    if target is None:
        return None
    first_line = (str(target.get("message") or "").splitlines() or [""])[0]
    return f"{target.get('reason', '')}: {first_line}"


def parse_time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == kind), None)


def condition_true(obj: dict[str, Any], kind: str) -> bool:
    found = condition(obj, kind)
    return found is not None and found.get("status") == "True"


def condition_time(obj: dict[str, Any], kind: str) -> datetime | None:
    found = condition(obj, kind)
    return parse_time(found.get("lastTransitionTime")) if found and found.get("status") == "True" else None


def created_at(obj: dict[str, Any]) -> datetime | None:
    return parse_time((obj.get("metadata") or {}).get("creationTimestamp"))

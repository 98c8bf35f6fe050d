"""What every backend adapter offers: an abstract gang job in, manifests out, states read back."""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable
from typing import Any, Protocol

from kubernetes import client
from kubernetes.utils import parse_quantity

from harness.criteria.governance.monitoring_coverage import Series
from harness.core.errors import HarnessError
from harness.jobs.model import GangJob, JobStatus, OwnedKind, model_queue_name
from harness.config.profile import Profile, Tenant
from harness.jobs.kubernetes import Workloads
from harness.jobs.system import JobSystem
from harness.jobs.service import ModelService, Route
from harness.targets.target import Features, Target


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
SERVED_MODEL = "served model"                # it serves a model behind a Service (a Deployment, a RayService)
PROMPT_FAIR_SHARE = "prompt fair share"      # its fair share acts within seconds of a tenant arriving
RANKED_FAIR_SHARE = "ranked fair share"      # it ranks tenants by recorded usage every period; the harness can
#                                              start their usage from zero for the fairness case
SAMPLE = "workload sample"                   # it runs the sample's container as given (its image, args, volume)
DRA = "DRA devices"                          # it places pods whose GPUs are claimed through DRA (ResourceClaims)
AUTOSCALING = "autoscaled nodes"             # its jobs' pods make a Kubernetes autoscaler add nodes, and run there
GPU_SHARING = "GPU sharing"                  # it gives pods fractions of one GPU and says which device they share
ELASTIC_WORKERS = "elastic workers"          # a running job's worker group is resized when asked, under its queue
COMBINED = "combined schedulers"             # one project's queue and admission in front of another's placement
MULTICLUSTER = "one queue over clusters"     # a manager's queue dispatches jobs to worker clusters
UPGRADE = "upgrade in place"                 # its controllers are replaced by their next release with work queued
TOPOLOGY = "topology placement"              # a gang asked to stay within one topology domain is placed so
MODEL_QUOTA = "quota per GPU model"          # a tenant's queue holds a quota of each GPU model and places on that model
CAPABILITIES = (TOPOLOGY, MODEL_QUOTA, SAMPLE, DRA, AUTOSCALING, GPU_SHARING, ELASTIC_WORKERS, COMBINED, MULTICLUSTER, UPGRADE, GANG, RETRY_POLICY,
                JOBS_COMPLETE, PREEMPTION_COUNTER, WAIT_HISTOGRAM, CONTROLLER_RESTART, QUEUE_QUOTA, BORROWING, MONITORING, SERVING,
                SERVED_MODEL, PROMPT_FAIR_SHARE, RANKED_FAIR_SHARE)


@dataclass(frozen=True)
class Controllers:
    """The controllers that admit a backend's jobs: processes of the sim, Deployments of a real cluster
    (none where they cannot be restarted through the API, e.g. kube-scheduler as a static pod)."""

    sim: tuple[str, ...]
    deployments: tuple[str, ...] = ()
    why_not_elsewhere: str = ""
    needs: tuple[str, ...] = ()  # other processes of the sim its jobs rely on (watched, not restarted)


@dataclass(frozen=True)
class Releases:
    """What an upgrade in place replaces: on the sim, the schedulers whose release before the pinned one is built
    (`gpupoc sim build --with upgrade`); on a real cluster, the Deployments whose image the cluster's own upgrade
    changes."""

    sim: tuple[str, ...]
    deployments: tuple[str, ...]
    why_not_on_sim: str = ""


@dataclass(frozen=True)
class PreemptionCounter:
    """The scheduler's own preemption count, and the unit it counts in (pods, workloads or preemptors). A `gauge`
    says how many its latest preemption took (Volcano's victims), not how many since it started: read from a scrape
    after the case's one preemption, not as an increase (its promql then a bare series, whose samples' time tells)."""

    promql: str
    unit: str
    gauge: bool = False


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
class ElasticJob:
    """A job whose worker group is resized while it runs, as an autoscaler asks (the Ray autoscaler: a RayCluster's
    worker replicas): its objects, the request for `n` workers, and which of its pods are workers."""

    manifests: list[dict[str, Any]]
    resize: Callable[[client.ApiClient, int], None]
    is_worker: Callable[[dict[str, Any]], bool]


@dataclass(frozen=True)
class Monitoring:
    """What a backend exports for a POC, and the PromQL of jobs waiting in a queue ({queue}; '' when none)."""

    series: tuple[Series, ...]
    pending: str = ""
    pods: bool = True  # its jobs run as pods: kube-state-metrics' pod series are needed too


def allocated_gpus(queue: dict[str, Any], resource: str) -> float:
    """Volcano's and KAI's Queue status: `allocated` per resource (a quantity: KAI's fractions are "750m")."""
    return float(parse_quantity(((queue.get("status") or {}).get("allocated") or {}).get(resource, 0) or 0))


class Backend(Protocol):
    name: str
    queued_by: str  # the backend whose queues hold its jobs when not its own ('')
    placed_by: str  # the scheduler that places its pods when another component admits them ('': its own)
    jobs_on_kubernetes: bool  # its jobs are Kubernetes objects (under the queue model the run applies)
    criteria: frozenset[str]  # the criteria it is measured on, where not all; the others SKIP with criteria_reason
    criteria_reason: str
    preferred_topology: str  # how a gang may prefer one topology domain; "" where it cannot (or is not checked)
    preferred_topology_unchecked: str

    @property
    def controllers(self) -> Controllers | None:
        """The controllers that admit its jobs (restarted by control-plane recovery, watched during its tests)."""
        ...

    def lacks(self, capability: str, target: Features) -> str | None:
        """None when this backend has `capability` on a target offering `target`, else why not."""
        ...

    def job_system(self, target: Target, profile: Profile, run_id: str, test_id: str,
                   apply_model: bool = True) -> JobSystem:
        """The system a test's jobs are submitted to and read back from (`apply_model`: the backend's own
        reference model applied first where the run applies one)."""
        ...

    def usage_from_zero(self, profile: Profile) -> float:
        """RANKED_FAIR_SHARE: the tenants' recorded usage starts from zero (for the fairness case), once the backend
        has ranked them on it; returns how often it ranks them (seconds)."""
        ...

    def preemption_counter(self) -> PreemptionCounter | None:
        ...

    def not_yet_running(self, api: client.ApiClient, namespace: str, jobs: list[str]) -> list[str]:
        """Those of `jobs`, all bound, that the placing scheduler has not yet recorded as running (where it keeps a
        record of its own apart from the pods': Volcano's PodGroup under Kueue)."""
        ...

    def taken_in(self, api: client.ApiClient, namespace: str, job: str) -> bool:
        """The placing scheduler holds `job`, admitted but not placed, as taken in: its resources counted as taken
        (Volcano's PodGroup Inqueue under Kueue; True where the pods are the only record)."""
        ...

    def wait_histogram(self) -> WaitHistogram | None:
        ...

    def owned_kind(self) -> OwnedKind | None:
        """Objects a controller makes for our jobs (tracked, and waited out at teardown), if any."""
        ...

    def unavailable_reason(self, target: Target) -> str | None:
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

    def serving_manifests(self, service: ModelService, with_service: bool = True) -> list[dict[str, Any]]:
        """The objects that serve `service` on this backend (a Deployment and its Service, or a RayService)."""
        ...

    def serving_route(self, service: ModelService) -> Route:
        """The Service that reaches the model servers."""
        ...

    @property
    def sim_schedulers(self) -> tuple[str, ...]:
        """What `gpupoc sim up --schedulers` must run for it."""
        ...

    @property
    def queue_system(self) -> str:
        """The key of its queues in the profile's tenants[].queues and dev_queues (whose queues hold its jobs)."""
        ...

    def charged_queue(self, job: GangJob) -> str:
        """The queue whose usage the scheduler charges with `job`'s GPUs (its per-queue usage metric's queue); ''
        where the tenant has no queue in its queue system."""
        ...

    def queue_named_on(self, pod: dict[str, Any]) -> str:
        """The queue a pod that is no job's (a served model's replica, serving_pod) names for itself; '' none."""
        ...

    def elastic(self, job: GangJob, max_workers: int) -> ElasticJob | None:
        """`job` (a head and `job.pods - 1` workers) as one whose workers can be resized up to `max_workers`."""
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
    releases: Releases | None = None
    queue_usage: QueueUsage | None = None
    usage_metric = ""  # PromQL of the GPUs a queue ({queue}) uses, where it has no queue object to read (Slurm)
    monitoring: Monitoring | None = None
    queued_by = ""  # the backend whose queues hold its jobs when not its own (KubeRay's RayJobs: Kueue's)
    placed_by = ""  # the scheduler that places its pods when another component admits them (Kueue + Volcano)
    multicluster = ""  # how one of its queues spans clusters (Kueue: MultiKueue); "" for none
    jobs_on_kubernetes = True
    criteria: frozenset[str] = frozenset()  # the criteria it is measured on, where not all (why: criteria_reason)
    preferred_topology = ""  # how a gang may prefer one topology domain (and take more when it must); "" none
    preferred_topology_unchecked = "a gang cannot prefer one domain and take more when it must"  # why not, where ""
    criteria_reason = ""

    def lacks(self, capability: str, target: Features) -> str | None:
        if capability not in CAPABILITIES:
            raise ValueError(f"unknown capability {capability!r}; known: {', '.join(CAPABILITIES)}")
        if capability in self.lacking:
            return f"{self.name}: {self.lacking[capability]}"
        if target.own_processes and capability in self.lacking_on_sim:
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
        if capability == MULTICLUSTER and not self.multicluster:
            return f"{self.name}: no queue of its own dispatches to other clusters (Kueue's MultiKueue does)"
        if capability == UPGRADE and self.releases is None:
            return f"{self.name}: no upgrade in place of its controllers is built"
        if capability == UPGRADE and target.own_processes and not self.releases.sim:  # type: ignore[union-attr]
            return f"{self.name}: {self.releases.why_not_on_sim}"  # type: ignore[union-attr]
        if capability == COMBINED and not self.placed_by:
            return f"{self.name}: one component queues, admits and places its jobs (the case is for a pair)"
        if capability == ELASTIC_WORKERS and type(self).elastic is Capabilities.elastic:
            return (f"{self.name}: resizing its running jobs is not built (the case resizes a Ray worker group, "
                    "as the Ray autoscaler asks)")
        if capability == RANKED_FAIR_SHARE and type(self).usage_from_zero is Capabilities.usage_from_zero:
            return f"{self.name}: its fair share does not rank tenants by recorded usage"
        if capability == CONTROLLER_RESTART and (self.controllers is None or (
                not target.own_processes and not self.controllers.deployments)):
            why = self.controllers.why_not_elsewhere if self.controllers else "no controller known to restart"
            return f"{self.name}: {why}"
        return None

    def job_system(self, target: Target, profile: Profile, run_id: str, test_id: str,
                   apply_model: bool = True) -> JobSystem:
        """Its jobs as Kubernetes objects, submitted as the tenant where the profile says so."""
        submitter = target.seam.as_tenant if profile.submit_as == "tenant" else None
        return Workloads(target.api, self, run_id, test_id, profile.timeouts.delete, submitter,
                         simulated=target.features.simulated_gpus, workload_spec=profile.workloads,
                         gpu_resource=profile.gpu.resource)

    @property
    def queue_system(self) -> str:
        return self.queued_by or self.name

    pod_queue_key: tuple[str, str] | None = None  # where serving_pod names the queue: ("labels"|"annotations", key)

    def queue_named_on(self, pod: dict[str, Any]) -> str:
        if self.pod_queue_key is None:
            return ""
        where, key = self.pod_queue_key
        return str(((pod.get("metadata") or {}).get(where) or {}).get(key, ""))

    def charged_queue(self, job: GangJob) -> str:
        """The tenant's queue, or its queue of the job's GPU model (model_queue: Volcano's, KAI's)."""
        queue = job.tenant.queues.get(self.queue_system, "")
        return model_queue_name(queue, job.gpu_model) if queue and job.gpu_model else queue

    @property
    def sim_schedulers(self) -> tuple[str, ...]:
        """Its queue's, its own and its placing scheduler's; none for kube-scheduler (every sim runs it)."""
        own = () if self.name == "default" else tuple(self.name.split("-"))
        placing = (self.placed_by,) if self.placed_by and self.placed_by != "kube-scheduler" else ()
        return tuple(dict.fromkeys([*filter(None, (self.queued_by,)), *own, *placing]))

    def usage_from_zero(self, profile: Profile) -> float:
        raise HarnessError(f"{self.name}: its fair share does not rank tenants by recorded usage")

    def preemption_counter(self) -> PreemptionCounter | None:
        return self.preemption

    def not_yet_running(self, api: client.ApiClient, namespace: str, jobs: list[str]) -> list[str]:
        return []  # the pods' binding is the record

    def taken_in(self, api: client.ApiClient, namespace: str, job: str) -> bool:
        return True

    def wait_histogram(self) -> WaitHistogram | None:
        return self.wait

    def owned_kind(self) -> OwnedKind | None:
        return self.owned

    def serving_pod(self, tenant: Tenant) -> dict[str, Any]:
        return {}

    def serving_manifests(self, service: ModelService, with_service: bool = True) -> list[dict[str, Any]]:
        deployment = service.deployment(self.serving_pod(service.tenant))
        return [deployment, service.service()] if with_service else [deployment]

    def serving_route(self, service: ModelService) -> Route:
        return Route(service.app)

    def elastic(self, job: GangJob, max_workers: int) -> ElasticJob | None:
        return None

    def manifests(self, job: GangJob) -> list[dict[str, Any]]:
        raise NotImplementedError(f"{self.name}: no manifests")

    def tracked_kind(self) -> tuple[str, str]:
        raise NotImplementedError(f"{self.name}: no tracked kind")

    def status(self, obj: dict[str, Any]) -> JobStatus:
        raise NotImplementedError(f"{self.name}: no status")

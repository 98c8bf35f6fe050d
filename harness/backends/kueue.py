"""Kueue: a batch Job in the tenant's LocalQueue; its Workload says queued, admitted, evicted, finished."""

from __future__ import annotations

from typing import Any

from kubernetes.utils import parse_quantity

from harness.backends.base import (GPU_SHARING, Capabilities, Controllers, Monitoring, PreemptionCounter, QueueUsage,
                                   Releases,
                                   WaitHistogram)
from harness.jobs.model import (ADMITTED, FAILED, PREEMPTED, QUEUED, RUNNING, SUCCEEDED, GangJob, JobStatus, OwnedKind,
                                tenant_queue)
from harness.criteria.governance.monitoring_coverage import Series
from harness.core.objects import condition, condition_time, condition_true, created_at, parse_time
from harness.backends.batch import batch_job
from harness.core.errors import ConfigError
from harness.backends.detect import missing_crd_reason, missing_controller_reason
from harness.config.profile import Tenant
from harness.targets.target import Target

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# Topology-aware scheduling: the pod template's annotation names the level its pods must (or should) share; the
# ClusterQueue admits it only on a flavor with a Topology: gpupoc setup's queue of that flavor alone, TOPOLOGY_QUEUE in
# each tenant's namespace (manifests/setup/kueue.yaml.j2)
REQUIRED_TOPOLOGY, PREFERRED_TOPOLOGY = (f"kueue.x-k8s.io/podset-{kind}-topology" for kind in ("required", "preferred"))
TOPOLOGY_QUEUE = "gpupoc-topology"
# A quota per GPU model: a ClusterQueue per tenant with a ResourceFlavor per model (its nodes by the discovery's model
# label) and each model's quota; its LocalQueue in each tenant's namespace (manifests/setup/kueue.yaml.j2)
MODELS_QUEUE = "gpupoc-models"


def models_cluster_queue(queue: str) -> str:
    """Pure: the ClusterQueue of a tenant's quota per GPU model, beside its own ClusterQueue `queue`."""
    return f"{queue}-models"



def local_and_cluster_queue(job: GangJob) -> tuple[str, str]:
    """The LocalQueue a job names and the ClusterQueue behind it (manifests/setup/kueue.yaml.j2: the topology's, the
    tenant's of GPU models, or the tenant's own, whose LocalQueue and ClusterQueue share the name)."""
    if job.placement:
        return TOPOLOGY_QUEUE, TOPOLOGY_QUEUE
    queue = tenant_queue(job, "kueue")
    return (MODELS_QUEUE, models_cluster_queue(queue)) if job.gpu_model else (queue, queue)


API_VERSION = "kueue.x-k8s.io/v1beta2"


def workload_status(obj: dict[str, Any]) -> JobStatus:
    """Pure: a Kueue Workload's conditions as a job state, with the server's transition times."""
    submitted = created_at(obj)
    admitted_at = condition_time(obj, "QuotaReserved") or condition_time(obj, "Admitted")
    finished = condition(obj, "Finished")
    if finished and finished.get("status") == "True":
        state = SUCCEEDED if finished.get("reason") == "Succeeded" else FAILED
        return JobStatus(state, finished.get("message", ""), submitted, admitted_at,
                         parse_time(finished.get("lastTransitionTime")))
    for kind in ("Preempted", "Evicted"):
        evicted = condition(obj, kind)
        if evicted and evicted.get("status") == "True" and not condition_true(obj, "Admitted"):
            return JobStatus(PREEMPTED, f"{evicted.get('reason', '')}: {evicted.get('message', '')}", submitted,
                             admitted_at)
    if condition_true(obj, "Admitted"):
        state = RUNNING if condition_true(obj, "PodsReady") else ADMITTED
        return JobStatus(state, "", submitted, admitted_at)
    reserved = condition(obj, "QuotaReserved") or {}
    return JobStatus(QUEUED, reserved.get("message", ""), submitted)


def cluster_queue_gpus(queue: dict[str, Any], resource: str) -> float:
    """GPUs the ClusterQueue's admitted workloads use (status.flavorsUsage, every flavor)."""
    return sum(float(r.get("total", 0) or 0) for f in (queue.get("status") or {}).get("flavorsUsage") or []
               for r in f.get("resources") or [] if r.get("name") == resource)


def owner_name(obj: dict[str, Any]) -> str | None:
    owners = (obj.get("metadata") or {}).get("ownerReferences") or []
    return owners[0]["name"] if owners else None


PREEMPTED_WORKLOADS = PreemptionCounter("sum(kueue_preempted_workloads_total)", "workloads")
# Kueue labels each Workload with the UID of the job it queues
def workload_reservation(obj: dict[str, Any], resource: str) -> tuple[str, float]:
    """Pure: the ClusterQueue a Workload's admission charged and the GPUs of its quota (each pod set's resource
    usage; not admitted, or an eviction cleared it: what Kueue says it requests, status.resourceRequests)."""
    status = obj.get("status") or {}
    admission = status.get("admission") or {}
    usage = [a.get("resourceUsage") or {} for a in admission.get("podSetAssignments") or []]
    if not any(resource in u for u in usage):
        usage = [r.get("resources") or {} for r in status.get("resourceRequests") or []]
    return str(admission.get("clusterQueue", "")), sum(float(parse_quantity(u.get(resource, 0) or 0)) for u in usage)


WORKLOAD_KIND = OwnedKind(API_VERSION, "Workload", workload_status, "kueue.x-k8s.io/job-uid", workload_reservation)


MONITORING = Monitoring((
    Series("queue wait", "kueue_admission_wait_time_seconds_count", event=True),
    Series("pending per queue", "kueue_pending_workloads"),
    Series("admitted", "kueue_admitted_workloads_total", event=True),
    Series("preempted", "kueue_preempted_workloads_total", event=True),
    Series("quota per queue", "kueue_cluster_queue_nominal_quota"),
    Series("usage per queue", "kueue_cluster_queue_resource_usage"),
    Series("requested GPUs waiting per queue", "kueue_cluster_queue_resource_pending"),
    Series("jobs finished (success, failure)", "kueue_finished_workloads_total", event=True)),
    'sum(kueue_pending_workloads{{cluster_queue="{queue}"}})')


class KueueBackend(Capabilities):
    name = "kueue"
    placed_by = "kube-scheduler"  # Kueue admits; the cluster's scheduler places (the combined case's reference)
    multicluster = "MultiKueue"  # a manager's ClusterQueue dispatches to workers' (operations.multicluster)
    preferred_topology = "kueue.x-k8s.io/podset-preferred-topology"
    lacking = {GPU_SHARING: "Kueue admits whole resources by quota and leaves placement to kube-scheduler: no fraction "
                            "of a device is assigned"}
    preemption = PREEMPTED_WORKLOADS
    wait = WaitHistogram("kueue_admission_wait_time_seconds", 1.0, "cluster_queue")
    owned = WORKLOAD_KIND
    monitoring = MONITORING
    controllers = Controllers(("kueue",), ("kueue-controller-manager",), needs=("kube-scheduler",))
    releases = Releases(("kueue",), ("kueue-controller-manager",))
    pod_queue_key = ("labels", QUEUE_LABEL)  # its LocalQueue, named as the tenant's ClusterQueue is
    queue_usage = QueueUsage(API_VERSION, "ClusterQueue", cluster_queue_gpus,
                             'sum(kueue_cluster_queue_resource_usage{{cluster_queue="{queue}",resource="{resource}"}})')

    def unavailable_reason(self, target: Target) -> str | None:
        return (missing_crd_reason(target.api, "kueue.x-k8s.io", "Workload", self.name)
                or missing_controller_reason(target, self.name, ("kueue",), ("kueue-controller-manager",)))

    def manifests(self, job: GangJob) -> list[dict[str, Any]]:
        batch = batch_job(job, {QUEUE_LABEL: local_and_cluster_queue(job)[0]})
        if job.placement:
            batch["spec"]["template"]["metadata"]["annotations"][
                REQUIRED_TOPOLOGY if job.placement.required else PREFERRED_TOPOLOGY] = job.placement.level
        return [batch]

    def charged_queue(self, job: GangJob) -> str:
        return local_and_cluster_queue(job)[1]

    def serving_pod(self, tenant: Tenant) -> dict[str, Any]:
        """Kueue's Deployment integration: the queue label on the Deployment (and its pods, which Kueue gates until
        each is admitted as a Workload of its own), in a namespace its managedJobsNamespaceSelector covers."""
        queue = tenant.queues.get("kueue")
        if not queue:
            raise ConfigError(f"tenant {tenant.name} has no kueue queue in the profile (tenants[].queues.kueue)")
        return {"labels": {QUEUE_LABEL: queue}}

    def tracked_kind(self) -> tuple[str, str]:
        return API_VERSION, "Workload"

    def status(self, obj: dict[str, Any]) -> JobStatus:
        return workload_status(obj)

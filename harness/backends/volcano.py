"""Volcano: a Volcano Job with minAvailable = pods in the tenant's Volcano Queue."""

from __future__ import annotations

from typing import Any

from harness.backends.base import (GPU_SHARING, Capabilities, Controllers, Monitoring, PreemptionCounter, QueueUsage,
                                   Releases,
                                   WaitHistogram, allocated_gpus)
from harness.jobs.model import FAILED, QUEUED, RUNNING, SUCCEEDED, GangJob, JobStatus, model_queue
from harness.criteria.governance.monitoring_coverage import Series
from harness.core.objects import created_at, parse_time
from harness.backends.detect import missing_controller_reason, missing_crd_reason
from harness.config.profile import Tenant
from harness.targets.target import Target

API_VERSION = "batch.volcano.sh/v1alpha1"
SCHEDULER_NAME = "volcano"
POD_QUEUE = "scheduling.volcano.sh/queue-name"  # a pod's queue, for the PodGroup Volcano makes of a bare pod
RUNNING_PHASES = ("Running", "Restarting", "Completing")
FAILED_PHASES = ("Failed", "Aborted", "Terminated")


def volcano_status(obj: dict[str, Any]) -> JobStatus:
    """Pure: a Volcano Job's status.state as a job state."""
    state = (obj.get("status") or {}).get("state") or {}
    phase = state.get("phase", "Pending")
    since = parse_time(state.get("lastTransitionTime"))
    submitted = created_at(obj)
    if phase == "Completed":
        return JobStatus(SUCCEEDED, "", submitted, None, since)
    if phase in FAILED_PHASES:
        return JobStatus(FAILED, f"{phase}: {state.get('reason', '')} {state.get('message', '')}".strip(),
                         submitted, None, since)
    if phase in RUNNING_PHASES:
        return JobStatus(RUNNING, phase if phase != "Running" else "", submitted, since)
    return JobStatus(QUEUED, state.get("message", "") or phase, submitted)


MONITORING = Monitoring((
    Series("queue wait", "volcano_e2e_job_scheduling_latency_milliseconds_count", event=True),
    Series("pending per queue", "volcano_queue_pod_group_pending_count"),
    Series("admitted per queue", "volcano_queue_pod_group_running_count"),
    Series("preempted", "volcano_pod_preemption_victims", event=True),
    Series("quota per queue", "volcano_queue_deserved_scalar_resources"),
    Series("usage per queue", "volcano_queue_allocated_scalar_resources"),
    Series("requested GPUs per queue", "volcano_queue_request_scalar_resources"),
    Series("jobs finished per queue", "volcano_queue_pod_group_completed_count")),
    # a job held for capacity sits in the Pending or the Inqueue phase
    'sum(volcano_queue_pod_group_pending_count{{queue_name="{queue}"}}) '
    '+ sum(volcano_queue_pod_group_inqueue_count{{queue_name="{queue}"}})')


class VolcanoBackend(Capabilities):
    name = "volcano"
    # its `mode: soft` places a gang task by task, each near the ones placed before: the first task's node decides,
    # so the leaves used vary from run to run (make poc run 18: 2 leaves where 1 held the gang; dev runs: 1, 1)
    preferred_topology_unchecked = ("v1.14's networkTopology soft mode places a gang task by task, near the tasks "
                                    "placed before: the domains it uses depend on the first task's node and vary "
                                    "from run to run (2 leaves where 1 held the gang, 1 of 3 runs), so one run cannot "
                                    "decide it")
    lacking = {GPU_SHARING: "Volcano shares GPUs through its vGPU device plugin (volcano.sh/vgpu-number, vgpu-memory); "
                            "the case drives fraction requests a scheduler assigns to devices (KAI's), not that plugin"}
    preemption = PreemptionCounter("volcano_pod_preemption_victims", "pods", gauge=True)  # a Gauge in Volcano
    # Volcano's histogram has no queue label: it covers every queue at once
    wait = WaitHistogram("volcano_e2e_job_scheduling_latency_milliseconds", 0.001, "")
    controllers = Controllers(("volcano-scheduler",), ("volcano-scheduler",), needs=("volcano-controller-manager",))
    releases = Releases((), ("volcano-scheduler", "volcano-controllers"),
                        "one release of Volcano builds here (v1.14.1: the module proxy serves volcano.sh/apis up to "
                        "v1.14.0, and v1.15 does not compile against it): no next release to upgrade to")
    monitoring = MONITORING
    # scalar resources in thousandths (milli-GPUs), like the scheduler's own Resource type
    pod_queue_key = ("annotations", POD_QUEUE)
    queue_usage = QueueUsage("scheduling.volcano.sh/v1beta1", "Queue", allocated_gpus,
                             'sum(volcano_queue_allocated_scalar_resources{{queue_name="{queue}",'
                             'resource="{resource}"}}) / 1000')

    def serving_pod(self, tenant: Tenant) -> dict[str, Any]:
        """A Deployment's pods go to Volcano by scheduler name; its pod-group controller makes each a PodGroup in
        the tenant's queue (the queue-name annotation)."""
        return {"schedulerName": SCHEDULER_NAME, "annotations": {POD_QUEUE: tenant.queues.get("volcano", "default")}}

    def unavailable_reason(self, target: Target) -> str | None:
        return (missing_crd_reason(target.api, "batch.volcano.sh", "Job", self.name)
                or missing_controller_reason(target, self.name, ("volcano-scheduler", "volcano-controller-manager"),
                                             ("volcano-scheduler",)))

    def manifests(self, job: GangJob) -> list[dict[str, Any]]:
        queue = model_queue(job, "volcano")  # a job of one GPU model: the tenant's queue of that model
        on_failure = "RestartJob" if job.restart_on_failure else "AbortJob"
        spec: dict[str, Any] = {
            "minAvailable": job.pods, "schedulerName": SCHEDULER_NAME, "queue": queue, "maxRetry": job.max_retries,
            "policies": [{"event": "PodFailed", "action": on_failure}, {"event": "PodEvicted", "action": on_failure}],
            "tasks": [{"name": "worker", "replicas": job.pods, "template": job.pod_template()}]}
        if job.priority_class:
            spec["priorityClassName"] = job.priority_class
        if job.placement:  # the network-topology-aware plugin, over the HyperNodes gpupoc setup made
            spec["networkTopology"] = {"mode": "hard" if job.placement.required else "soft",
                                       "highestTierAllowed": job.placement.tier}
        return [{"apiVersion": API_VERSION, "kind": "Job",
                 "metadata": {"name": job.name, "namespace": job.tenant.namespace}, "spec": spec}]

    def tracked_kind(self) -> tuple[str, str]:
        return API_VERSION, "Job"

    def status(self, obj: dict[str, Any]) -> JobStatus:
        return volcano_status(obj)

"""KAI-Scheduler (the open core of Run:ai): a PodGroup and its bare pods, in the tenant's KAI queue.

KAI gangs what its pod-grouper groups (PyTorchJob, RayCluster, ...) or what names a PodGroup
itself; a batch Job becomes one group per pod (v0.12.0, the pinned release; from v0.14.1 a Job is one group and
its `kai.scheduler/batch-min-member` annotation sets minMember: CHANGELOG.md, PRs #1381 and #1444), so the gang
here is explicit: a PodGroup with minMember = pods, and pods that carry its name. A PodGroup has no phase: the job's
state is the PodGroup's (queued, or admitted when KAI started it) folded with its pods' phases.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from harness.backends.base import (Controllers, Releases, RETRY_POLICY, Capabilities, Monitoring, PreemptionCounter, QueueUsage,
                                   allocated_gpus)
from harness.jobs.model import (ADMITTED, FAILED, QUEUED, RUNNING, SUCCEEDED, GangJob, GpuShare, JobStatus, disruption,
                                model_queue)
from harness.criteria.governance.monitoring_coverage import Series
from harness.criteria.governance.sharing_granularity import Share
from harness.core.objects import created_at, parse_time
from harness.backends.detect import missing_controller_reason, missing_crd_reason
from harness.config.profile import Tenant
from harness.targets.target import Target

API_VERSION = "scheduling.run.ai/v2alpha2"
QUEUE_LABEL = "kai.scheduler/queue"
POD_GROUP_ANNOTATION = "pod-group-name"
TOPOLOGY_NAME = "gpupoc"  # the Topology (kai.scheduler/v1alpha1) of the profile's levels
FRACTION_ANNOTATION, MEMORY_ANNOTATION = "gpu-fraction", "gpu-memory"  # a share of one GPU (MiB for memory)
GPU_GROUP_LABEL = "runai-gpu-group"  # the scheduler's group of fractional pods on one device
RESERVATION_NAMESPACE = "kai-resource-reservation"  # the binder's reservation pods (its flag's default)
DEVICE_ANNOTATION = "run.ai/reserve_for_gpu_index"  # the GPU UUID the reservation pod's device side reported
BIND_REQUEST = ("scheduling.run.ai/v1alpha2", "BindRequest")  # the scheduler's placement, named as the pod
STARTED_ANNOTATION = "kai.scheduler/last-start-timestamp"
SCHEDULER_NAME = "kai-scheduler"
# Bare pods have no controller to restart them: a failed member is the job's end.
NO_RETRIES = ("KAI-Scheduler schedules pods; retrying a failed job belongs to a workload controller, "
              "and bare pods have none")


def podgroup_status(obj: dict[str, Any]) -> JobStatus:
    """Pure: queued (with KAI's scheduling condition) or admitted (KAI's last start time) from a PodGroup."""
    submitted = created_at(obj)
    started = parse_time(((obj.get("metadata") or {}).get("annotations") or {}).get(STARTED_ANNOTATION))
    if started is not None:
        return JobStatus(ADMITTED, "", submitted, started)
    conditions = (obj.get("status") or {}).get("schedulingConditions") or []
    reason = next((str(c.get("message", "")) for c in reversed(conditions) if c.get("status") == "True"), "")
    return JobStatus(QUEUED, reason.strip(), submitted)


def job_status(group: JobStatus, pods: Iterable[dict[str, Any]], members: int) -> JobStatus:
    """Pure: the PodGroup's state folded with its pods' phases (any failed or evicted -> failed; all succeeded ->
    succeeded). KAI evicts (reclaim, preemption) by deleting the pod: a member deleted before it finished is lost."""
    pods = list(pods)
    phases = {p["metadata"]["name"]: (p.get("status") or {}).get("phase", "Pending") for p in pods}
    bound = [p for p in pods if (p.get("spec") or {}).get("nodeName")]
    failed = sorted(name for name, phase in phases.items() if phase == "Failed")
    if failed:
        return JobStatus(FAILED, f"pod {failed[0]} failed ({NO_RETRIES})", group.submitted_at, group.admitted_at)
    evicted = sorted((p for p in pods if _evicted(p)), key=lambda p: p["metadata"]["name"])
    if evicted:
        return JobStatus(FAILED, f"pod {evicted[0]['metadata']['name']} evicted: {_disruption(evicted[0])} "
                         f"({NO_RETRIES})", group.submitted_at, group.admitted_at)
    succeeded = sum(1 for phase in phases.values() if phase == "Succeeded")
    if members and succeeded >= members:
        return JobStatus(SUCCEEDED, "", group.submitted_at, group.admitted_at, _last_finish(pods))
    if bound:
        return JobStatus(RUNNING, "", group.submitted_at, group.admitted_at)
    return group


def share_annotations(share: GpuShare | None) -> dict[str, str]:
    """KAI's request for a share of one GPU; its admission webhook adds what its binder needs."""
    if share is None:
        return {}
    if share.fraction is not None:
        return {FRACTION_ANNOTATION: f"{share.fraction:g}"}
    return {MEMORY_ANNOTATION: str(share.memory_mib)}


def gpu_shares(pods: Iterable[dict[str, Any]], bind_requests: dict[str, dict[str, Any]],
               reservations: Iterable[dict[str, Any]], device_memory_mib: int) -> list[Share]:
    """Pure: each fractional pod as KAI placed it. Asked: its annotation (memory over the device's); given: its
    BindRequest's GPU portion x count, once bound; its device group (label), and the UUID that group's
    reservation pod reported."""
    devices = {(p["metadata"].get("labels") or {}).get(GPU_GROUP_LABEL, ""):
               (p["metadata"].get("annotations") or {}).get(DEVICE_ANNOTATION) or None for p in reservations}
    shares = []
    for pod in pods:
        meta = pod["metadata"]
        annotations = meta.get("annotations") or {}
        if FRACTION_ANNOTATION in annotations:
            asked = float(annotations[FRACTION_ANNOTATION])
        elif MEMORY_ANNOTATION in annotations:
            asked = float(annotations[MEMORY_ANNOTATION]) / device_memory_mib
        else:
            continue
        request = bind_requests.get(meta["name"]) or {}
        given = (request.get("spec") or {}).get("receivedGPU") or {}
        bound = (request.get("status") or {}).get("phase") == "Succeeded" and "portion" in given
        group = (meta.get("labels") or {}).get(GPU_GROUP_LABEL, "")
        shares.append(Share(meta["name"], meta["namespace"], asked,
                            float(given["portion"]) * int(given.get("count", 1)) if bound else None, group,
                            devices.get(group) if group else None, (pod.get("spec") or {}).get("nodeName", "")))
    return shares


def _evicted(pod: dict[str, Any]) -> bool:
    """Being deleted before it finished (Workloads leaves out pods of jobs the test deleted itself)."""
    phase = (pod.get("status") or {}).get("phase", "Pending")
    return bool((pod.get("metadata") or {}).get("deletionTimestamp")) and phase not in ("Succeeded", "Failed")


def _disruption(pod: dict[str, Any]) -> str:
    """KAI's eviction message (the DisruptionTarget condition it sets with --update-pod-eviction-condition)."""
    return disruption(pod) or "deleted before it finished"


def _last_finish(pods: Iterable[dict[str, Any]]) -> datetime | None:
    times = [parse_time(((c.get("state") or {}).get("terminated") or {}).get("finishedAt"))
             for p in pods for c in (p.get("status") or {}).get("containerStatuses") or []]
    return max((t for t in times if t is not None), default=None)


MONITORING = Monitoring((
    Series("queue wait", ""),                   # KAI exports scheduling latency, not submission-to-admission
    Series("pending per queue", ""),
    Series("admitted", "kai_podgroups_scheduled_by_action", event=True),
    Series("preempted", 'kai_podgroups_scheduled_by_action{action="preempt"}', event=True),
    Series("quota per queue", "kai_queue_deserved_gpus"),
    Series("usage per queue", "kai_queue_allocated_gpus"),
    Series("fair share per queue", "kai_queue_fair_share_gpu")))


class KaiBackend(Capabilities):
    name = "kai"
    lacking = {RETRY_POLICY: NO_RETRIES}
    preferred_topology = "topologyConstraint.preferredTopologyLevel"
    # KAI counts no victims: it counts the gangs its preempt action placed; the API side counts the
    # high-priority jobs that got their GPUs by evicting someone.
    preemption = PreemptionCounter('sum(kai_podgroups_scheduled_by_action{action="preempt"})', "preemptors")
    monitoring = MONITORING
    pod_queue_key = ("labels", QUEUE_LABEL)
    queue_usage = QueueUsage("scheduling.run.ai/v2", "Queue", allocated_gpus,
                             'sum(kai_queue_allocated_gpus{{queue_name="{queue}"}})')
    controllers = Controllers(("kai-scheduler",), ("kai-scheduler",),
                              needs=("kai-binder", "kai-podgrouper", "kai-queuecontroller", "kai-podgroupcontroller"))
    releases = Releases((), ("kai-scheduler", "binder", "podgrouper", "queuecontroller", "podgroupcontroller"),
                        "one release of KAI-Scheduler is served here (github.com/NVIDIA/KAI-scheduler v0.12.0): no "
                        "next release to upgrade to")


    def serving_pod(self, tenant: Tenant) -> dict[str, Any]:
        """KAI's pod-grouper groups a Deployment's pods by their owner; the queue label puts them in the tenant's."""
        return {"schedulerName": SCHEDULER_NAME, "labels": {QUEUE_LABEL: tenant.queues.get("kai", "default-queue")}}

    def unavailable_reason(self, target: Target) -> str | None:
        return (missing_crd_reason(target.api, "scheduling.run.ai", "PodGroup", self.name)
                or missing_controller_reason(target, self.name, ("kai-scheduler", "kai-binder"),
                                             ("kai-scheduler", "binder")))

    def manifests(self, job: GangJob) -> list[dict[str, Any]]:
        queue = model_queue(job, "kai")  # a job of one GPU model: the tenant's queue of that model
        spec: dict[str, Any] = {"minMember": job.pods, "queue": queue}
        if job.priority_class:
            spec["priorityClassName"] = job.priority_class
        if job.placement:  # the topology plugin, over the Topology gpupoc setup made (manifests/setup/kai.yaml.j2)
            spec["topologyConstraint"] = {"topology": TOPOLOGY_NAME, (
                "requiredTopologyLevel" if job.placement.required else "preferredTopologyLevel"): job.placement.level}
        group = {"apiVersion": API_VERSION, "kind": "PodGroup",
                 "metadata": {"name": job.name, "namespace": job.tenant.namespace, "labels": {QUEUE_LABEL: queue}},
                 "spec": spec}
        template = job.pod_template()
        pods = []
        for index in range(job.pods):
            metadata = copy.deepcopy(template["metadata"])
            metadata.update(name=f"{job.name}-{index}", namespace=job.tenant.namespace)
            metadata["labels"][QUEUE_LABEL] = queue
            metadata["annotations"][POD_GROUP_ANNOTATION] = job.name
            metadata["annotations"].update(share_annotations(job.gpu_share))
            pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
                         "spec": {**copy.deepcopy(template["spec"]), "schedulerName": SCHEDULER_NAME}})
        return [group, *pods]

    def tracked_kind(self) -> tuple[str, str]:
        return API_VERSION, "PodGroup"

    def status(self, obj: dict[str, Any]) -> JobStatus:
        return podgroup_status(obj)

    def status_with_pods(self, obj: dict[str, Any], pods: list[dict[str, Any]]) -> JobStatus:
        """The job's state: its PodGroup's folded with its pods' (Workloads calls this when a backend has it)."""
        return job_status(podgroup_status(obj), pods, int((obj.get("spec") or {}).get("minMember") or 0))

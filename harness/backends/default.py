"""The baseline: a plain batch Job on kube-scheduler and the device plugin. No gang, no queue."""

from __future__ import annotations

from typing import Any

from harness.backends.base import GANG, GPU_SHARING, MODEL_QUOTA, UPGRADE, Capabilities, Controllers, Monitoring, PreemptionCounter
from harness.jobs.model import GangJob, JobStatus
from harness.criteria.governance.monitoring_coverage import Series
from harness.backends.batch import batch_job, batch_status
from harness.targets.target import Target


MONITORING = Monitoring((
    Series("queue wait", "scheduler_pod_scheduling_sli_duration_seconds_count", event=True),
    Series("pending", "scheduler_pending_pods"),
    Series("admitted", 'scheduler_schedule_attempts_total{result="scheduled"}', event=True),
    Series("preempted", "scheduler_preemption_victims_count", event=True),
    Series("jobs finished (success, failure)", "kube_job_status_succeeded")))


class DefaultBackend(Capabilities):
    name = "default"
    lacking = {GANG: "kube-scheduler binds pod by pod; it has no gang admission",
               MODEL_QUOTA: "kube-scheduler has no queues: a quota per GPU model is a queue's (a ResourceQuota counts "
                            "the resource, not the model)",
               UPGRADE: "kube-scheduler is upgraded with the cluster's control plane, not as a scheduler of its own",
               GPU_SHARING: "kube-scheduler counts GPUs as whole extended resources: time-slicing and MIG make more of "
                            "them, and the device plugin, not the scheduler, picks the device a pod shares"}
    preemption = PreemptionCounter("sum(scheduler_preemption_victims_sum)", "pods")
    monitoring = MONITORING
    controllers = Controllers(("kube-scheduler",), (), "kube-scheduler runs as a static pod on most clusters: "
                              "it cannot be restarted through the API")

    def unavailable_reason(self, target: Target) -> str | None:
        return None  # kube-scheduler is part of every cluster

    def manifests(self, job: GangJob) -> list[dict[str, Any]]:
        return [batch_job(job)]

    def tracked_kind(self) -> tuple[str, str]:
        return "batch/v1", "Job"

    def status(self, obj: dict[str, Any]) -> JobStatus:
        return batch_status(obj)

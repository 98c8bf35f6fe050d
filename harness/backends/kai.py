"""KAI-Scheduler (the open core of Run:ai): pods for kai-scheduler in the tenant's KAI queue.

Not on the sim yet; on a cluster where it is installed, jobs are batch Jobs whose pods carry the
queue label and name kai-scheduler; the pod-grouper makes them a gang.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from harness.backends.base import GangJob, JobStatus, tenant_queue
from harness.backends.batch import batch_job, batch_status
from harness.backends.detect import missing_controller_reason, missing_crd_reason

QUEUE_LABEL = "kai.scheduler/queue"
SCHEDULER_NAME = "kai-scheduler"


class KaiBackend:
    name = "kai"

    def unavailable_reason(self, api: client.ApiClient) -> str | None:
        return (missing_crd_reason(api, "scheduling.run.ai", "Queue", self.name)
                or missing_controller_reason(api, self.name, ("kai-scheduler",), ("kai-scheduler",)))

    def manifests(self, job: GangJob) -> list[dict[str, Any]]:
        queue = tenant_queue(job, "kai")
        manifest = batch_job(job, {QUEUE_LABEL: queue})
        pod = manifest["spec"]["template"]
        pod["metadata"]["labels"][QUEUE_LABEL] = queue
        pod["spec"]["schedulerName"] = SCHEDULER_NAME
        return [manifest]

    def tracked_kind(self) -> tuple[str, str]:
        return "batch/v1", "Job"

    def status(self, obj: dict[str, Any]) -> JobStatus:
        return batch_status(obj)

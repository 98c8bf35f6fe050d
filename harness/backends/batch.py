"""Reading a batch/v1 Job: shared by the default and kueue backends."""

from __future__ import annotations

from typing import Any

from harness.jobs.model import FAILED, QUEUED, RUNNING, SUCCEEDED, GangJob, JobStatus
from harness.core.objects import condition, condition_time, created_at, parse_time


def batch_job(job: GangJob, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """All pods at once (parallelism = completions = pods); retries of failed pods up to max_retries."""
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": job.name, "namespace": job.tenant.namespace, "labels": dict(labels or {})},
            "spec": {"parallelism": job.pods, "completions": job.pods, "backoffLimit": job.max_retries,
                     "template": job.pod_template()}}


def batch_status(obj: dict[str, Any]) -> JobStatus:
    status = obj.get("status") or {}
    submitted = created_at(obj)
    started = parse_time(status.get("startTime"))
    if condition_time(obj, "Complete"):
        return JobStatus(SUCCEEDED, "", submitted, started, condition_time(obj, "Complete"))
    failed = condition(obj, "Failed")
    if failed and failed.get("status") == "True":
        return JobStatus(FAILED, f"{failed.get('reason', '')}: {failed.get('message', '')}".strip(": "),
                         submitted, started, parse_time(failed.get("lastTransitionTime")))
    if (status.get("ready") or 0) > 0:
        return JobStatus(RUNNING, "", submitted, started)
    if (obj.get("spec") or {}).get("suspend"):
        return JobStatus(QUEUED, "suspended", submitted)
    # pods exist but none is ready: without a queue in front, they wait for the scheduler
    return JobStatus(QUEUED, f"{status.get('active') or 0} pod(s) not ready", submitted)

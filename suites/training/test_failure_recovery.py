"""Batch training 4 — failure recovery.

A pod of a running multi-pod job fails; the job recovers by its policy (Volcano RestartJob,
batch Job backoffLimit) and completes (KAI's bare pods have no retry policy: skipped); the time
from the failure to all pods running again is measured; a job whose retries are exhausted is
reported as failed with its reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


from harness.backends import Backend
from harness.jobs.model import GangJob
from harness.backends.base import JOBS_COMPLETE, RETRY_POLICY
from harness.criteria.training.failure_recovery import CRITERION
from harness.core.errors import WaitTimeout
from harness.cluster.wait import WaitFailed
from harness.config.profile import Profile
from harness.record.evidence import Evidence
from harness.targets.target import Target
from harness.jobs.system import JobSystem
from suites.training.common import attach_timeline, belongs, failed_reason, require, state_is

PODS, RUN_S, RETRIES = 2, 15.0, 3


def running(objs: dict[str, dict[str, Any]], job: GangJob, not_uid: str = "") -> list[str]:
    """Names of the job's running pods (a pod recreated under the victim's name has another uid)."""
    return [n for n, p in objs.items() if belongs(p, job) and (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp") and p["metadata"].get("uid") != not_uid]


def job_running(workloads: JobSystem, job: GangJob, timeout_s: float) -> None:
    """The job itself running, not only its pods (a RayJob: its Ray job submitted to the head): a member failed
    before the job runs tests no retry policy."""
    workloads.jobs(job.tenant.namespace).wait_until(f"{job.name} running", state_is(workloads, job, "running"),
                                                    timeout_s)


def run_recovery(workloads: JobSystem, profile: Profile, ev: Evidence,
                 restart_on_failure: bool = True, retries: int = RETRIES) -> None:
    tenant = profile.tenants[0]
    job = workloads.gang("recover", tenant, PODS, 1, run_for_s=RUN_S, max_retries=retries,
                         restart_on_failure=restart_on_failure)
    started = time.time()
    workloads.submit(job)
    pods = workloads.members(tenant.namespace)
    objs = pods.wait_until(f"all {PODS} pods of {job.name} running", lambda o: len(running(o, job)) == PODS,
                           profile.timeouts.run, failed=lambda _: workloads.refused([job]))
    job_running(workloads, job, profile.timeouts.run)
    objs = pods.objects
    victim = objs[running(objs, job)[0]]
    ev.note(workloads.fail_member(victim))
    victim_uid = victim["metadata"]["uid"]
    pods.wait_until(f"pod {victim['metadata']['name']} gone from Running",
                    lambda o: not any(p["metadata"].get("uid") == victim_uid and p["status"].get("phase") == "Running"
                                      for p in o.values()), profile.timeouts.run)
    failed_at = time.time()
    ended = workloads.member_outcomes([p for p in [*pods.gone.values(), *pods.objects.values()]
                                       if p["metadata"].get("uid") == victim_uid])
    if ended:
        ev.tables["the failed member: its exit code and log, as its node reported them"] = ended
    recovered_s: float | None = None
    jobs = workloads.jobs(tenant.namespace)
    jobs.on_event(lambda _event, _job: pods.poke())  # a failed job ends the wait for its pods at once
    try:  # bounded by the operation's timeout, not the threshold: a slow recovery is measured, then compared
        pods.wait_until(f"{job.name}: {PODS} pods running again",
                        lambda o: len(running(o, job, not_uid=victim_uid)) == PODS, profile.timeouts.run,
                        failed=lambda _: failed_reason(workloads, job, jobs.objects))
        recovered_s = time.time() - failed_at
        jobs.wait_until(f"{job.name} completed", state_is(workloads, job, "succeeded"), profile.timeouts.complete,
                        failed=lambda o: failed_reason(workloads, job, o))
    except WaitTimeout as exc:
        ev.note(f"not recovered: {exc}")
    except WaitFailed as exc:  # the job failed instead of recovering (an API outage stays an ERROR)
        ev.note(f"job did not recover: {exc}")
    status = workloads.status_of(job, jobs.objects)
    ev.note(f"final state: {status.state if status else 'unknown'} {status.reason if status else ''}".strip())
    # a job that failed instead of recovering has no recovery time: "nothing measured" is the finding
    ev.expect("recover_within_s", None if recovered_s is None else round(recovered_s, 3))
    attach_timeline(ev, workloads.timeline, started)
    ev.verdict()


def test_failure_recovery(target: Target, backend: Backend, workloads: JobSystem,
                          queue_model: Profile, destructive: Callable[[str], None],
                          evidence: Callable[[str], Evidence]) -> None:
    require(target, backend, JOBS_COMPLETE, RETRY_POLICY)
    destructive("fail a pod of a running job")
    run_recovery(workloads, queue_model, evidence(CRITERION.id))


def test_exhausted_retries_are_reported_as_failed(target: Target, backend: Backend,
                                                  workloads: JobSystem, queue_model: Profile,
                                                  destructive: Callable[[str], None]) -> None:
    """With no retry left, the job ends failed and the harness reports it with the scheduler's reason."""
    require(target, backend, JOBS_COMPLETE)
    destructive("fail a pod of a running job")
    tenant = queue_model.tenants[0]
    job = workloads.gang("no-retry", tenant, PODS, 1, run_for_s=RUN_S * 4, max_retries=0,
                         restart_on_failure=False)
    workloads.submit(job)
    pods = workloads.members(tenant.namespace)
    pods.wait_until("pods running", lambda o: len(running(o, job)) == PODS, queue_model.timeouts.run)
    job_running(workloads, job, queue_model.timeouts.run)
    workloads.fail_member(pods.objects[running(pods.objects, job)[0]])
    jobs = workloads.jobs(tenant.namespace)
    final = jobs.wait_until(f"{job.name} failed", state_is(workloads, job, "failed"), queue_model.timeouts.complete)
    status = workloads.status_of(job, final)
    assert status is not None and status.state == "failed" and status.reason, status

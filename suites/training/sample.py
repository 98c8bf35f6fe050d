"""Shared steps of the workload sample's cases: submit it, kill it mid-run, read what it measured from its log,
and another tenant's antagonist beside it.

The sample (harness/sample/train.py) is a batch job of one pod running the profile's sample image in a real
container; what it measured is the JSON summary its container logs at the end (a server-side fact: the pod's log
through the API), and its GPU-hours are the API timelines' own, as governance's cost attribution counts them.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import pytest

from harness.backends import Backend
from harness.backends.base import JOBS_COMPLETE, SAMPLE
from harness.cluster.wait import WaitFailed, poll
from harness.config.profile import Profile, Tenant
from harness.config.workloads import NO_SAMPLE, SAMPLE_CONTAINER, TRAINER_IMAGE
from harness.core.errors import WaitTimeout
from harness.jobs.model import GangJob
from harness.jobs.system import JobSystem
from harness.record.evidence import Evidence
from harness.sample.train import parse_summary
from harness.targets.target import Target
from suites.training.common import belongs, failed_reason, require, state_is

HOSTNAME_LABEL = "kubernetes.io/hostname"
RETRIES = 3  # restarts of the sample's container before its Job is failed
ANTAGONIST = "antagonist"
_STEP = re.compile(r"step (\d+)/\d+")


@dataclass(frozen=True)
class SampleRun:
    job: GangJob
    node: str
    summary: dict[str, Any]
    gpu_hours: float
    killed_log: str = ""  # the log's last lines before the kill, where it was killed


def require_sample(target: Target, backend: Backend, profile: Profile) -> None:
    """SKIP where the profile names no sample image or the backend cannot run its container as given."""
    if not profile.workloads.sample.image:
        pytest.skip(NO_SAMPLE)
    require(target, backend, SAMPLE, JOBS_COMPLETE)


def sample_job(workloads: JobSystem, profile: Profile, base: str, tenant: Tenant, node: str = "") -> GangJob:
    sample = profile.workloads.sample
    return workloads.gang(base, tenant, 1, sample.gpus, max_retries=RETRIES, container=SAMPLE_CONTAINER,
                          node_selector={HOSTNAME_LABEL: node} if node else {})


def run_sample(workloads: JobSystem, profile: Profile, job: GangJob, kill_at_step: int = 0) -> SampleRun:
    """Submit the sample and wait until it completes (after `kill_at_step`: its container asked to exit 137 once
    its log shows that step, and restarted in place by its pod); its summary, node and GPU-hours."""
    namespace = job.tenant.namespace
    workloads.submit(job)
    pods = workloads.members(namespace)
    objs = pods.wait_until(f"{job.name}: its pod running", lambda o: bool(_running(o, job)), profile.timeouts.run,
                           failed=lambda _: workloads.refused([job]))
    pod = objs[_running(objs, job)[0]]
    killed_log = ""
    if kill_at_step:
        log = poll(lambda: workloads.member_log(pod, SAMPLE_CONTAINER), lambda text: _last_step(text) >= kill_at_step,
                   profile.timeouts.run, poll_s=0.2)
        if _last_step(log) < kill_at_step:
            raise WaitTimeout(f"{job.name}: step {kill_at_step} not logged after {profile.timeouts.run:.0f}s; "
                              f"its log ends: {log.strip().splitlines()[-1:] or '(empty)'}")
        workloads.fail_member(pod)
        uid = pod["metadata"]["uid"]
        pods.wait_until(f"{job.name}: its container restarted after the kill",
                        lambda o: any(p["metadata"]["uid"] == uid and _restarts(p) >= 1 for p in o.values()),
                        profile.timeouts.run, failed=lambda o: _ended_before_kill(o, uid))
        killed_log = workloads.member_log(pod, SAMPLE_CONTAINER, previous=True)
    jobs = workloads.jobs(namespace)
    jobs.on_event(lambda _event, _job: pods.poke())
    jobs.wait_until(f"{job.name} completed", state_is(workloads, job, "succeeded"), profile.timeouts.complete,
                    failed=lambda o: failed_reason(workloads, job, o))
    final = next((p for p in pods.objects.values() if p["metadata"]["uid"] == pod["metadata"]["uid"]), pod)
    log = workloads.member_log(final, SAMPLE_CONTAINER)
    summary = parse_summary(log)
    if summary is None:
        raise WaitFailed(f"{job.name}: completed without its summary line; its log ends: "
                         f"{log.strip().splitlines()[-3:] or '(empty)'}")
    held = [h for h in workloads.gpus_held(profile.gpu.resource, time.time()) if h.pod == pod["metadata"]["name"]]
    return SampleRun(job, str(pod["spec"].get("nodeName") or ""), summary,
                     sum(h.gpu_seconds for h in held) / 3600.0, killed_log)


def antagonist_pod(profile: Profile, node: str) -> dict[str, Any]:
    """Another tenant's noisy pod on `node`, no GPU: the profile's image and command, asking for less CPU than it
    uses (Burstable)."""
    sample = profile.workloads.sample
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": ANTAGONIST}, "spec": {
        "restartPolicy": "Never", "nodeSelector": {HOSTNAME_LABEL: node}, "terminationGracePeriodSeconds": 1,
        "containers": [{"name": ANTAGONIST, "image": sample.antagonist_image or profile.workloads.image(TRAINER_IMAGE),
                        "command": sample.antagonist_command_for(),
                        "resources": {"requests": {"cpu": sample.antagonist_cpu, "memory": "64Mi"},
                                      "limits": {"cpu": sample.antagonist_cpu_limit, "memory": "128Mi"}}}]}}


def record_run(ev: Evidence, label: str, run: SampleRun) -> None:
    """The run's own figures as a table row, beside the checks."""
    s = run.summary
    ev.tables.setdefault("the sample's runs (from its log's summary)", []).append({
        "run": label, "node": run.node, "framework": f"{s.get('framework')} on {s.get('device')}",
        "CPU threads": s.get("cpu_threads"), "measured steps": s.get("measured_steps"),
        "p50 ms": _ms(s.get("p50_s")), "p95 ms": _ms(s.get("p95_s")), "CoV": _round(s.get("cov")),
        "samples/s": _round(s.get("samples_per_s")), "data read MB/s": _round(s.get("data_read_mb_s")),
        "resumed from step": s.get("resumed_from_step"), "steps redone": s.get("steps_redone"),
        "GPU-hours (API timelines)": round(run.gpu_hours, 6), **({"GPU": s["gpu"]} if s.get("gpu") else {})})


def _ms(seconds: Any) -> float | None:
    return round(float(seconds) * 1000, 3) if isinstance(seconds, (int, float)) else None


def _round(value: Any) -> float | None:
    return round(float(value), 3) if isinstance(value, (int, float)) else None


def _running(objs: dict[str, dict[str, Any]], job: GangJob) -> list[str]:
    return [n for n, p in objs.items() if belongs(p, job) and (p.get("status") or {}).get("phase") == "Running"]


def _restarts(pod: dict[str, Any]) -> int:
    return sum(int(c.get("restartCount") or 0) for c in (pod.get("status") or {}).get("containerStatuses") or [])


def _last_step(log: str) -> int:
    steps = _STEP.findall(log)
    return int(steps[-1]) if steps else 0


def _ended_before_kill(objs: dict[str, dict[str, Any]], uid: str) -> str | None:
    pod = next((p for p in objs.values() if p["metadata"]["uid"] == uid), None)
    phase = (pod or {}).get("status", {}).get("phase")
    return f"its pod ended ({phase}) before the kill reached it: more workloads.sample.steps" \
        if phase in ("Succeeded", "Failed") else None

"""Shared steps of the training suite: cluster size, job predicates, evidence from timelines."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from harness.backends import Backend, GangJob
from harness.backends.base import job_of
from harness.profile import Profile
from harness.record.evidence import Evidence
from harness.target import Target
from harness.timeline import Timeline, pods_over_time
from harness.tracker import Objects
from harness.workloads import Workloads

LONG_RUN_S = 3600.0  # jobs that must keep their GPUs until the test releases them


def require(target: Target, backend: Backend, *capabilities: str) -> None:
    """SKIP, with the backend's reason, when it lacks a capability this case needs on this target."""
    for capability in capabilities:
        reason = backend.lacks(capability, target.kind)
        if reason:
            pytest.skip(reason)


def gpu_nodes(api: client.ApiClient, profile: Profile) -> int:
    """Nodes offering a whole node's worth of GPUs (profile gpu.per_node)."""
    nodes = client.CoreV1Api(api).list_node().items
    return sum(1 for n in nodes if int((n.status.allocatable or {}).get(profile.gpu.resource, "0"))
               >= profile.gpu.per_node)


def belongs(pod: dict[str, Any], job: GangJob) -> bool:
    return job_of(pod) == job.name


def state_is(workloads: Workloads, job: GangJob, *states: str) -> Any:
    def check(objects: Objects) -> bool:
        status = workloads.status_of(job, objects)
        return status is not None and status.state in states
    return check


def bound_pods(objects: Objects, job: GangJob) -> int:
    return sum(1 for p in objects.values() if belongs(p, job) and (p.get("spec") or {}).get("nodeName"))


def attach_timeline(evidence: Evidence, timeline: Timeline, start: float) -> None:
    """The timeline (seconds from the test's start) and the pods-over-time series drawn from it."""
    evidence.timeline = [{**row, "t": round(float(str(row["seen_at"])) - start, 3)} for row in timeline.as_rows()]
    evidence.series["pods"] = pods_over_time(evidence.timeline)


def running_intervals(timeline: Timeline, now: float) -> list[tuple[str, float, float]]:
    """(pod name, running since, running until) from the pod transitions; still-running pods end at `now`."""
    result = []
    for name in sorted({t.name for t in timeline.transitions if t.kind == "Pod"}):
        start = None
        for t in timeline.of("Pod", name):
            if t.state == "running" and start is None:
                start = t.seen_at
            elif t.state in ("succeeded", "failed", "deleted") and start is not None:
                result.append((name, start, t.seen_at))
                start = None
        if start is not None:
            result.append((name, start, now))
    return result


def first_seen(timeline: Timeline, kind: str, name: str, *states: str) -> float | None:
    return next((t.seen_at for t in timeline.of(kind, name) if t.state in states), None)

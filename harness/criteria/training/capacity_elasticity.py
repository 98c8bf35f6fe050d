"""Batch training 10 — GPU capacity that comes when jobs queue and goes when idle (the cloud row): a job beyond the
cluster's nodes gets new nodes from the autoscaler and runs on them whole, and the nodes go soon after it ends."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from harness.core.objects import condition_time, parse_time
from harness.criteria import AT_MOST, Criterion, Threshold, register

CRITERION = register(Criterion(
    "training.capacity_elasticity",
    "A job that needs GPU nodes the cluster does not have (the autoscaled pool's) gets them from the autoscaler: "
    "the nodes are Ready and the job runs within thresholds of its submission, no part of the job holds new "
    "nodes while the rest waits, and once it ends the nodes are removed within a threshold, the GPU-hours paid "
    "for idle new nodes (from their creation to their removal, less the job's time on them) at most a threshold.",
    (Threshold("nodes_ready_within_s", "from submission to the last new node the job needs Ready", AT_MOST, " s"),
     Threshold("running_within_s", "from submission to every pod of the job running", AT_MOST, " s"),
     Threshold("max_partial_hold_s", "seconds part of the job held nodes while the rest had none", AT_MOST, " s"),
     Threshold("scale_down_within_s", "from the job's end to the last new node removed", AT_MOST, " s"),
     Threshold("max_idle_gpu_hours", "GPU-hours of new nodes while no pod of the job ran on them", AT_MOST,
               " GPU-h"))))


def epoch(moment: datetime | None) -> float | None:
    return moment.timestamp() if moment else None


def timestamp(value: str | None) -> float | None:
    """Epoch seconds of an API server time (RFC 3339), None for none."""
    return epoch(parse_time(value))


@dataclass(frozen=True)
class NewNode:
    """A node that appeared during the case, from its own object: when it was created, Ready and marked for
    removal (deletionTimestamp: the autoscaler's decision), its GPUs, and the job's time on it."""

    name: str
    gpus: int
    created: float
    ready: float | None
    removed: float | None
    used_from: float | None = None   # the job's pod bound to it (PodScheduled)
    used_until: float | None = None  # the job's pods asked to go (their deletionTimestamp)

    def idle_s(self, end: float) -> float:
        """Seconds it was paid for with none of the job on it: from creation to the job's pod, and from the job's end
        to its removal (or `end`, when it is still there)."""
        gone = self.removed if self.removed is not None else end
        if self.used_from is None:
            return max(0.0, gone - self.created)
        until = self.used_until if self.used_until is not None else gone
        return max(0.0, self.used_from - self.created) + max(0.0, gone - until)


def new_node(node: dict[str, Any], gpu_resource: str) -> NewNode:
    """Pure: a Node dict (its last state) as a NewNode."""
    meta, status = node["metadata"], node.get("status") or {}
    gpus = int(str((status.get("capacity") or status.get("allocatable") or {}).get(gpu_resource, "0")) or 0)
    return NewNode(meta["name"], gpus, timestamp(meta["creationTimestamp"]) or 0.0,
                   epoch(condition_time(node, "Ready")), timestamp(meta.get("deletionTimestamp")))


def scheduled_at(pod: dict[str, Any]) -> float | None:
    """When the scheduler bound the pod (its PodScheduled condition), None while it waits."""
    if not (pod.get("spec") or {}).get("nodeName"):
        return None
    return epoch(condition_time(pod, "PodScheduled"))


def running_at(pod: dict[str, Any]) -> float | None:
    """When the pod's containers were all started (its Ready condition, else its start time), None before."""
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return None
    return epoch(condition_time(pod, "Ready")) or timestamp(status.get("startTime"))


def partial_hold_s(bound_at: list[float | None], until: float) -> float:
    """Seconds some pods of a job were bound while others were not: from the first bound to the last (or `until`,
    when some never were)."""
    bound = [t for t in bound_at if t is not None]
    if not bound or len(bound) == len(bound_at) and max(bound) == min(bound):
        return 0.0
    last = max(bound) if len(bound) == len(bound_at) else until
    return max(0.0, last - min(bound))


def idle_gpu_hours(nodes: list[NewNode], end: float) -> float:
    return sum(n.gpus * n.idle_s(end) for n in nodes) / 3600.0

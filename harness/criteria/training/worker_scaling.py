"""Batch training 12 — a running Ray cluster's worker group resized as the Ray autoscaler asks (the KubeRay row):
the workers come within a threshold of the request, under the job's queue, and the extra ones go when asked."""

from __future__ import annotations

from typing import Any

from harness.criteria import AT_MOST, Criterion, Threshold, register

CRITERION = register(Criterion(
    "training.worker_scaling",
    "A running job's worker group grows when asked (a RayCluster's worker replicas, which the Ray autoscaler sets) "
    "and shrinks back: every worker asked for is Ready within a threshold of the request, and the extra workers are "
    "gone within a threshold of the request to shrink; what the job's queue admitted for it is noted.",
    (Threshold("scale_up_within_s", "from the request for more workers to the last of them Ready", AT_MOST, " s"),
     Threshold("scale_down_within_s", "from the request for fewer workers to the last extra one going",
               AT_MOST, " s"))))


def pod_state(pod: dict[str, Any]) -> str:
    """Pure: a worker's state as the record tells it: gated (held by a scheduling gate), pending, running, ready,
    going (deletionTimestamp set)."""
    if pod["metadata"].get("deletionTimestamp"):
        return "going"
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    if spec.get("schedulingGates"):
        return "gated"
    if any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []):
        return "ready"
    return "running" if status.get("phase") == "Running" else "pending"


def tally(states: list[str]) -> str:
    """Pure: '2 ready, 1 gated' (in a fixed order), 'none' for no workers."""
    order = ("ready", "running", "pending", "gated", "going")
    return ", ".join(f"{states.count(s)} {s}" for s in order if states.count(s)) or "none"

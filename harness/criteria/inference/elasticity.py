"""Inference 2 — elasticity: scale out and in by hand, per scheduler; time to the new size; pods that cannot be
placed are reported with the scheduler's reason and not counted as reached. The autoscaler under load is its own
criterion (inference.autoscaling), checked once per cluster: the HPA and its metrics pipeline do not depend on the
scheduler."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from harness.core.objects import parse_time
from harness.criteria import AT_MOST, Chart, Criterion, Threshold, register

CRITERION = register(Criterion(
    "inference.elasticity",
    "Scaling 1 -> N -> 1 reaches each new size (Ready replicas) within the threshold; pods that cannot be placed "
    "are reported with the scheduler's reason and not counted as reached.",
    (Threshold("scale_out_within_s", "seconds from a scale-out by hand to N Ready replicas", AT_MOST, " s"),
     Threshold("scale_in_within_s", "seconds from a scale-in by hand to 1 replica left", AT_MOST, " s"))))

AUTOSCALING = register(Criterion(
    "inference.autoscaling",
    "Under a load beyond what one replica serves, the HorizontalPodAutoscaler (on the model servers' waiting "
    "requests from Prometheus, through the external metrics API) reaches its maximum within the threshold, does not "
    "turn back while the load lasts, and returns to one replica after it; checked once per cluster.",
    (Threshold("hpa_out_within_s", "seconds from the load starting to the autoscaler's maximum Ready", AT_MOST,
               " s"),
     Threshold("hpa_in_within_s", "seconds from the load ending to 1 replica left (its scale-down window included)",
               AT_MOST, " s"),
     Threshold("max_flaps", "direction changes of the autoscaler's replica count under steady load", AT_MOST)),
    (Chart("replicas", "replicas over time", "replicas"),)))


def unplaced(pods: list[dict[str, Any]], since_before: datetime | None = None) -> dict[str, str]:
    """Pods the scheduler could not place, with its reason (PodScheduled=False's message); with `since_before`, only
    those refused since before then (a pod refused for a moment, while another's GPUs are being freed, is not)."""
    found = {}
    for pod in pods:
        for c in (pod.get("status") or {}).get("conditions") or []:
            # SchedulingGated is a queue holding the pod (Kueue's admission gate), not the scheduler refusing it
            if c.get("type") != "PodScheduled" or c.get("status") != "False" or c.get("reason") == "SchedulingGated":
                continue
            since = parse_time(c.get("lastTransitionTime"))
            if since_before is None or (since is not None and since < since_before):
                found[pod["metadata"]["name"]] = c.get("message") or c.get("reason") or "unschedulable"
    return found


def held_by_queue(pods: list[dict[str, Any]]) -> list[str]:
    """Pods a queue holds back (a scheduling gate: Kueue's admission), not yet handed to the scheduler."""
    return [p["metadata"]["name"] for p in pods if any(
        c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated"
        for c in (p.get("status") or {}).get("conditions") or [])]


def flaps(replicas: list[int]) -> int:
    """Direction changes in a series of replica counts (up then down then up ... counts each turn)."""
    steps = [b - a for a, b in zip(replicas, replicas[1:]) if b != a]
    return sum(1 for a, b in zip(steps, steps[1:]) if (a > 0) != (b > 0))

"""Inference 2 — elasticity: scale out and in (by hand, and by the HPA under load); time to the new size; pods that
cannot be placed are reported with the scheduler's reason and not counted as reached."""

from __future__ import annotations

from typing import Any

from harness.criteria import AT_MOST, Chart, Criterion, Threshold, register

CRITERION = register(Criterion(
    "inference.elasticity",
    "Scaling 1 -> N -> 1 reaches each new size (Ready replicas) within the threshold; pods that cannot be placed "
    "are reported with the scheduler's reason and not counted as reached; the autoscaler does not flap.",
    (Threshold("scale_out_within_s", "seconds from a scale-out by hand to N Ready replicas", AT_MOST, " s"),
     Threshold("scale_in_within_s", "seconds from a scale-in by hand to 1 replica left", AT_MOST, " s"),
     Threshold("hpa_out_within_s", "seconds from the load starting to the autoscaler's maximum Ready", AT_MOST,
               " s"),
     Threshold("hpa_in_within_s", "seconds from the load ending to 1 replica left (its scale-down window included)",
               AT_MOST, " s"),
     Threshold("max_flaps", "direction changes of the autoscaler's replica count under steady load", AT_MOST)),
    (Chart("replicas", "replicas over time", "replicas"),)))


def unplaced(pods: list[dict[str, Any]]) -> dict[str, str]:
    """Pods the scheduler could not place, with its reason (PodScheduled=False's message)."""
    found = {}
    for pod in pods:
        for c in (pod.get("status") or {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False":
                found[pod["metadata"]["name"]] = c.get("message") or c.get("reason") or "unschedulable"
    return found


def flaps(replicas: list[int]) -> int:
    """Direction changes in a series of replica counts (up then down then up ... counts each turn)."""
    steps = [b - a for a, b in zip(replicas, replicas[1:]) if b != a]
    return sum(1 for a, b in zip(steps, steps[1:]) if (a > 0) != (b > 0))

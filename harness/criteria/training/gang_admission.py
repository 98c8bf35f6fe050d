"""Batch training 1 — gang admission: while a gang cannot fit, how many of its pods were bound at once;
then the time from capacity appearing to all of them bound."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.criteria import AT_MOST, Chart, Criterion, Threshold, register

CRITERION = register(Criterion(
    "training.gang_admission",
    "When free GPUs are fewer than a job needs, none of its pods is bound at any moment; when capacity appears, "
    "all are bound within the threshold.",
    (Threshold("max_partial_pods", "pods of a gang allowed bound while it cannot fit (0)", AT_MOST, " pods"),
     Threshold("all_bound_within_s", "seconds from capacity appearing to all pods bound", AT_MOST, " s")),
    (Chart("pods", "pods over time", "pods"),)))


@dataclass
class GangWatch:
    """Fed every pod event of the gang (from the watch, not one instant); keeps the worst partial binding."""

    size: int
    bound: set[str] = field(default_factory=set)
    max_partial: int = 0            # most pods bound at one time while fewer than `size` were
    all_bound_at: float | None = None
    refused: dict[str, float] = field(default_factory=dict)  # pod -> when seen refused by the scheduler

    def observe(self, event: str, pod: dict[str, Any], seen_at: float) -> None:
        name = pod["metadata"]["name"]
        is_bound = event != "DELETED" and bool((pod.get("spec") or {}).get("nodeName"))
        if is_bound:
            self.bound.add(name)
        else:
            self.bound.discard(name)
        if event != "DELETED" and not is_bound and unschedulable(pod):
            self.refused.setdefault(name, seen_at)
        else:
            self.refused.pop(name, None)
        if len(self.bound) < self.size:
            self.max_partial = max(self.max_partial, len(self.bound))
        elif self.all_bound_at is None:
            self.all_bound_at = seen_at

    def partial_while_blocked(self) -> int:
        return self.max_partial

    def refused_since(self) -> float | None:
        """When the scheduler had said of every pod of the gang that it cannot place it now (None: not yet)."""
        return max(self.refused.values()) if len(self.refused) >= self.size else None


def unschedulable(pod: dict[str, Any]) -> bool:
    """Pure: the scheduler tried and could not place the pod (its PodScheduled condition False, Unschedulable)."""
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
               for c in (pod.get("status") or {}).get("conditions") or [])

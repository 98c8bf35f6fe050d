"""Inference 1 — cold start: from apply to every replica Ready, the Service's endpoints ready, and the first
successful response through the Service; per pod created -> scheduled -> Ready."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.core.objects import condition_time, created_at
from harness.criteria import AT_MOST, Criterion, Threshold, register
from harness.core.timeline import percentile

CRITERION = register(Criterion(
    "inference.cold_start",
    "From apply to all replicas Ready, the Service's endpoints ready and the first successful response through "
    "the Service, within the threshold; per pod created -> scheduled -> Ready, p50/p95.",
    (Threshold("all_ready_within_s", "seconds from apply to every replica Ready", AT_MOST, " s"),
     Threshold("first_response_within_s", "seconds from apply to the first successful response via the Service",
               AT_MOST, " s"),
     Threshold("pod_ready_p95_s", "95th percentile of a pod's created -> Ready seconds", AT_MOST, " s"))))


@dataclass(frozen=True)
class PodStart:
    name: str
    scheduled_s: float | None   # created -> PodScheduled
    ready_s: float | None       # created -> Ready


def pod_starts(pods: list[dict[str, Any]]) -> list[PodStart]:
    """From the server's own timestamps (creationTimestamp and the conditions' lastTransitionTime)."""
    starts = []
    for pod in pods:
        created = created_at(pod)
        if created is None:
            continue
        scheduled, ready = condition_time(pod, "PodScheduled"), condition_time(pod, "Ready")
        starts.append(PodStart(pod["metadata"]["name"],
                               (scheduled - created).total_seconds() if scheduled else None,
                               (ready - created).total_seconds() if ready else None))
    return starts


def ready_percentiles(starts: list[PodStart]) -> tuple[float, float] | None:
    values = [s.ready_s for s in starts if s.ready_s is not None]
    return (percentile(values, 50), percentile(values, 95)) if values else None

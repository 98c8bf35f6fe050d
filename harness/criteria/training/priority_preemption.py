"""Batch training 3 — priority and preemption: time for urgent work to be admitted over low-priority work
that fills the GPUs, and preemptions counted from the API against the scheduler's own counter."""

from __future__ import annotations

from harness.criteria import AT_MOST, Chart, Criterion, Threshold, register

CRITERION = register(Criterion(
    "training.priority_preemption",
    "High-priority work is admitted within the threshold when low-priority work fills the GPUs; preemptions "
    "counted from the API and from Prometheus agree.",
    (Threshold("admit_within_s", "seconds for a high-priority job to be admitted", AT_MOST, " s"),
     Threshold("max_count_mismatch", "API vs Prometheus preemption count difference", AT_MOST)),
    (Chart("pods", "pods over time", "pods"),)))

# The unit a backend's preemption counter counts in, and so the unit the API side must count
VICTIM_PODS, VICTIM_WORKLOADS, PREEMPTORS = "pods", "workloads", "preemptors"


def api_count(unit: str, victim_pods: int, preempted_workloads: int, urgent_admitted: bool) -> int:
    """Pure: the preemptions the API showed, in the unit of the scheduler's counter."""
    if unit == VICTIM_PODS:
        return victim_pods
    if unit == VICTIM_WORKLOADS:
        return preempted_workloads
    return int(urgent_admitted and victim_pods > 0)  # PREEMPTORS: urgent jobs admitted by evicting someone

"""Batch training 8 — isolation boundary: the workload sample alone, then beside another tenant's antagonist on the
same node; the slowdown of its step time."""

from __future__ import annotations

from harness.criteria import AT_MOST, Chart, Criterion, Threshold, register

CRITERION = register(Criterion(
    "training.isolation_boundary",
    "The workload sample runs alone on a node, then beside another tenant's antagonist on the same node (CPU and "
    "memory hogs asking for less CPU than they use, on a CPU node; a second process on the same GPU, on a GPU "
    "node): its step time p50 beside the antagonist over its p50 alone is within the threshold.",
    (Threshold("max_slowdown", "step time p50 beside the antagonist / p50 alone", AT_MOST, "x"),),
    (Chart("step_ms", "step time alone and beside the antagonist (after warm-up)", "ms", "seconds"),)))


def slowdown(alone_p50_s: float, beside_p50_s: float) -> float:
    return beside_p50_s / alone_p50_s if alone_p50_s > 0 else float("inf")

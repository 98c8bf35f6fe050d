"""training.capacity_elasticity's arithmetic on recorded Node and Pod objects."""

from __future__ import annotations

from typing import Any

from harness.criteria.training.capacity_elasticity import (NewNode, idle_gpu_hours, new_node, partial_hold_s,
                                                           running_at, scheduled_at, timestamp)

T0 = timestamp("2026-12-04T02:00:00Z") or 0.0


def at(seconds: float) -> str:
    return f"2026-12-04T02:{int(seconds) // 60:02d}:{int(seconds) % 60:02d}Z"


def node(created: float, ready: float | None, deleted: float | None = None, gpus: str = "8") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "n", "creationTimestamp": at(created)}
    if deleted is not None:
        meta["deletionTimestamp"] = at(deleted)
    conditions = [{"type": "Ready", "status": "True", "lastTransitionTime": at(ready)}] if ready is not None else []
    return {"metadata": meta, "status": {"capacity": {"nvidia.com/gpu": gpus}, "conditions": conditions}}


def test_a_node_reads_its_creation_ready_and_removal_from_its_object() -> None:
    n = new_node(node(1, 3, deleted=40), "nvidia.com/gpu")
    assert (n.gpus, n.created - T0, (n.ready or 0) - T0, (n.removed or 0) - T0) == (8, 1, 3, 40)
    assert new_node(node(1, None), "nvidia.com/gpu").ready is None


def test_idle_time_is_before_the_job_came_and_after_it_left() -> None:
    used = NewNode("a", 8, T0, T0 + 2, T0 + 50, used_from=T0 + 4, used_until=T0 + 20)
    assert used.idle_s(T0 + 99) == 4 + 30
    never_used = NewNode("b", 8, T0, T0 + 2, None)
    assert never_used.idle_s(T0 + 36) == 36  # still there at the end: paid until then
    assert idle_gpu_hours([used, never_used], T0 + 36) == (8 * 34 + 8 * 36) / 3600


def test_a_job_bound_at_once_holds_nothing_partially_and_one_half_bound_holds_until_the_end() -> None:
    assert partial_hold_s([T0 + 5, T0 + 5], T0 + 60) == 0
    assert partial_hold_s([T0 + 5, T0 + 8], T0 + 60) == 3
    assert partial_hold_s([T0 + 5, None], T0 + 60) == 55
    assert partial_hold_s([None, None], T0 + 60) == 0


def test_bound_and_running_come_from_the_pods_conditions() -> None:
    pod = {"spec": {"nodeName": "n"}, "status": {"phase": "Running", "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": at(2)},
        {"type": "Ready", "status": "True", "lastTransitionTime": at(4)}]}}
    assert (scheduled_at(pod), running_at(pod)) == (T0 + 2, T0 + 4)
    waiting = {"spec": {}, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": at(2)}]}}
    assert (scheduled_at(waiting), running_at(waiting)) == (None, None)

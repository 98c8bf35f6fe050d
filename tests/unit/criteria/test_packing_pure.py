"""Packing on recorded pod events: a gang's partial holds, the largest gang's starvation, the GPUs' occupancy."""

from __future__ import annotations

from typing import Any

from harness.criteria.training.packing import Gang, burst, occupancy, starved_s


def pod(name: str, node: str | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"nodeName": node} if node else {}}


def test_a_gang_bound_pod_by_pod_while_the_rest_wait_is_a_partial_hold_until_its_last_pod() -> None:
    gang = Gang(3, submitted_at=0.0)
    gang.observe("ADDED", pod("a", "n0"), 1.0)
    gang.observe("ADDED", pod("b", "n1"), 2.0)
    assert gang.partial_s(now=5.0) == 4.0, "a hold still going counts to now"
    gang.observe("ADDED", pod("c", "n2"), 11.0)
    assert (gang.started_at, gang.partial_s(now=20.0)) == (11.0, 10.0)
    gang.observe("DELETED", pod("a", "n0"), 21.0)  # its pods ending after it started is no partial hold
    assert gang.partial_s(now=30.0) == 10.0


def test_a_gang_bound_whole_in_one_cycle_holds_nothing_partial() -> None:
    gang = Gang(2, submitted_at=0.0)
    gang.observe("ADDED", pod("a"), 0.1)
    gang.observe("MODIFIED", pod("a", "n0"), 3.0)
    gang.observe("MODIFIED", pod("b", "n1"), 3.02)
    assert round(gang.partial_s(now=9.0), 3) == 0.02


def test_the_largest_gang_is_starved_from_the_first_later_gang_that_passes_it() -> None:
    gangs = {"small-before": Gang(1, 0.0, started_at=0.1), "big": Gang(32, 0.2, started_at=40.0),
             "small-after": Gang(1, 0.3, started_at=10.0), "later": Gang(1, 0.4, started_at=50.0)}
    assert starved_s(gangs, "big", now=60.0) == 30.0
    gangs["small-after"].started_at = 45.0
    assert starved_s(gangs, "big", now=60.0) == 0.0, "a gang that started after it did not pass it"
    gangs["big"].started_at = None
    assert starved_s(gangs, "big", now=60.0) == 15.0, "not started: starved until now"


def test_occupancy_is_gpu_seconds_held_over_the_windows_with_the_lag_as_its_interval() -> None:
    held = [(0.0, 10.0, 8), (0.0, 20.0, 8), (5.0, 30.0, 16)]  # the last runs past the window: cut at its end
    found = occupancy(held, capacity=32, start=0.0, end=20.0, lag_s=0.0)
    assert round(found.value, 4) == round((80 + 160 + 240) / 640, 4) and found.low == found.high == found.value
    lagged = occupancy(held, capacity=32, start=0.0, end=20.0, lag_s=0.5)
    assert lagged.low < found.value < lagged.high


def test_the_burst_is_four_times_the_cluster_with_a_gang_as_large_as_it_in_the_middle() -> None:
    shapes = burst(nodes=4, per_node=8)
    assert sum(pods * gpus for pods, gpus in shapes) == 4 * 32
    largest = max(shapes, key=lambda s: s[0] * s[1])
    assert largest == (32, 1) and 0 < shapes.index(largest) < len(shapes) - 1
    assert (4, 8) in shapes and (1, 1) in shapes

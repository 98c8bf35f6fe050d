"""Intervals an object spent in some states, from its transitions."""

from __future__ import annotations

from harness.core.timeline import Timeline, Transition, running_intervals, state_intervals


def timeline(*steps: tuple[str, str, float, str]) -> Timeline:
    found = Timeline()
    for kind, state, at, event in steps:
        found.add(Transition(kind, "w", state, at, event))
    return found


def test_an_admission_lasts_until_the_object_leaves_the_states_or_is_deleted_and_one_still_open_ends_now() -> None:
    evicted = timeline(("Workload", "queued", 0, "ADDED"), ("Workload", "admitted", 1, "MODIFIED"),
                       ("Workload", "running", 2, "MODIFIED"), ("Workload", "preempted", 5, "MODIFIED"),
                       ("Workload", "admitted", 7, "MODIFIED"))
    assert state_intervals(evicted, "Workload", ("admitted", "running"), now=9) == [("w", 1, 5), ("w", 7, 9)]
    deleted = timeline(("Workload", "admitted", 1, "ADDED"), ("Workload", "admitted", 4, "DELETED"))
    assert state_intervals(deleted, "Workload", ("admitted", "running"), now=9) == [("w", 1, 4)]


def test_a_pod_runs_until_it_ends_not_while_its_phase_is_unknown() -> None:
    lost = timeline(("Pod", "running", 1, "ADDED"), ("Pod", "unknown", 3, "MODIFIED"), ("Pod", "succeeded", 6, "MODIFIED"))
    assert running_intervals(lost, now=9) == [("w", 1, 6)]

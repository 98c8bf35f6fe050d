"""Progress lines: what a wait waits for and what it last saw, at most every EVERY_S, and nothing when off."""

from __future__ import annotations

import pytest

from harness.core import progress


def test_a_tally_of_states_reads_at_a_glance() -> None:
    assert progress.tally(["Pending", "Running", "Pending"], "pod") == "3 pods: 2 Pending, 1 Running"
    assert progress.tally([], "pod") == "no pods yet"
    assert progress.tally(["Running"], "job") == "1 job: 1 Running"


def test_a_long_wait_says_what_it_waits_for_every_so_often_and_nothing_when_off(
        monkeypatch: pytest.MonkeyPatch) -> None:
    said: list[str] = []
    clock = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    progress.enable(said.append)
    try:
        waiting = progress.Waiting("gang of train-a admitted", 300)
        waiting.tick(lambda: "4 pods: 4 Pending")
        assert said == []
        clock[0] += progress.EVERY_S
        waiting.tick(lambda: "4 pods: 4 Pending")
        clock[0] += 1
        waiting.tick(lambda: "4 pods: 4 Running")
        assert said == ["  … gang of train-a admitted: 4 pods: 4 Pending (10s of 300s)"]
        progress.case_started("training.gang_admission", "kueue", "suites/training/test_gang_admission.py::x[kueue]")
        assert said[-1].startswith("▶ training.gang_admission [kueue]")
    finally:
        progress.enable(None)
    clock[0] += 60
    waiting.tick(lambda: "unseen")
    assert len(said) == 2 and waiting.until_next() == float("inf")

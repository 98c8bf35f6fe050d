"""The tracker, the waits and teardown's wait-until-gone, driven by the replay fake on objects recorded from
the sim: fast, and no cluster (what they conclude about a cluster is tested against the sim)."""

from __future__ import annotations

import copy
import threading
import time

import pytest

from harness.backends.kueue import workload_status
from harness.core.errors import WaitTimeout
from harness.cluster.tracker import Tracker
from harness.cluster.wait import WaitFailed, wait_gone
from tests.fixtures.replay import Replay, recorded


def test_a_tracker_wait_ends_on_the_event_that_satisfies_it_and_keeps_the_timeline() -> None:
    [running] = recorded("kueue-running")
    [succeeded] = recorded("kueue-succeeded")
    succeeded["metadata"]["name"] = running["metadata"]["name"]
    replay = Replay([running])
    tracker = Tracker(None, "kueue.x-k8s.io/v1beta2", "Workload", namespace="poc-team-a", source=replay,
                      describe=lambda o: workload_status(o).state).start()
    try:
        threading.Timer(0.2, replay.feed, ("MODIFIED", succeeded)).start()
        found = tracker.wait_until("the Workload finished", lambda objs: any(
            workload_status(o).state == "succeeded" for o in objs.values()), timeout_s=5)
        assert [workload_status(o).state for o in found.values()] == ["succeeded"]
        assert [t.state for t in tracker.timeline.transitions] == ["running", "succeeded"]
    finally:
        tracker.stop()


def test_a_tracker_wait_fails_early_and_times_out_naming_the_last_state() -> None:
    [queued] = recorded("kueue-queued")
    tracker = Tracker(None, "kueue.x-k8s.io/v1beta2", "Workload", source=Replay([queued]),
                      describe=lambda o: workload_status(o).state).start()
    try:
        name = queued["metadata"]["name"]
        with pytest.raises(WaitTimeout, match=f"not done after 0s; last: {name}=queued"):
            tracker.wait_until("admitted", lambda objs: False, timeout_s=0.3)
        with pytest.raises(WaitFailed, match="held: quota"):
            tracker.wait_until("admitted", lambda objs: False, timeout_s=5, failed=lambda objs: "held: quota")
    finally:
        tracker.stop()


def test_a_tracker_keeps_its_objects_readable_while_a_broken_watch_relists() -> None:
    """Between the relist and its last object the tracker still holds what it had (a reader never sees an empty
    set, 2026-12-07: a case read its pods then and missed them); once synced, what the list lacks is gone."""
    first, second = recorded("kai-pods-succeeded")[:2]
    replay = Replay([first, second])
    tracker = Tracker(None, "v1", "Pod", source=replay).start()
    seen_while_relisting: list[int] = []
    try:
        tracker.wait_until("both listed", lambda objs: len(objs) == 2, timeout_s=5)
        tracker.on_event(lambda event, obj: seen_while_relisting.append(len(tracker.objects))
                         if event == "LISTED" else None)
        replay.expire([first])
        tracker.wait_until("the relist synced", lambda objs: len(objs) == 1, timeout_s=5)
        assert seen_while_relisting == [2]
        assert set(tracker.gone) == {second["metadata"]["name"]}
    finally:
        tracker.stop()


def test_teardown_wait_returns_once_the_recorded_pods_are_deleted() -> None:
    pods = recorded("kai-pods-succeeded")
    replay = Replay(pods)
    for pod in pods:
        replay.feed("DELETED", copy.deepcopy(pod))
    started = time.monotonic()
    wait_gone(replay, "pods of the test", timeout_s=5, namespace="poc-team-a")
    assert time.monotonic() - started < 2


def test_teardown_wait_reports_what_stayed() -> None:
    pods = recorded("kai-pods-succeeded")
    replay = Replay(pods)
    replay.feed("DELETED", pods[0])
    with pytest.raises(WaitTimeout, match=r"still present after 0s; last: \{'rec-kai-1'"):
        wait_gone(replay, "pods of the test", timeout_s=0.5, namespace="poc-team-a")

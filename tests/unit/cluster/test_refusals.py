"""A container that waiting will not start is named with the kubelet's reason and message."""

from __future__ import annotations

from harness.cluster.refusals import not_started


def pod(name: str, reason: str, message: str = "") -> dict[str, object]:
    return {"metadata": {"name": name}, "status": {"containerStatuses": [
        {"name": "train", "state": {"waiting": {"reason": reason, "message": message}}}]}}


def test_an_image_that_cannot_be_pulled_is_named() -> None:
    assert not_started([pod("a", "ContainerCreating"), pod("b", "ImagePullBackOff", 'Back-off pulling image "x"')]) \
        == 'pod b: container train: ImagePullBackOff (Back-off pulling image "x")'


def test_pods_still_starting_are_not_refused() -> None:
    assert not_started([pod("a", "ContainerCreating"), pod("b", "PodInitializing")]) is None
    assert not_started([{"metadata": {"name": "c"}, "status": {}}]) is None

"""`gpupoc setup --backends ...` makes the queues of the chosen backends only: a pair's two queue systems, KubeRay's
Kueue, none for kube-scheduler or Slurm; every one when none are chosen."""

from __future__ import annotations

from harness.config.options import BACKENDS
from harness.setup.queue_model import QUEUE_TEMPLATES, queue_systems


def test_the_chosen_backends_queue_systems_only() -> None:
    assert queue_systems(None) == tuple(QUEUE_TEMPLATES) == queue_systems(BACKENDS)
    assert queue_systems(("kueue-volcano",)) == ("kueue", "volcano")
    assert queue_systems(("kuberay", "default")) == ("kueue",)
    assert queue_systems(("kai",)) == ("kai",)
    assert queue_systems(("default", "slurm")) == ()

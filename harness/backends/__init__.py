"""Backend adapters: the same abstract job on every scheduler, and its state read back."""

from __future__ import annotations

from harness.backends.base import Backend
from harness.backends.combined import KueueVolcanoBackend
from harness.backends.default import DefaultBackend
from harness.backends.kai import KaiBackend
from harness.backends.kube_gang import KubeGangBackend
from harness.backends.kuberay import KubeRayBackend
from harness.backends.kueue import KueueBackend
from harness.backends.slurm import SlurmBackend
from harness.backends.volcano import VolcanoBackend
from harness.targets.target import Target

ALL: dict[str, Backend] = {b.name: b for b in (VolcanoBackend(), KueueBackend(), KubeRayBackend(), KaiBackend(),
                                               DefaultBackend(), KubeGangBackend(), SlurmBackend(), KueueVolcanoBackend())}


def controller_deployments() -> tuple[str, ...]:
    """Every backend's controller Deployments on a real cluster (what control-plane recovery scales)."""
    return tuple(sorted({d for b in ALL.values() if b.controllers for d in b.controllers.deployments}))


def detect(target: Target, wanted: tuple[str, ...]) -> dict[str, str | None]:
    """backend name -> None when usable here, else the reason it is skipped."""
    return {name: ALL[name].unavailable_reason(target) for name in wanted}


__all__ = ["ALL", "Backend", "controller_deployments", "detect"]

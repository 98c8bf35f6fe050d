"""Replacing a backend's release in place (operations.upgrade), on the sim and on a real cluster.

On the sim the case first installs the release before the pinned one (its CRDs and its controller), then upgrades
to the pinned one as its project documents: CRDs first, then the controller (harness/sim/releases.py); whatever
happens, the sim runs the pinned release again at the end. On a real cluster the harness upgrades nothing: it waits
for the cluster's own upgrade (the controller Deployments' images changing, then the new ones available) and reads
what it did; a destructive step, only with --allow-destructive.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from kubernetes import client

from harness.cluster.wait import poll
from harness.core import progress
from harness.core.errors import HarnessError, WaitTimeout
from harness.targets import sim
from harness.targets.restart import deployments_named

POLL_S = 1.0


class Upgrade(Protocol):
    names: tuple[str, ...]  # what is replaced

    @property
    def parts(self) -> tuple[str, ...]:
        """The parts of the environment the upgrade takes down (the sim's processes, the cluster's Deployments)."""
        ...

    def prepare(self) -> str:
        """The release running before the upgrade, in words (the sim installs it first)."""
        ...

    def stop(self) -> float:
        """The old release's controllers gone (the sim stops them; a cluster's rollout has begun): when."""
        ...

    def start(self) -> float:
        """The new release's controllers started (the sim: CRDs first) or available (a cluster): when."""
        ...

    def upgraded_to(self) -> str:
        ...

    def release_crds(self) -> list[dict[str, Any]] | None:
        """The CRDs the new release ships, None where the harness cannot read them."""
        ...

    def restore(self) -> list[str]:
        """What the target ran before the case, whatever happened; what could not be put back."""
        ...


@dataclass
class SimUpgrade:
    """The sim's schedulers `names`, from the release before the pinned one to the pinned one; `with_crds` False
    leaves out the CRD step (a misconfiguration on purpose). Its requests are the sim admin's (its own client, not
    the runner's: installing a release is no part of the runner's role)."""

    names: tuple[str, ...]
    with_crds: bool = True
    api: client.ApiClient = field(default_factory=sim.api_client)

    def _pairs(self) -> list[tuple[Any, Any]]:
        return [sim.releases_of(name) for name in self.names]

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(pinned.component for _, pinned in self._pairs())

    def prepare(self) -> str:
        for previous, _ in self._pairs():
            sim.install_release(self.api, previous, say=progress.say)
        return ", ".join(previous.label for previous, _ in self._pairs())

    def stop(self) -> float:
        """The CRD step first, while the old controllers still run (as each project documents, and as `kubectl apply
        --server-side` of a release's manifest does it), then the old controllers stopped."""
        for _, pinned in self._pairs():
            if self.with_crds:
                sim.apply_release_crds(self.api, pinned)
                progress.say(f"  {pinned.label}: CRDs applied")
            sim.stop_release(pinned)
        return time.time()

    def start(self) -> float:
        return min(sim.start_release(self.api, pinned, with_crds=False, say=progress.say)
                   for _, pinned in self._pairs())

    def upgraded_to(self) -> str:
        to = ", ".join(pinned.label for _, pinned in self._pairs())
        return to if self.with_crds else f"{to} (its CRD step left out)"

    def release_crds(self) -> list[dict[str, Any]] | None:
        return [crd for _, pinned in self._pairs() for crd in pinned.crds()]

    def restore(self) -> list[str]:
        problems = []
        for _, pinned in self._pairs():
            try:
                if not self.with_crds or sim.running_release(pinned.scheduler) != pinned.label:
                    sim.install_release(self.api, pinned)
            except Exception as exc:  # noqa: BLE001 - each release put back on its own; the rest still tried
                problems.append(f"{pinned.label}: {exc}")
        return problems


@dataclass
class ClusterUpgrade:
    """The cluster's own upgrade of the Deployments `names` (found in any namespace), waited for up to `timeout_s`."""

    api: client.ApiClient
    names: tuple[str, ...]
    timeout_s: float
    _before: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)

    @property
    def parts(self) -> tuple[str, ...]:
        return self.names

    def _deployments(self) -> list[client.V1Deployment]:
        return deployments_named(self.api, self.names)

    def _images(self) -> dict[tuple[str, str], tuple[str, ...]]:
        return {(d.metadata.namespace, d.metadata.name): tuple(c.image for c in d.spec.template.spec.containers)
                for d in self._deployments()}

    def prepare(self) -> str:
        self._before = self._images()
        if not self._before:
            raise HarnessError(f"no controller Deployment named {', '.join(self.names)} on this cluster")
        return _images_text(self._before)

    def stop(self) -> float:
        waiting = progress.Waiting(f"the cluster's own upgrade of {', '.join(self.names)} (run it now)",
                                   self.timeout_s)
        def changed(images: dict[tuple[str, str], tuple[str, ...]]) -> bool:
            waiting.tick(lambda: _images_text(images))
            return any(images.get(k) != v for k, v in self._before.items())
        images = poll(self._images, changed, self.timeout_s, POLL_S)
        if not changed(images):
            raise WaitTimeout(f"no upgrade of {', '.join(self.names)} seen within {self.timeout_s:.0f} s: their "
                              f"images are still {_images_text(images)}")
        return time.time()

    def start(self) -> float:
        def rolled_out(found: list[client.V1Deployment]) -> bool:
            return all((d.status.observed_generation or 0) >= (d.metadata.generation or 0)
                       and (d.status.updated_replicas or 0) == (d.spec.replicas or 0)
                       and (d.status.available_replicas or 0) >= (d.spec.replicas or 0)
                       and (d.status.replicas or 0) == (d.spec.replicas or 0) for d in found)
        found = poll(self._deployments, rolled_out, self.timeout_s, POLL_S)
        if not rolled_out(found):
            raise WaitTimeout(f"the upgraded {', '.join(self.names)} not available after {self.timeout_s:.0f} s")
        return time.time()

    def upgraded_to(self) -> str:
        return _images_text(self._images())

    def release_crds(self) -> list[dict[str, Any]] | None:
        return None

    def restore(self) -> list[str]:
        return []


def _images_text(images: dict[tuple[str, str], tuple[str, ...]]) -> str:
    return "; ".join(f"{ns}/{name}: {', '.join(found)}" for (ns, name), found in sorted(images.items())) or "none"


def upgrade_of(target: Any, backend: Any, timeout_s: float) -> Upgrade:
    """How `backend`'s release is replaced on `target` (the caller checked UPGRADE)."""
    releases = backend.releases
    if target.features.own_processes:
        return SimUpgrade(releases.sim)
    return ClusterUpgrade(target.api, releases.deployments, timeout_s)

"""Stopping and starting a backend's scheduling controllers, on the sim and on a real cluster.

On the sim, the controllers are processes (`gpupoc sim stop|start`). On a real cluster they are
Deployments: scaled to zero and back to their replicas, waiting until they are available again (a
destructive step: the caller asks for --allow-destructive first). Either way `start()` returns the
wall-clock time the controllers were started again (a controller may act before it reports healthy).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from kubernetes import client

from harness.cluster.wait import poll
from harness.core.errors import HarnessError, WaitTimeout
from harness.targets import sim

POLL_S = 0.5


class ControllerRestart(Protocol):
    names: tuple[str, ...]

    def stop(self) -> None:
        ...

    def start(self) -> float:
        ...


@dataclass
class SimRestart:
    names: tuple[str, ...]

    def stop(self) -> None:
        for name in self.names:
            sim.stop_component(name, say=lambda _: None)

    def start(self) -> float:
        started = time.time()
        for name in self.names:
            sim.start_component(name, say=lambda _: None)
        return started


def deployments_named(api: client.ApiClient, names: tuple[str, ...]) -> list[client.V1Deployment]:
    """The Deployments called `names`, in any namespace."""
    apps = client.AppsV1Api(api)
    return [d for n in names for d in apps.list_deployment_for_all_namespaces(field_selector=f"metadata.name={n}").items]


@dataclass
class DeploymentRestart:
    """Scale the named Deployments (found in any namespace) to 0, then back."""

    api: client.ApiClient
    names: tuple[str, ...]
    timeout_s: float
    _replicas: dict[tuple[str, str], int] = field(default_factory=dict)

    def _deployments(self) -> list[client.V1Deployment]:
        found = deployments_named(self.api, self.names)
        if not found:
            raise HarnessError(f"no controller Deployment named {', '.join(self.names)} on this cluster")
        return found

    def _states(self) -> dict[tuple[str, str], tuple[int, int]]:
        """(available replicas, replicas) of each controller Deployment."""
        return {(d.metadata.namespace, d.metadata.name): (d.status.available_replicas or 0, d.status.replicas or 0)
                for d in self._deployments()}

    def _scale(self, replicas: dict[tuple[str, str], int], ready: bool) -> None:
        apps = client.AppsV1Api(self.api)
        for (namespace, name), count in replicas.items():
            apps.patch_namespaced_deployment_scale(name, namespace, {"spec": {"replicas": count}})
        def settled(states: dict[tuple[str, str], tuple[int, int]]) -> bool:
            return all((states[k][0] >= v) if ready else states[k][1] == 0 for k, v in replicas.items())
        states = poll(self._states, settled, self.timeout_s, POLL_S)
        if settled(states):
            return
        raise WaitTimeout(f"controller Deployments {', '.join(self.names)} not {'available' if ready else 'gone'} "
                          f"after {self.timeout_s:.0f}s; last (available, replicas): {states}")

    def stop(self) -> None:
        self._replicas = {(d.metadata.namespace, d.metadata.name): d.spec.replicas or 1 for d in self._deployments()}
        self._scale({k: 0 for k in self._replicas}, ready=False)

    def start(self) -> float:
        started = time.time()
        self._scale(self._replicas, ready=True)
        return started


def controller_restart(target: Any, backend: Any, timeout_s: float) -> ControllerRestart:
    """The way to restart `backend`'s controllers on `target` (the caller checked CONTROLLER_RESTART)."""
    controllers = backend.controllers
    if target.features.own_processes:
        return SimRestart(controllers.sim)
    return DeploymentRestart(target.api, controllers.deployments, timeout_s)

"""A scheduler's releases on the sim, for the upgrade in place (operations.upgrade): the pinned one and the one
before it (sim/versions.toml's `previous`, built by `gpupoc sim build --with upgrade` as binaries of their own).

Replacing one release by another is what Kueue and KubeRay document for an upgrade: the CRDs first (server-side
applied from the release's own module; a CRD only the other release ships is removed), then the controller, started
again on the release's program with the same arguments; Kueue's webhooks registered again from the release's own
manifest. The CRD step can be left out on purpose (the upgrade's sensitivity test).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from harness.core import paths
from harness.core.errors import ConfigError
from harness.sim import cluster, crds, stack
from harness.sim.build import KUBERAY_MODULE, KUEUE_MODULE
from harness.sim.components import binary
from harness.sim.config import ports_from_env
from harness.cluster.apply import served_crds
from harness.cluster.wait import poll
from harness.config.versions import load_pins

# scheduler -> (its process on the sim, its module, the CRD directory in it, the program's name when pinned)
SCHEDULERS = {"kueue": ("kueue", KUEUE_MODULE, "config/components/crd/bases", "kueue"),
              "kuberay": ("kuberay-operator", KUBERAY_MODULE, "config/crd/bases", "ray-operator")}
BUILD_HINT = "gpupoc sim build --with upgrade"
CRD_GONE_S = 30.0


@dataclass(frozen=True)
class Release:
    scheduler: str
    version: str
    program: str  # its binary's name in the sim's bin directory
    pinned: bool

    @property
    def component(self) -> str:
        return SCHEDULERS[self.scheduler][0]

    @property
    def label(self) -> str:
        return f"{self.scheduler} {self.version}"

    def crds(self) -> list[dict[str, Any]]:
        _, module, sub, _ = SCHEDULERS[self.scheduler]
        return crds.cached_documents(module, self.version, sub, paths.build_root())


def releases(scheduler: str) -> tuple[Release, Release]:
    """(the release before the pinned one, the pinned one) of `scheduler`."""
    if scheduler not in SCHEDULERS:
        raise ConfigError(f"no earlier release of {scheduler} is built for the sim (only {', '.join(SCHEDULERS)})")
    pins = load_pins()
    pinned, previous = {"kueue": (pins.kueue, pins.kueue_previous),
                        "kuberay": (pins.kuberay, pins.kuberay_previous)}[scheduler]
    program = SCHEDULERS[scheduler][3]
    return Release(scheduler, previous, f"{program}-previous", False), Release(scheduler, pinned, program, True)


def running(scheduler: str) -> str:
    """The release of `scheduler` the sim runs now, as its state says ('kueue v0.19.2'); '' when its controller is
    not running."""
    name = SCHEDULERS[scheduler][0]
    if not cluster.component_running(name):
        return ""
    state = cluster.recorded_state(cluster.layout())
    return str(state.get("components", {}).get(name, {}).get("version") or "unknown")


def stop(release: Release) -> None:
    cluster.stop_component(release.component, say=lambda _: None)


def start(api: client.ApiClient, release: Release, with_crds: bool = True,
          say: Callable[[str], None] = lambda _: None) -> float:
    """The release's CRDs (unless left out), then its controller on its own program (stopped before by `stop`), then
    Kueue's webhooks of that release; the epoch seconds its controller was started."""
    program = binary(release.program, BUILD_HINT)
    if with_crds:
        apply_crds(api, release)
        say(f"  {release.label}: CRDs applied")
    argv = cluster.component_argv(release.component)
    started = time.time()
    cluster.start_component(release.component, say=lambda _: None, argv=(program, *argv[1:]),
                            version=release.label)
    if release.scheduler == "kueue":
        stack.register_kueue_webhooks(api, cluster.layout(), ports_from_env(), release.version)
    say(f"  {release.label}: controller {release.component} started")
    return started


def apply_crds(api: client.ApiClient, release: Release) -> None:
    """The release's CRDs server-side applied; those the other release ships and this one does not, removed."""
    own = release.crds()
    previous, pinned = releases(release.scheduler)
    other = pinned if release == previous else previous
    names = {c["metadata"]["name"] for c in own}
    extensions = client.ApiextensionsV1Api(api)
    extra = [c["metadata"]["name"] for c in other.crds() if c["metadata"]["name"] not in names]
    for name in extra:
        try:
            extensions.delete_custom_resource_definition(name)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
    if extra:
        left = poll(lambda: list(served_crds(api, extra)), lambda found: not found, CRD_GONE_S, 0.2)
        if left:
            raise ConfigError(f"CRDs {', '.join(left)} not removed after {CRD_GONE_S:.0f} s")
    crds.apply_crds(api, own)


def install(api: client.ApiClient, release: Release, say: Callable[[str], None] = lambda _: None) -> None:
    """The release in place of whatever runs now: its CRDs, its controller (stopped first when running; nothing
    stopped when the release's program is not built)."""
    binary(release.program, BUILD_HINT)
    if cluster.component_running(release.component):
        stop(release)
    start(api, release, say=say)

"""The pinned component versions, read from sim/versions.toml."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import ConfigError
from harness.core.paths import VERSIONS_FILE


@dataclass(frozen=True)
class Pins:
    kubernetes: str
    etcd: str
    kwok: str
    kueue: str
    kueue_previous: str
    volcano: str
    volcano_apis: str
    kuberay: str
    kuberay_previous: str
    kube_state_metrics: str
    kai_scheduler: str
    kai_scheduler_module: str
    karpenter: str
    helm: str
    actionlint: str
    kind: str
    coredns: str

    @property
    def kubernetes_staging(self) -> str:
        """The v0.x.y of the k8s.io staging modules that match kubernetes v1.x.y."""
        return "v0." + self.kubernetes.removeprefix("v1.")


def load_pins(path: Path = VERSIONS_FILE) -> Pins:
    try:
        data = tomllib.loads(path.read_text())
        versions = {name.replace("-", "_"): str(table["version"]) for name, table in data.items()}
        return Pins(**versions, volcano_apis=str(data["volcano"]["apis_version"]),
                    kai_scheduler_module=str(data["kai-scheduler"]["module"]),
                    kueue_previous=str(data["kueue"]["previous"]), kuberay_previous=str(data["kuberay"]["previous"]))
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: cannot read pinned versions ({exc}); every table needs a version, "
                          "[volcano] an apis_version, [kai-scheduler] a module, [kueue] and [kuberay] a previous") from exc

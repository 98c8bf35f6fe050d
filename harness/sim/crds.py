"""CRDs of the scheduler controllers, read from their downloaded Go modules, applied server-side."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from harness.cluster.apply import apply_objects
from harness.core.errors import BuildError
from harness.cluster.wait import wait_for_set

ESTABLISHED_TIMEOUT_S = 60.0


def module_dir(module: str, version: str, cwd: Path) -> Path:
    """The module's source directory in the Go module cache (downloads it through the proxy if needed)."""
    result = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"], cwd=cwd,
                            capture_output=True, text=True)
    info = json.loads(result.stdout or "{}")
    if result.returncode != 0 or "Dir" not in info:
        raise BuildError(f"cannot download {module}@{version}: {info.get('Error', result.stderr.strip())}")
    return Path(info["Dir"])


# libyaml when PyYAML has it: the CRDs of Kueue and KubeRay are megabytes of YAML.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_documents(directory: Path, pattern: str = "*.yaml") -> list[dict[str, Any]]:
    docs = []
    for path in sorted(directory.glob(pattern)):
        docs += [d for d in yaml.load_all(path.read_text(), Loader=SAFE_LOADER) if d]
    return docs


def is_established(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def apply_crds(api: client.ApiClient, crds: list[dict[str, Any]], timeout_s: float = ESTABLISHED_TIMEOUT_S) -> None:
    """Apply server-side, then one watch over all CRDs until every one applied is Established.

    Read through the dynamic client: the typed client's models of these large schemas are slow to build.
    """
    apply_objects(api, crds)
    wanted = {c["metadata"]["name"] for c in crds}
    resource = DynamicClient(api).resources.get(api_version="apiextensions.k8s.io/v1",
                                                kind="CustomResourceDefinition")

    def missing(seen: dict[str, Any]) -> set[str]:
        return {n for n in wanted if n not in seen or not is_established(seen[n].to_dict())}

    wait_for_set(resource.get, "CRDs Established", lambda seen: not missing(seen), timeout_s=timeout_s,
                 describe=lambda seen: f"not Established: {sorted(missing(seen))}")

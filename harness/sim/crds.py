"""CRDs of the scheduler controllers, read from their downloaded Go modules, applied server-side."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from harness.apply import apply_objects
from harness.errors import BuildError
from harness.wait import wait_for

ESTABLISHED_TIMEOUT_S = 60.0


def module_dir(module: str, version: str, cwd: Path) -> Path:
    """The module's source directory in the Go module cache (downloads it through the proxy if needed)."""
    result = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"], cwd=cwd,
                            capture_output=True, text=True)
    info = json.loads(result.stdout or "{}")
    if result.returncode != 0 or "Dir" not in info:
        raise BuildError(f"cannot download {module}@{version}: {info.get('Error', result.stderr.strip())}")
    return Path(info["Dir"])


def load_documents(directory: Path, pattern: str = "*.yaml") -> list[dict[str, Any]]:
    docs = []
    for path in sorted(directory.glob(pattern)):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def is_established(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def apply_crds(api: client.ApiClient, crds: list[dict[str, Any]], timeout_s: float = ESTABLISHED_TIMEOUT_S) -> None:
    apply_objects(api, crds)
    ext = client.ApiextensionsV1Api(api)
    for crd in crds:
        name = crd["metadata"]["name"]
        wait_for(ext.list_custom_resource_definition, f"CRD {name}",
                 lambda c: is_established(api.sanitize_for_serialization(c)), timeout_s=timeout_s,
                 describe=lambda c: str([(x.type, x.status) for x in (c.status.conditions or [])]),
                 field_selector=f"metadata.name={name}")

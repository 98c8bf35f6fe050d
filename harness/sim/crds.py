"""CRDs of the scheduler controllers, read from their downloaded Go modules, applied server-side."""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from harness.cluster.apply import FIELD_MANAGER
from harness.cluster.wait import poll
from harness.core.errors import BuildError, WaitTimeout

ESTABLISHED_TIMEOUT_S = 60.0
APPLY_WORKERS = 8
DISCOVERY_POLL_S = 0.2


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


def cached_documents(module: str, version: str, sub: str, build_root: Path) -> list[dict[str, Any]]:
    """The CRDs under `sub` of a pinned module, parsed once into a JSON file beside the build: a module version's
    files never change, and reading megabytes of YAML (and asking `go` where the module is) cost `sim up` seconds."""
    cache = build_root / "crds" / f"{module.replace('/', '_')}@{version}_{sub.replace('/', '_')}.json"
    try:
        return list(json.loads(cache.read_text()))
    except (OSError, ValueError):
        pass
    docs = load_documents(module_dir(module, version, build_root) / sub)
    cache.parent.mkdir(parents=True, exist_ok=True)
    partial = cache.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(docs))
    partial.replace(cache)  # whole or not at all: two sims starting at once may both write it
    return docs


def served_versions(crds: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """Pure: (group, version, plural) of every version the CRDs serve."""
    return {(c["spec"]["group"], v["name"], c["spec"]["names"]["plural"])
            for c in crds for v in c["spec"]["versions"] if v.get("served")}


def served(api: client.ApiClient, wanted: set[tuple[str, str, str]]) -> set[tuple[str, str, str]]:
    """Those of `wanted`'s group versions that discovery lists: a CRD is listed once it is Established, and
    discovery is what a controller's REST mapper reads."""
    objects = client.CustomObjectsApi(api)
    found: set[tuple[str, str, str]] = set()
    for group, version in {(group, version) for group, version, _ in wanted}:
        try:
            found |= {(group, version, r.name) for r in objects.get_api_resources(group, version).resources}
        except client.ApiException as exc:
            if exc.status != 404:  # not served yet
                raise
    return found


def apply_crds(api: client.ApiClient, crds: list[dict[str, Any]], timeout_s: float = ESTABLISHED_TIMEOUT_S) -> None:
    """Apply server-side, all at once (the API server compiles their schemas and validation rules on every core),
    then poll discovery (a few small documents) until every served version of every CRD is listed.

    The answers are not parsed: the typed and dynamic clients' models of these large schemas take seconds to build.
    """
    extensions = client.ApiextensionsV1Api(api)

    def apply(crd: dict[str, Any]) -> None:
        answer = extensions.patch_custom_resource_definition(
            crd["metadata"]["name"], crd, field_manager=FIELD_MANAGER, force=True,
            _content_type="application/apply-patch+yaml", _preload_content=False)
        answer.read()  # the connection goes back to the pool once the body is read

    with ThreadPoolExecutor(max_workers=APPLY_WORKERS) as pool:
        list(pool.map(apply, crds))
    wanted = served_versions(crds)
    found = poll(lambda: served(api, wanted), lambda seen: wanted <= seen, timeout_s, poll_s=DISCOVERY_POLL_S)
    if not wanted <= found:
        missing = sorted(f"{plural}.{group}/{version}" for group, version, plural in wanted - found)
        raise WaitTimeout(f"CRDs Established: not served after {timeout_s:.0f}s: {', '.join(missing)}")

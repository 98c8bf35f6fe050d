"""The charts kind/up.sh installs, rendered here from the Go modules that ship them.

A kind cluster cannot run on machines without a container runtime; what can be checked without one is that
each chart renders at its pinned version (`helm template`, helm built from its Go module) and that the API
server accepts every rendered object in a server-side dry run. The pure parts (which charts, their values,
splitting and sorting the rendered objects) are apart from the I/O (module download, helm, the API).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import DynamicApiError, NotFoundError, ResourceNotFoundError

from harness.cluster.apply import dynamic_client
from harness.core.errors import BuildError, ConfigError
from harness.core import paths
from harness.config.reference_schedulers import KUEUE_CHART_SETTINGS, VOLCANO_SCHEDULER_CONF, merged
from harness.config.versions import Pins

HELM = "helm"
MANIFESTS = "manifests"
RENDER_TIMEOUT_S = 120
FIELD_MANAGER = "gpupoc-kind-charts"
# Charts put every object into the release's namespace; these are the ones kind/up.sh installs into.
KUEUE_NAMESPACE = "kueue-system"
VOLCANO_NAMESPACE = "volcano-system"
KAI_NAMESPACE = "kai-scheduler"
KUBE_STATE_METRICS_NAMESPACE = "kube-system"  # examples/standard names it in every object


@dataclass(frozen=True)
class ChartSource:
    """One component's install objects: a Helm chart or a folder of plain manifests inside a Go module."""

    name: str
    module: str
    version: str
    path: str  # inside the module
    renderer: str  # HELM or MANIFESTS
    namespace: str
    values: tuple[tuple[str, str], ...] = ()  # helm --set; kind/up.sh passes the same (kind_install_flags)


@dataclass(frozen=True)
class NotChecked:
    name: str
    reason: str


@dataclass
class DryRun:
    """What the API server said about one chart's objects in a server-side dry run."""

    accepted: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)  # of accepted: on the sim already, checked as a replace
    refused: list[str] = field(default_factory=list)  # "Kind ns/name: the server's message"
    unknown_kinds: set[str] = field(default_factory=set)  # not served here (a CRD the sim does not install)
    unnamed: list[str] = field(default_factory=list)  # generateName: server-side apply needs a name

    def not_checked(self) -> str:
        parts = []
        if self.unknown_kinds:
            parts.append(f"kinds the sim does not serve: {', '.join(sorted(self.unknown_kinds))}")
        if self.unnamed:
            parts.append(f"objects without a name (generateName): {', '.join(self.unnamed)}")
        return "; ".join(parts)


def chart_sources(pins: Pins) -> list[ChartSource]:
    """What kind/up.sh installs, at the sim's pins (images named as the released charts name them)."""
    return [
        ChartSource("kueue", "sigs.k8s.io/kueue", pins.kueue, "charts/kueue", HELM, KUEUE_NAMESPACE,
                    (("enablePrometheus", "true"),)),  # its ServiceMonitor, for kube-prometheus-stack
        ChartSource("volcano", "volcano.sh/volcano", pins.volcano, "installer/helm/chart/volcano", HELM,
                    VOLCANO_NAMESPACE, (("basic.image_tag_version", pins.volcano),)),
        ChartSource("kai-scheduler", pins.kai_scheduler_module, pins.kai_scheduler, "deployments/kai-scheduler", HELM,
                    KAI_NAMESPACE, (("global.registry", "ghcr.io/nvidia/kai-scheduler"),
                                    ("global.tag", pins.kai_scheduler))),
        ChartSource("kube-state-metrics", "k8s.io/kube-state-metrics/v2", pins.kube_state_metrics,
                    "examples/standard", MANIFESTS, KUBE_STATE_METRICS_NAMESPACE),
    ]


def not_rendered(pins: Pins) -> list[NotChecked]:
    return [NotChecked("kuberay", f"KubeRay {pins.kuberay} ships kustomize only (ray-operator/config); kind/up.sh "
                                  "installs its Helm chart from the kuberay-helm repository, which no Go module ships")]


def set_flags(source: ChartSource) -> list[str]:
    return [flag for key, value in source.values for flag in ("--set", f"{key}={value}")]


def reference_values(name: str, chart_defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The chart values that give the scheduler the POC's reference configuration (harness/config/
    reference_schedulers.py), over the chart's own defaults (its values.yaml): Kueue's configuration file with the
    reference settings kind takes so far (KUEUE_CHART_SETTINGS) laid over the one the chart ships, Volcano's
    scheduler configuration. None for the others."""
    if name == "kueue":
        manager = chart_defaults["managerConfig"]["controllerManagerConfigYaml"]
        config = merged(yaml.safe_load(manager), KUEUE_CHART_SETTINGS)
        return {"managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(config, sort_keys=False)}}
    if name == "volcano":
        return {"custom": {"scheduler_config_override": VOLCANO_SCHEDULER_CONF}}
    return {}


def helm_template_args(source: ChartSource, chart_dir: Path, kube_version: str, values_file: Path) -> list[str]:
    return ["template", source.name, str(chart_dir), "--namespace", source.namespace,
            "--kube-version", kube_version, "--include-crds", *set_flags(source), "--values", str(values_file)]


def split_documents(text: str) -> list[dict[str, Any]]:
    """The objects of a multi-document YAML stream; empty documents and List wrappers flattened away."""
    objects: list[dict[str, Any]] = []
    for doc in yaml.safe_load_all(text):
        if isinstance(doc, dict) and doc.get("kind", "").endswith("List") and "items" in doc:
            objects += [item for item in doc["items"] if isinstance(item, dict)]
        elif isinstance(doc, dict) and doc:
            objects.append(doc)
    return objects


def manifest_files(folder: Path) -> list[Path]:
    """A plain-manifests folder's objects; its kustomization.yaml is kustomize's, not an object."""
    return sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml") and p.stem != "kustomization")


def namespace_of(obj: Mapping[str, Any], default: str, namespaced: bool) -> str | None:
    if not namespaced:
        return None
    return str(obj.get("metadata", {}).get("namespace") or default)


def namespaces_needed(objects: Iterable[Mapping[str, Any]], default: str) -> set[str]:
    """Every namespace the objects name (or the release's), less the Namespace objects they create themselves."""
    named = {str(o.get("metadata", {}).get("namespace") or default) for o in objects if o.get("kind") != "Namespace"}
    return named - {str(o["metadata"]["name"]) for o in objects if o.get("kind") == "Namespace"}


def kind_label(obj: Mapping[str, Any]) -> str:
    return f"{obj.get('kind')} ({obj.get('apiVersion')})"


def describe(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata", {})
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('kind')} {where}{meta.get('name', '<no name>')}"


# I/O: the module cache and helm.

def module_dir(module: str, version: str) -> Path:
    """module@version's source in the Go module cache (downloaded through the proxy when absent)."""
    build_root = paths.build_root()
    build_root.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"], cwd=build_root,
                            capture_output=True, text=True, timeout=RENDER_TIMEOUT_S)
    info = json.loads(result.stdout or "{}")
    if result.returncode != 0 or "Dir" not in info:
        raise BuildError(f"cannot download {module}@{version}: {info.get('Error', result.stderr.strip())}")
    return Path(info["Dir"])


def helm_binary() -> Path:
    path = paths.bin_dir() / "helm"
    if not path.exists():
        raise ConfigError(f"helm is not built ({path} missing): run `gpupoc sim build --with helm` (or `make build`)")
    return path


def values_file(source: ChartSource, chart_dir: Path) -> Path:
    """The reference values of `source`'s chart, written where kind/up.sh and kind/here.sh read them too."""
    defaults = yaml.safe_load((chart_dir / "values.yaml").read_text()) or {}
    target = paths.gpupoc_home() / "kind" / f"{source.name}-values.yaml"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(reference_values(source.name, defaults), sort_keys=False))
    return target


def kind_install_flags(name: str, pins: Pins) -> list[str]:
    """What kind/up.sh and kind/here.sh install chart `name` with: the --set flags and the reference values file,
    the same that the chart checks render."""
    source = next((s for s in chart_sources(pins) if s.name == name), None)
    if source is None or source.renderer != HELM:
        return []
    chart_dir = module_dir(source.module, source.version) / source.path
    return [*set_flags(source), "--values", str(values_file(source, chart_dir))]


def render(source: ChartSource, kube_version: str) -> list[dict[str, Any]]:
    """The objects of one source as its installer would send them."""
    folder = module_dir(source.module, source.version) / source.path
    if source.renderer == MANIFESTS:
        return [obj for path in manifest_files(folder) for obj in split_documents(path.read_text())]
    args = helm_template_args(source, folder, kube_version, values_file(source, folder))
    result = subprocess.run([str(helm_binary()), *args], capture_output=True, text=True, timeout=RENDER_TIMEOUT_S)
    if result.returncode != 0:
        raise BuildError(f"helm template {source.name} {source.version} failed: {result.stderr.strip()}")
    return split_documents(result.stdout)


# I/O: the API server.

def dry_run_apply(api: client.ApiClient, objects: Iterable[dict[str, Any]], default_namespace: str) -> DryRun:
    """Server-side apply each object with dryRun=All: admission and validation run, nothing is stored."""
    dynamic, outcome = dynamic_client(api), DryRun()
    for obj in objects:
        try:
            resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        except ResourceNotFoundError:
            outcome.unknown_kinds.add(kind_label(obj))
            continue
        if not obj.get("metadata", {}).get("name"):
            outcome.unnamed.append(describe(obj))
            continue
        _dry_run_one(dynamic, resource, obj, namespace_of(obj, default_namespace, resource.namespaced), outcome)
    return outcome


def _dry_run_one(dynamic: DynamicClient, resource: Any, obj: dict[str, Any], namespace: str | None,
                 outcome: DryRun) -> None:
    """A new object: server-side apply. One the sim has already (its CRDs, Kueue's webhook configurations): a
    replace at its resourceVersion, so the chart's object is judged alone, not merged with the sim's fields."""
    name = obj["metadata"]["name"]
    kwargs = {"name": name, "namespace": namespace, "field_manager": FIELD_MANAGER, "dry_run": "All"}
    try:
        existing = _existing(resource, name, namespace)
        if existing is None:
            dynamic.server_side_apply(resource, body=obj, force_conflicts=True, **kwargs)
        else:
            body = {**obj, "metadata": {**obj["metadata"], "resourceVersion": existing.metadata.resourceVersion}}
            dynamic.replace(resource, body=body, **kwargs)
            outcome.replaced.append(describe(obj))
    except DynamicApiError as exc:
        outcome.refused.append(f"{describe(obj)}: {_server_message(exc)}")
        return
    outcome.accepted.append(describe(obj))


def _existing(resource: Any, name: str, namespace: str | None) -> Any:
    try:
        return resource.get(name=name, namespace=namespace)
    except NotFoundError:
        return None


def _server_message(exc: DynamicApiError) -> str:
    try:
        return str(json.loads(exc.body)["message"])
    except (TypeError, ValueError, KeyError):
        return f"{exc.status} {exc.reason}"

"""Accelerator inventory of a cluster, read from the labels each accelerator's discovery puts on nodes (GPU Feature
Discovery for NVIDIA's: harness/config/accelerators.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from harness.config.accelerators import DEFAULT, KNOWN, memory_mib

SIMULATED_LABEL = "gpupoc.io/simulated"
SIMULATED_GPUS_LABEL = "gpupoc.io/simulated-gpus"  # a real kubelet whose devices are simulated (the sim's real nodes)
KWOK_ANNOTATION = "kwok.x-k8s.io/node"  # a node kwok plays: no kubelet, no container runs there


@dataclass(frozen=True)
class NodeGpus:
    node: str
    model: str
    count: int
    memory_mib: int | None
    driver_version: str
    cuda_version: str
    mig_capable: bool | None
    sharing: str
    instance_type: str
    provider: str
    simulated: bool
    kwok: bool = False  # the node is kwok's (scheduling only); else a real kubelet runs its pods
    accelerator: str = DEFAULT.name  # harness/config/accelerators.py's name of it
    resource: str = DEFAULT.resource


def _int_or_none(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


def node_gpus(node: dict[str, Any]) -> NodeGpus | None:
    """The accelerators of one node (a Node as a dict), read by whichever known accelerator it offers (its device
    plugin's resource, else its discovery's count label); None when it has none."""
    labels = node.get("metadata", {}).get("labels") or {}
    capacity = (node.get("status") or {}).get("capacity") or {}
    for accelerator in KNOWN.values():
        found = accelerator.discovery
        count = _int_or_none(str(capacity.get(accelerator.resource, ""))) or _int_or_none(
            labels.get(found.count) if found.count else None)
        if count:
            break
    else:
        return None
    mig = labels.get(found.mig) if found.mig else None
    return NodeGpus(
        node=node["metadata"]["name"], model=labels.get(found.model, "unknown"), count=count,
        memory_mib=memory_mib(labels.get(found.memory) if found.memory else None),
        driver_version=_version(labels, found.driver), cuda_version=_version(labels, found.runtime),
        mig_capable=None if mig is None else mig == "true",
        sharing=labels.get(found.sharing, "none") if found.sharing else "none",
        instance_type=labels.get("node.kubernetes.io/instance-type", "unknown"),
        provider=provider_of(node),
        simulated=labels.get(SIMULATED_LABEL) == "true" or labels.get(SIMULATED_GPUS_LABEL) == "true",
        kwok=KWOK_ANNOTATION in (node.get("metadata", {}).get("annotations") or {}),
        accelerator=accelerator.name, resource=accelerator.resource)


def _version(labels: dict[str, str], alternatives: tuple[tuple[str, ...], ...]) -> str:
    """The first alternative whose labels are there, its parts joined by dots ("unknown": none is)."""
    for keys in alternatives:
        parts = [labels[k] for k in keys if k in labels]
        if parts:
            return ".".join(parts)
    return "unknown"


PROVIDERS = {"aws": "AWS", "gce": "Google Cloud", "azure": "Azure", "oci": "Oracle Cloud", "kind": "kind",
             "gpupoc-sim": "gpupoc sim", "kwok": "kwok"}


def provider_of(node: dict[str, Any]) -> str:
    """Cloud provider from spec.providerID (aws://..., gce://...), else 'unknown'."""
    provider_id = (node.get("spec") or {}).get("providerID") or ""
    scheme = provider_id.split("://", 1)[0] if "://" in provider_id else ""
    return PROVIDERS.get(scheme, scheme or "unknown")


@dataclass(frozen=True)
class DcgmGpu:
    hostname: str
    gpu: str
    model: str
    driver_version: str


def dcgm_gpus(series_labels: list[dict[str, str]]) -> list[DcgmGpu]:
    """GPUs as the DCGM exporter labels its series (modelName, DCGM_FI_DRIVER_VERSION, Hostname, gpu)."""
    seen = {}
    for labels in series_labels:
        key = (labels.get("Hostname", "?"), labels.get("gpu", labels.get("UUID", "?")))
        seen[key] = DcgmGpu(key[0], key[1], labels.get("modelName", "unknown"),
                            labels.get("DCGM_FI_DRIVER_VERSION", "unknown"))
    return list(seen.values())


def cross_check(inventory: list[NodeGpus], dcgm: list[DcgmGpu]) -> list[str]:
    """Where node labels and DCGM disagree on a node's GPU model or driver (spaces vs dashes ignored)."""
    by_node = {g.node: g for g in inventory}
    problems = []
    for gpu in dcgm:
        labelled = by_node.get(gpu.hostname)
        if labelled is None:
            continue
        if gpu.model.replace(" ", "-") != labelled.model.removesuffix("-SHARED"):
            problems.append(f"{gpu.hostname} gpu {gpu.gpu}: DCGM says {gpu.model}, labels say {labelled.model}")
        if gpu.driver_version not in ("unknown", labelled.driver_version):
            problems.append(f"{gpu.hostname} gpu {gpu.gpu}: DCGM driver {gpu.driver_version}, "
                            f"labels say {labelled.driver_version}")
    return problems


def gpu_inventory(nodes: list[dict[str, Any]]) -> list[NodeGpus]:
    return [g for n in nodes if (g := node_gpus(n)) is not None]


def cluster_inventory(api: client.ApiClient) -> list[NodeGpus]:
    """The GPU nodes of the cluster `api` reaches, every node read once (as JSON: no client models built)."""
    response = client.CoreV1Api(api).list_node(_preload_content=False)
    return gpu_inventory(json.loads(response.data).get("items", []))


def format_inventory(inventory: list[NodeGpus]) -> str:
    header = (f"{'NODE':<14} {'GPU MODEL':<24} {'COUNT':>5} {'MEMORY MiB':>10} {'DRIVER':<11} {'CUDA':<5} "
              f"{'MIG':<5} {'SHARING':<8} {'PROVIDER':<12} {'INSTANCE TYPE':<30} SIMULATED")
    rows = [f"{g.node:<14} {g.model:<24} {g.count:>5} {g.memory_mib or '?':>10} {g.driver_version:<11} "
            f"{g.cuda_version:<5} {str(g.mig_capable).lower():<5} {g.sharing:<8} {g.provider:<12} "
            f"{g.instance_type:<30} {'yes' if g.simulated else 'no'}" for g in inventory]
    total = sum(g.count for g in inventory)
    return "\n".join([header, *rows, f"{len(inventory)} GPU node(s), {total} GPU(s)"])

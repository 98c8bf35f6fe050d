"""GPU inventory of a cluster, read from the labels GPU Feature Discovery puts on nodes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GPU_RESOURCE = "nvidia.com/gpu"
SIMULATED_LABEL = "gpupoc.io/simulated"


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
    simulated: bool


def _int_or_none(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


def node_gpus(node: dict[str, Any]) -> NodeGpus | None:
    """GPUs of one node (a Node as a dict); None when it has no GPU."""
    labels = node.get("metadata", {}).get("labels") or {}
    capacity = (node.get("status") or {}).get("capacity") or {}
    count = _int_or_none(str(capacity.get(GPU_RESOURCE, ""))) or _int_or_none(labels.get("nvidia.com/gpu.count"))
    if not count:
        return None
    driver = labels.get("nvidia.com/cuda.driver-version.full") or ".".join(
        labels[k] for k in ("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor",
                            "nvidia.com/cuda.driver.rev") if k in labels)
    cuda = labels.get("nvidia.com/cuda.runtime-version.full") or ".".join(
        labels[k] for k in ("nvidia.com/cuda.runtime-version.major", "nvidia.com/cuda.runtime-version.minor")
        if k in labels)
    mig = labels.get("nvidia.com/mig.capable")
    return NodeGpus(
        node=node["metadata"]["name"], model=labels.get("nvidia.com/gpu.product", "unknown"), count=count,
        memory_mib=_int_or_none(labels.get("nvidia.com/gpu.memory")), driver_version=driver or "unknown",
        cuda_version=cuda or "unknown", mig_capable=None if mig is None else mig == "true",
        sharing=labels.get("nvidia.com/gpu.sharing-strategy", "none"),
        instance_type=labels.get("node.kubernetes.io/instance-type", "unknown"),
        simulated=labels.get(SIMULATED_LABEL) == "true")


def gpu_inventory(nodes: list[dict[str, Any]]) -> list[NodeGpus]:
    return [g for n in nodes if (g := node_gpus(n)) is not None]


def format_inventory(inventory: list[NodeGpus]) -> str:
    header = f"{'NODE':<14} {'GPU MODEL':<24} {'COUNT':>5} {'MEMORY MiB':>10} {'DRIVER':<11} {'CUDA':<5} {'MIG':<5} SIMULATED"
    rows = [f"{g.node:<14} {g.model:<24} {g.count:>5} {g.memory_mib or '?':>10} {g.driver_version:<11} "
            f"{g.cuda_version:<5} {str(g.mig_capable).lower():<5} {'yes' if g.simulated else 'no'}"
            for g in inventory]
    total = sum(g.count for g in inventory)
    return "\n".join([header, *rows, f"{len(inventory)} GPU node(s), {total} GPU(s)"])

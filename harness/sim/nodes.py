"""Simulated GPU nodes: Node objects with GPU capacity and GPU Feature Discovery labels."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from typing import Any

from kubernetes import client, watch

from harness.core.errors import WaitTimeout
from harness.sim import dra
from harness.sim.config import GpuSpec

NODE_NAME_PREFIX = "gpu-node-"
from harness.config.accelerators import NVIDIA, named
from harness.cluster.inventory import SIMULATED_LABEL as SIMULATED_LABEL  # one home: the inventory reads it too
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
NODE_CPU = "128"
NODE_MEMORY = "1024Gi"
NODE_PODS = "110"
NODE_READY_TIMEOUT_S = 60.0
GPU_RESOURCE = NVIDIA.resource  # the sim plays NVIDIA's device plugin
# Where each node sits, as NVIDIA's Topograph labels real nodes (profiles/sim.yaml's gpu.topology names the same
# keys): NODES_PER_LEAF nodes under a leaf switch, LEAVES_PER_SPINE leaves under a spine, each HGX node its own NVLink
# domain. The reference sim's 4 nodes: one spine, two leaves of two nodes.
SPINE, LEAF, ACCELERATOR = (f"network.topology.nvidia.com/{level}" for level in ("spine", "leaf", "accelerator"))
NODES_PER_LEAF, LEAVES_PER_SPINE = 2, 2


def gfd_labels(gpu: GpuSpec) -> dict[str, str]:
    """The node labels NVIDIA GPU Feature Discovery sets for this GPU."""
    d_major, d_minor, d_rev = gpu.driver_version.split(".")
    c_major, c_minor = gpu.cuda_version.split(".")
    model = gpu.model
    return {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": gpu.product,
        "nvidia.com/gpu.count": str(gpu.count),
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.memory": str(gpu.memory),
        "nvidia.com/gpu.family": model.family,
        "nvidia.com/gpu.compute.major": str(model.compute[0]),
        "nvidia.com/gpu.compute.minor": str(model.compute[1]),
        "nvidia.com/cuda.driver-version.major": d_major,
        "nvidia.com/cuda.driver-version.minor": d_minor,
        "nvidia.com/cuda.driver-version.revision": d_rev,
        "nvidia.com/cuda.driver-version.full": gpu.driver_version,
        "nvidia.com/cuda.runtime-version.major": c_major,
        "nvidia.com/cuda.runtime-version.minor": c_minor,
        "nvidia.com/cuda.runtime-version.full": gpu.cuda_version,
        "nvidia.com/mig.capable": str(model.mig_capable).lower(),
    }


def topology_labels(name: str) -> dict[str, str]:
    """The node's spine, leaf and NVLink domain, from its number (gpu-node-<i>)."""
    index = int(name.removeprefix(NODE_NAME_PREFIX))
    leaf = index // NODES_PER_LEAF
    return {SPINE: f"spine-{leaf // LEAVES_PER_SPINE}", LEAF: f"leaf-{leaf}", ACCELERATOR: f"nvl-{index}"}


def discovery_labels(gpu: GpuSpec) -> dict[str, str]:
    """The node labels the accelerator's discovery sets: GPU Feature Discovery's whole set for NVIDIA's, the model,
    memory and driver for another vendor's (harness/config/accelerators.py names them)."""
    accelerator = named(gpu.accelerator)
    if accelerator is NVIDIA:
        return gfd_labels(gpu)
    found = accelerator.discovery
    labels = {found.model: gpu.product, found.driver[0][0]: gpu.driver_version}
    if found.memory:
        labels[found.memory] = f"{gpu.memory // 1024}G"  # the size the AMD labeller and Ascend's plugin write
    if found.count:
        labels[found.count] = str(gpu.count)
    return labels


def node_manifest(name: str, gpu: GpuSpec) -> dict[str, Any]:
    """A Node the kwok controller manages, with capacity that survives its initialize stage."""
    resources = {"cpu": NODE_CPU, "memory": NODE_MEMORY, "pods": NODE_PODS,
                 "ephemeral-storage": "10Ti", named(gpu.accelerator).resource: str(gpu.count)}
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "node.kubernetes.io/instance-type": f"sim-{gpu.product.lower()}-x{gpu.count}",
              "type": "kwok", SIMULATED_LABEL: "true", **discovery_labels(gpu), **topology_labels(name)}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": {KWOK_ANNOTATION: "fake"}},
        "spec": {"providerID": f"gpupoc-sim://{name}"},
        "status": {"capacity": resources, "allocatable": resources},
    }


def next_node_names(existing: Iterable[str], count: int) -> list[str]:
    taken = [int(m.group(1)) for n in existing if (m := re.fullmatch(rf"{NODE_NAME_PREFIX}(\d+)", n))]
    start = max(taken, default=-1) + 1
    return [f"{NODE_NAME_PREFIX}{i}" for i in range(start, start + count)]


def is_node_ready(node: Any) -> bool:
    conditions = (node.status.conditions if node.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def simulated_node_names(core: client.CoreV1Api) -> list[str]:
    nodes = core.list_node(label_selector=f"{SIMULATED_LABEL}=true").items
    return sorted((n.metadata.name for n in nodes), key=lambda n: (len(n), n))


def add_nodes(core: client.CoreV1Api, count: int, gpu: GpuSpec, dra_devices: bool = True) -> list[str]:
    """`count` more simulated GPU nodes; with `dra_devices`, their GPUs also published as DRA devices (harness/sim/
    dra.py; the scale scenario's thousand nodes go without)."""
    names = next_node_names(simulated_node_names(core), count)
    created = [core.create_node(node_manifest(name, gpu)) for name in names]
    if dra_devices and gpu.accelerator == NVIDIA.name:  # the sim plays NVIDIA's DRA driver only
        dra.publish(core.api_client, [(n.metadata.name, n.metadata.uid) for n in created], gpu)
    return names


def remove_nodes(core: client.CoreV1Api, names: Iterable[str]) -> list[str]:
    removed = []
    for name in names:
        node = core.read_node(name)
        if (node.metadata.labels or {}).get(SIMULATED_LABEL) != "true":
            raise ValueError(f"node {name} is not a simulated node; gpupoc only removes nodes it created")
        core.delete_node(name)
        removed.append(name)
    return removed


def wait_nodes_ready(core: client.CoreV1Api, names: Iterable[str], timeout_s: float = NODE_READY_TIMEOUT_S,
                     say: Callable[[str], None] = lambda _: None,
                     label_selector: str = f"{SIMULATED_LABEL}=true", hint: str = "is the kwok controller running?"
                     ) -> float:
    """Watch Nodes (those of `label_selector`) until every one of `names` is Ready; return the seconds it took."""
    started = time.monotonic()
    pending = set(names)
    listing = core.list_node(label_selector=label_selector)
    pending -= {n.metadata.name for n in listing.items if is_node_ready(n)}
    last_seen: dict[str, str] = {}
    stream = watch.Watch()
    while pending:
        remaining = timeout_s - (time.monotonic() - started)
        if remaining <= 0:
            raise WaitTimeout(f"nodes not Ready after {timeout_s:.0f}s: {', '.join(sorted(pending))}; "
                              f"last seen: {last_seen or 'no status update'} ({hint})")
        for event in stream.stream(core.list_node, label_selector=label_selector,
                                   resource_version=listing.metadata.resource_version,
                                   timeout_seconds=max(1, int(remaining))):
            node = event["object"]
            listing.metadata.resource_version = node.metadata.resource_version
            last_seen[node.metadata.name] = "Ready" if is_node_ready(node) else "NotReady"
            if is_node_ready(node):
                pending.discard(node.metadata.name)
            if not pending:
                stream.stop()
                break
    say(f"{len(last_seen) or 'all'} node(s) Ready")
    return time.monotonic() - started

"""The sim's autoscaler: Karpenter with its kwok provider, and the GPU NodePool it scales.

Karpenter (sigs.k8s.io/karpenter, package kwok) is the real autoscaler: it reads pods the scheduler marked
unschedulable, simulates where they fit, and creates NodeClaims; its kwok provider turns each into a Node object
annotated for kwok, which the sim's kwok then runs. Empty nodes it removes after the NodePool's consolidateAfter.
The NodePool's nodes are tainted, so only pods that tolerate the taint (the profile's gpu.autoscaled) make it add
nodes: the other suites' pods, left unschedulable on purpose, never do. Its nodes carry the simulated label.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client

from harness.cluster.apply import apply_objects
from harness.sim.components import Component, Layout, binary
from harness.sim.config import GpuSpec, Ports
from harness.sim.nodes import GPU_RESOURCE, NODE_CPU, NODE_MEMORY, NODE_PODS, SIMULATED_LABEL, gfd_labels

# Short on purpose: the kwok provider names a node kwok-<NodeClaim: pool-xxxxx>-<silly name, up to 22>-<count>-
# <10 alphanumerics>-<uint32>, and KAI labels each BindRequest with its node's name, which a label value caps at
# 63 characters. A 14-character pool name gave 55-70 (KAI never bound the elasticity gang in 2 of 5 make poc runs:
# `BindRequest ... metadata.labels: must be no more than 63 bytes`, its scheduler's log).
POOL = "gpu"
LABEL_VALUE_MAX = 63


def longest_node_name(pool: str, nodeclaims: int = 999) -> int:
    """Pure: the longest name the kwok provider gives a node of `pool` while it has made at most `nodeclaims`
    (sigs.k8s.io/karpenter/kwok: cloudprovider.go's node name, utils.RandomName, go-randomdata's 11-letter words)."""
    return len("kwok-") + len(pool) + len("-xxxxx") + 1 + 22 + 1 + len(str(nodeclaims)) + 1 + 10 + 1 + 10
POOL_TAINT = {"key": GPU_RESOURCE, "value": "present", "effect": "NoSchedule"}  # as GKE and EKS GPU pools have
POOL_NODES = 4            # the NodePool's GPU limit: this many nodes of the sim's GPUs
CONSOLIDATE_AFTER = "5s"  # an empty node goes this long after its last pod (Karpenter's default is 0s)
ZONE = "sim-zone-a"
PRICE_PER_NODE_HOUR = 98.32  # an 8-GPU H100 node on demand; Karpenter picks the cheapest offering that fits
NODEPOOLS = ("karpenter.sh", "v1", "nodepools")
NODECLAIMS = ("karpenter.sh", "v1", "nodeclaims")
POOL_LABEL = "karpenter.sh/nodepool"  # Karpenter's label on the nodes of a NodePool
INSTANCE_TYPES_FILE = "karpenter-instance-types.json"


def instance_type(gpu: GpuSpec) -> str:
    return f"sim-{gpu.product.lower()}-x{gpu.count}"


def instance_types(gpu: GpuSpec) -> list[dict[str, Any]]:
    """The kwok provider's catalogue (its INSTANCE_TYPES_FILE_PATH format): one GPU node type, on demand, one zone."""
    resources = {"cpu": NODE_CPU, "memory": NODE_MEMORY, "pods": NODE_PODS, "ephemeral-storage": "10Ti",
                 GPU_RESOURCE: str(gpu.count)}
    offering = {"Price": PRICE_PER_NODE_HOUR, "Available": True, "Requirements": [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [ZONE]}]}
    return [{"name": instance_type(gpu), "architecture": "amd64", "operatingSystems": ["linux"],
             "resources": resources, "offerings": [offering]}]


def write_config(layout: Layout, gpu: GpuSpec) -> None:
    (layout.root / INSTANCE_TYPES_FILE).write_text(json.dumps(instance_types(gpu), indent=1))


def component(layout: Layout, ports: Ports, version: str) -> Component:
    """Karpenter out of cluster: the sim's kubeconfig, leader election off, its batch window short (a cloud's
    default 10 s of collecting pods is not what this measures), metrics and health on the sim's ports."""
    env = (("KUBECONFIG", str(layout.component_kubeconfig("karpenter"))), ("DISABLE_LEADER_ELECTION", "true"),
           ("METRICS_PORT", str(ports.karpenter_metrics)), ("HEALTH_PROBE_PORT", str(ports.karpenter_health)),
           ("INSTANCE_TYPES_FILE_PATH", str(layout.root / INSTANCE_TYPES_FILE)),
           ("BATCH_MAX_DURATION", "2s"), ("BATCH_IDLE_DURATION", "500ms"), ("LOG_LEVEL", "info"))
    return Component("karpenter", (binary("karpenter-kwok", "gpupoc sim build --with karpenter"),),
                     f"http://127.0.0.1:{ports.karpenter_health}/readyz", ports.karpenter_health,
                     known_version=f"karpenter {version}", env=env)


def pool_objects(gpu: GpuSpec) -> list[dict[str, Any]]:
    """The KWOKNodeClass and the NodePool: the sim's GPU nodes, GPU Feature Discovery labels and all, up to
    POOL_NODES of them, tainted for GPU pods, removed CONSOLIDATE_AFTER after they are empty (all at once)."""
    labels = {SIMULATED_LABEL: "true", **gfd_labels(gpu)}
    return [
        {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass",
         "metadata": {"name": POOL, "labels": {SIMULATED_LABEL: "true"}}},
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
         "metadata": {"name": POOL, "labels": {SIMULATED_LABEL: "true"}},
         "spec": {
             "template": {
                 "metadata": {"labels": labels},
                 "spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": POOL},
                          "taints": [POOL_TAINT], "expireAfter": "Never",
                          "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                            "values": [instance_type(gpu)]}]}},
             "limits": {GPU_RESOURCE: str(POOL_NODES * gpu.count)},
             # every empty node at once (Karpenter's default budget, 10 % of the pool's nodes, removes them one a
             # command, 25 s apart here)
             "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": CONSOLIDATE_AFTER,
                            "budgets": [{"nodes": "100%"}]}}},
    ]


def create_pool(api: client.ApiClient, gpu: GpuSpec) -> None:
    apply_objects(api, pool_objects(gpu))


def patch_pool(api: client.ApiClient, spec: dict[str, Any]) -> None:
    """Merge `spec` into the NodePool's (the sensitivity tests: its GPU limit, its consolidateAfter)."""
    group, version, plural = NODEPOOLS
    client.CustomObjectsApi(api).patch_cluster_custom_object(group, version, plural, POOL, {"spec": spec})


def remove_pool_nodes(api: client.ApiClient) -> None:
    """Delete the pool's NodeClaims: Karpenter drains and removes their nodes at once, not after consolidateAfter
    (a sensitivity test's clean-up)."""
    group, version, plural = NODECLAIMS
    client.CustomObjectsApi(api).delete_collection_cluster_custom_object(
        group, version, plural, label_selector=f"{POOL_LABEL}={POOL}")

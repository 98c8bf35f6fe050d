"""The profile's topology as each scheduler's own objects, made by `gpupoc setup` beside the queue model: Volcano's
HyperNodes (the network-topology-aware plugin reads them), from the levels' node labels on the cluster's nodes.
Kueue's Topology and flavor come with its queues (manifests/setup/kueue.yaml.j2); kube-scheduler's gang reads the
node label itself."""

from __future__ import annotations

import re
from typing import Any

from harness.config.profile import HOSTNAME, Topology

HYPERNODE_API = "topology.volcano.sh/v1alpha1"


def hypernode_name(level: str, value: str) -> str:
    """A DNS name for a domain: gpupoc-<level's last word>-<value>."""
    word = level.rsplit("/", 1)[-1]
    return re.sub(r"[^a-z0-9-]+", "-", f"gpupoc-{word}-{value}".lower()).strip("-")[:253]


def hypernodes(topology: Topology, nodes: list[dict[str, Any]], labels: dict[str, str]) -> list[dict[str, Any]]:
    """Pure: a HyperNode per domain of each switch level, tier 1 the nearest the nodes: its members the nodes of
    that label's value (labelMatch, so a node labelled later joins), a higher tier's the HyperNodes below it."""
    switches = [level for level in topology.levels if level != HOSTNAME]
    found: list[dict[str, Any]] = []
    below: str | None = None
    for level in reversed(switches):
        tier = topology.tier(level)
        values = sorted({n["metadata"]["labels"][level] for n in nodes if level in n["metadata"].get("labels", {})})
        for value in values:
            if below is None:
                members = [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {level: value}}}}]
            else:
                children = sorted({hypernode_name(below, n["metadata"]["labels"][below]) for n in nodes
                                   if n["metadata"].get("labels", {}).get(level) == value
                                   and below in n["metadata"]["labels"]})
                members = [{"type": "HyperNode", "selector": {"exactMatch": {"name": child}}} for child in children]
            if members:
                found.append({"apiVersion": HYPERNODE_API, "kind": "HyperNode",
                              "metadata": {"name": hypernode_name(level, value), "labels": dict(labels)},
                              "spec": {"tier": tier, "members": members}})
        below = level
    return found

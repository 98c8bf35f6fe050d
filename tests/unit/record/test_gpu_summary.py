"""The environment line says which GPUs are simulated and which nodes are kwok's or real kubelets."""

from __future__ import annotations

from dataclasses import asdict

from harness.cluster.inventory import node_gpus
from harness.record.verdict import gpu_summary


def node(name: str, labels: dict[str, str], kwok: bool) -> dict[str, object]:
    return {"metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "H100", **labels},
                         "annotations": {"kwok.x-k8s.io/node": "fake"} if kwok else {}},
            "status": {"capacity": {"nvidia.com/gpu": "4"}}}


def test_the_sims_real_nodes_are_real_kubelets_with_simulated_gpus() -> None:
    found = [node_gpus(n) for n in (node("kwok-0", {"gpupoc.io/simulated": "true"}, kwok=True),
                                    node("real-node-0", {"gpupoc.io/simulated-gpus": "true"}, kwok=False))]
    nodes = [asdict(g) for g in found if g is not None]
    assert [(n["simulated"], n["kwok"]) for n in nodes] == [(True, True), (True, False)]
    assert gpu_summary(nodes).startswith("8 × H100 (2 nodes, simulated; 1 kwok, 1 real kubelet)")


def test_a_real_cluster_says_real() -> None:
    found = node_gpus(node("gpu-0", {}, kwok=False))
    assert found is not None and gpu_summary([asdict(found)]).startswith("4 × H100 (1 node, real)")

"""The suites run unchanged on another vendor's accelerator (issue 45): a profile naming `gpu.accelerator: ascend`,
on simulated Ascend nodes (huawei.com/Ascend910, the Ascend device plugin's labels) added beside the sim's NVIDIA
ones, which offer none of it. Gang admission on Volcano (which schedules Ascend NPUs on real clusters), queue fairness
and quota on Kueue (its ClusterQueues then cover the NPU's resource): each passes, every pod of theirs asked for the
NPU (so only an Ascend node could take it), and the record's inventory lists the Ascend nodes by their own resource
and model. (Volcano's fairness needed a second run, pooled, in make poc and on the dev sim, 2026-12-07: 40 s more.)"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from harness.config.accelerators import ASCEND
from harness.core.paths import REPO_ROOT
from harness.record.model import load_record
from tests.suites.test_training_sensitivity import KUBERNETES_QUEUES, gpupoc, profile_variant

NPU_NODES = 4
CASES = ("suites/training/test_gang_admission.py::test_gang_admission[volcano]",
         "suites/training/test_queue_fairness.py::test_queue_fairness[kueue]",
         "suites/governance/test_quota.py::test_quota[kueue]")


@pytest.fixture()
def ascend_nodes(sim_api: client.ApiClient) -> Iterator[list[str]]:
    """NPU_NODES simulated Ascend 910B3 nodes, removed afterwards (the reference queue model put back)."""
    before = {n.metadata.name for n in client.CoreV1Api(sim_api).list_node().items}
    gpupoc("sim", "nodes", "add", "--count", str(NPU_NODES), "--accelerator", ASCEND.name, "--gpu-product", "910B3",
           "--driver-version", "24.1.rc2")
    added = sorted({n.metadata.name for n in client.CoreV1Api(sim_api).list_node().items} - before)
    try:
        yield added
    finally:
        gpupoc("sim", "nodes", "remove", *added)
        gpupoc("setup", KUBERNETES_QUEUES)


def on_ascend(data: dict[str, object]) -> None:
    gpu = data["gpu"]
    assert isinstance(gpu, dict)
    for key in ("resource", "dra", "autoscaled", "topology"):  # NVIDIA's DRA driver, pool and topology labels
        gpu.pop(key, None)
    gpu["accelerator"] = ASCEND.name


def test_gang_fairness_and_quota_pass_unchanged_on_ascend_npus(tmp_path: Path, sim_api: client.ApiClient,
                                                                 ascend_nodes: list[str]) -> None:
    profile = profile_variant(tmp_path, on_ascend)
    gpupoc("setup", "--backends=kueue,volcano", f"--profile={profile}")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs", *CASES,
                             f"--profile={profile}", "--queue-model=keep", "--run-id=ascend",
                             f"--reports-dir={tmp_path}"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    record = load_record(tmp_path / "ascend" / "record.json")
    outcomes = sorted((r.criterion, r.backend, r.outcome) for r in record.results)
    assert outcomes == [("governance.quota", "kueue", "PASS"), ("training.gang_admission", "volcano", "PASS"),
                        ("training.queue_fairness", "kueue", "PASS")], result.stdout[-3000:]
    bodies = json.dumps([r.samples for r in record.results])
    assert ASCEND.resource in bodies and "nvidia.com/gpu" not in bodies, bodies[:2000]  # only Ascend's nodes offer it
    npus = [n for n in record.nodes if n.get("resource") == ASCEND.resource]
    assert {n.get("model") for n in npus} == {"910B3"} and len(npus) == NPU_NODES, record.nodes

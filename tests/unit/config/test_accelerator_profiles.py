"""Accelerators are data (harness/config/accelerators.py): no vendor's resource or discovery label is spelled
anywhere else in harness/ or suites/, and the inventory, the probes and the profile read them from there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from harness.cluster.inventory import node_gpus
from harness.config import accelerators
from harness.config.accelerators import AMD, ASCEND, NVIDIA, memory_mib
from harness.config.profile import load_profile
from harness.core.errors import ConfigError
from harness.core.paths import REPO_ROOT

HOME = REPO_ROOT / "harness" / "config" / "accelerators.py"
# the sim stands in for NVIDIA's device plugin, GPU Feature Discovery and DRA driver (harness/sim/nodes.py, dra.py)
SIM = REPO_ROOT / "harness" / "sim"
VENDOR = re.compile(r"\b(?:nvidia|amd|huawei)\.com/|\bnode\.kubernetes\.io/npu\.|\bmind-cluster/")


def test_no_vendor_resource_or_label_outside_the_accelerators_module() -> None:
    found = []
    for root in ("harness", "suites"):
        for path in sorted((REPO_ROOT / root).rglob("*.py")):
            if path == HOME or SIM in path.parents:
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if VENDOR.search(line):
                    found.append(f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def node(labels: dict[str, str], capacity: dict[str, str]) -> dict[str, object]:
    return {"metadata": {"name": "n0", "labels": labels}, "status": {"capacity": capacity}}


def test_each_accelerator_is_read_by_its_own_resource_and_labels() -> None:
    nvidia = node({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559",
                   "nvidia.com/cuda.driver-version.full": "550.90.07"}, {NVIDIA.resource: "8"})
    amd = node({"amd.com/gpu.product-name": "Instinct_MI300X", "amd.com/gpu.vram": "192G"}, {AMD.resource: "8"})
    ascend = node({"node.kubernetes.io/npu.chip.name": "910B3", "mind-cluster/npu-chip-memory": "64G",
                   "huawei.com/driver.version": "24.1.rc2"}, {ASCEND.resource: "8"})
    read = [node_gpus(n) for n in (nvidia, amd, ascend)]
    assert [(g.accelerator, g.model, g.count, g.memory_mib, g.driver_version) for g in read if g] == [
        ("nvidia", "NVIDIA-H100-80GB-HBM3", 8, 81559, "550.90.07"),
        ("amd", "Instinct_MI300X", 8, 192 * 1024, "unknown"),
        ("ascend", "910B3", 8, 64 * 1024, "24.1.rc2")]
    assert node_gpus(node({}, {"cpu": "8"})) is None


def test_memory_labels_in_mib_or_with_a_unit() -> None:
    assert [memory_mib(v) for v in ("81559", "64G", "512M", "", None, "lots")] == [81559, 65536, 512, None, None,
                                                                                    None]


def test_each_probe_reads_its_tools_output() -> None:
    assert NVIDIA.parse_probe("name, driver_version, memory.total [MiB]\nNVIDIA H100 80GB HBM3, 550.90.07, "
                              "81559 MiB\n") == [("NVIDIA H100 80GB HBM3", "550.90.07", "81559 MiB")]
    assert AMD.parse_probe('[{"gpu": 0, "asic": {"market_name": "MI300X"}, "driver": {"name": "amdgpu", '
                           '"version": "6.10.5"}, "vram": {"type": "HBM", "size": {"value": 196592, "unit": '
                           '"MB"}}}]') == [("MI300X", "6.10.5", "196592 MB")]
    assert ASCEND.parse_probe("Chip Name : 910B3\nSoftware Version : 24.1.rc2\nHBM Capacity(MB) : 65536\n") == [
        ("910B3", "24.1.rc2", "65536 MB")]
    assert AMD.parse_probe("not json") == [] and ASCEND.parse_probe("") == []
    assert [a.probe_tool for a in (NVIDIA, AMD, ASCEND)] == ["nvidia-smi", "amd-smi", "npu-smi"]


def test_the_profile_names_its_accelerator_and_the_resource_follows(tmp_path: Path) -> None:
    data = yaml.safe_load((REPO_ROOT / "profiles" / "sim.yaml").read_text())
    assert load_profile(REPO_ROOT / "profiles" / "sim.yaml").gpu.accelerator is accelerators.DEFAULT
    del data["gpu"]["resource"], data["gpu"]["dra"], data["gpu"]["autoscaled"]
    data["gpu"]["accelerator"] = "ascend"
    (tmp_path / "ascend.yaml").write_text(yaml.safe_dump(data))
    profile = load_profile(tmp_path / "ascend.yaml")
    assert (profile.gpu.accelerator, profile.gpu.resource) == (ASCEND, "huawei.com/Ascend910")
    data["gpu"]["accelerator"] = "tpu"
    (tmp_path / "tpu.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="'tpu': not a known accelerator"):
        load_profile(tmp_path / "tpu.yaml")

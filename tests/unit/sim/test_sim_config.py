"""Pure parts of the sim: flag validation, node objects, GFD labels, rendered files, build recipes."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.core.errors import ConfigError
from harness.cluster.inventory import gpu_inventory
from harness.sim import build, files
from harness.sim.config import GpuSpec, Ports, SimConfig
from harness.sim.nodes import node_manifest, next_node_names
from harness.config.versions import load_pins


def exit_code(argv: list[str]) -> int | str | None:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's own errors
        return exc.code


@pytest.mark.parametrize("argv, message", [
    (["sim", "up", "--nodes", "-1"], "--nodes must be 0 or more, got -1"),
    (["sim", "up", "--gpus-per-node", "0"], "--gpus-per-node must be at least 1"),
    (["sim", "up", "--driver-version", "550"], "expected MAJOR.MINOR.REVISION"),
    (["sim", "up", "--gpu-product", "NVIDIA H100"], "GFD form with dashes"),
    (["sim", "up", "--nodes", "four"], "invalid int value: 'four'"),
    (["sim", "up", "--unknown"], "unrecognized arguments: --unknown"),
    (["sim", "up", "--accelerator", "ascend"], "sim up plays NVIDIA's GPUs; add ascend nodes beside them with: "
                                               "gpupoc sim nodes add --count N --accelerator ascend"),
    (["sim", "up", "--accelerator", "tpu"], "invalid choice: 'tpu'"),
])
def test_bad_flags_exit_2_with_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_port_base_out_of_range() -> None:
    with pytest.raises(ConfigError, match="between 1024 and 65000"):
        Ports(80)


def test_node_manifest_has_gpu_capacity_gfd_labels_and_kwok_annotation() -> None:
    gpu = GpuSpec(count=4, product="NVIDIA-A100-SXM4-80GB", driver_version="535.161.08", cuda_version="12.2")
    node = node_manifest("gpu-node-3", gpu)
    labels = node["metadata"]["labels"]
    assert node["metadata"]["annotations"] == {"kwok.x-k8s.io/node": "fake"}
    assert node["status"]["capacity"]["nvidia.com/gpu"] == "4"
    assert node["status"]["allocatable"] == node["status"]["capacity"]
    assert labels["gpupoc.io/simulated"] == "true"
    assert labels["nvidia.com/gpu.family"] == "ampere"
    assert labels["nvidia.com/gpu.memory"] == "81920"
    assert (labels["nvidia.com/cuda.driver-version.major"], labels["nvidia.com/cuda.driver-version.minor"],
            labels["nvidia.com/cuda.driver-version.revision"]) == ("535", "161", "08")
    assert (labels["nvidia.com/cuda.runtime-version.major"], labels["nvidia.com/cuda.runtime-version.minor"]) \
        == ("12", "2")


def test_inventory_reads_back_what_the_node_manifest_says() -> None:
    [gpus] = gpu_inventory([node_manifest("gpu-node-0", GpuSpec())])
    assert (gpus.model, gpus.count, gpus.memory_mib, gpus.driver_version, gpus.cuda_version, gpus.simulated) == \
        ("NVIDIA-H100-80GB-HBM3", 8, 81559, "550.90.07", "12.4", True)


def test_a_mixed_sim_is_read_whole_each_node_by_its_own_accelerator() -> None:
    """NVIDIA's nodes beside Ascend's and AMD's: each with its vendor's resource and discovery labels, read back."""
    read = gpu_inventory([node_manifest("gpu-node-0", GpuSpec()),
                          node_manifest("gpu-node-1", GpuSpec(product="910B3", driver_version="24.1.rc2",
                                                              accelerator="ascend")),
                          node_manifest("gpu-node-2", GpuSpec(count=4, product="Instinct_MI300X",
                                                              driver_version="6.10.5", accelerator="amd"))])
    assert [(g.accelerator, g.resource, g.model, g.count, g.memory_mib, g.driver_version, g.simulated)
            for g in read] == [
        ("nvidia", "nvidia.com/gpu", "NVIDIA-H100-80GB-HBM3", 8, 81559, "550.90.07", True),
        ("ascend", "huawei.com/Ascend910", "910B3", 8, 65536, "24.1.rc2", True),
        ("amd", "amd.com/gpu", "Instinct_MI300X", 4, 196608, "6.10.5", True)]


def test_inventory_skips_nodes_without_gpus() -> None:
    assert gpu_inventory([{"metadata": {"name": "cpu", "labels": {}}, "status": {"capacity": {"cpu": "8"}}}]) == []


def test_next_node_names_continue_after_the_highest_index() -> None:
    assert next_node_names(["gpu-node-0", "gpu-node-7", "other"], 2) == ["gpu-node-8", "gpu-node-9"]
    assert next_node_names([], 1) == ["gpu-node-0"]


def test_prometheus_scrapes_only_loopback_static_targets() -> None:
    config = files.prometheus_config(Ports(37000), Path("/tmp/token"))
    targets = [t for job in config["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]]
    assert targets and all(t.startswith("127.0.0.1:") for t in targets)
    assert not any("kubernetes_sd_configs" in job for job in config["scrape_configs"])


def test_token_file_and_kubeconfig_are_private(tmp_path: Path) -> None:
    tokens = files.new_tokens()
    path = files.write_private(tmp_path / "tokens.csv", files.token_file(tokens))
    assert path.stat().st_mode & 0o077 == 0
    assert '"system:masters"' in path.read_text()


def test_kubernetes_wrapper_requires_staging_modules_at_matching_version(monkeypatch: pytest.MonkeyPatch) -> None:
    upstream = ("module k8s.io/kubernetes\n\ngo 1.26.0\n\ngodebug default=go1.26\n\nreplace (\n"
                "\tk8s.io/api => ./staging/src/k8s.io/api\n\tk8s.io/sample-cli-plugin => ./staging/src/k8s.io/sample-cli-plugin\n)\n")
    monkeypatch.setattr(build, "_module_go_mod", lambda *_: upstream)
    wrapper = build.kubernetes_wrapper(load_pins(), Path("/dev/null"))
    pins = load_pins()
    assert f"\tk8s.io/kubernetes {pins.kubernetes}" in wrapper
    assert f"\tk8s.io/api {pins.kubernetes_staging}" in wrapper
    assert "sample-cli-plugin" not in wrapper
    assert "godebug default=go1.26" in wrapper


def test_kubernetes_ldflags_stamp_the_real_version() -> None:
    flags = build.kubernetes_ldflags("v1.36.3")
    assert "-X k8s.io/component-base/version.gitVersion=v1.36.3" in flags
    assert "-X k8s.io/component-base/version.gitMinor=36" in flags
    assert "-X k8s.io/client-go/pkg/version.gitMajor=1" in flags


def test_sim_config_defaults() -> None:
    cfg = SimConfig()
    assert (cfg.nodes, cfg.gpu.count, cfg.gpu.product) == (4, 8, "NVIDIA-H100-80GB-HBM3")


def test_missing_go_names_what_to_install(tmp_path: Path) -> None:
    import subprocess
    import sys
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path)}
    result = subprocess.run([sys.executable, "-m", "harness.cli", "sim", "build"], env=env,
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert "Go toolchain not found on PATH: install Go 1.26 or newer" in result.stderr


def test_missing_prometheus_names_the_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from harness.sim.components import prometheus_binary
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError, match="apt-get install -y prometheus"):
        prometheus_binary()

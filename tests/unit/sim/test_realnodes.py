"""Pure parts of the real nodes: their addresses, the runtime's and the kubelet's configs, the egress proxy's
parsing, the images' archives."""

from __future__ import annotations

import io
import ipaddress
import json
import tarfile
from pathlib import Path

import pytest

from harness.core.errors import ConfigError
from harness.sim import dataplane, images, realnodes
from harness.sim.components import POD_CIDR, SERVICE_CIDR, Layout
from harness.sim.config import DEFAULT_GPU_PRODUCT, GpuSpec, Ports, SimConfig


def nodes(count: int = 3) -> list[realnodes.RealNode]:
    return realnodes.real_nodes(Ports(22000), count)


def test_real_nodes_pod_ranges_stay_clear_of_kwoks_local_range_and_the_services() -> None:
    local = [ipaddress.ip_network(POD_CIDR, strict=False), ipaddress.ip_network(SERVICE_CIDR)]
    ranges = [ipaddress.ip_network(n.pod_cidr) for n in nodes()]
    assert not [(r, other) for r in ranges for other in local if r.overlaps(other)]
    assert len({str(r) for r in ranges}) == len(ranges)
    assert [n.ip for n in nodes()] == ["10.240.1.1", "10.240.1.2", "10.240.1.3"]
    assert not [n for n in nodes() if ipaddress.ip_address(n.ip) in ranges[0] or ipaddress.ip_address(n.ip).is_loopback]


def test_containerd_clamps_oom_score_adj_and_keeps_its_files_under_the_node() -> None:
    node = nodes(1)[0]
    config = realnodes.containerd_config(node)
    assert "restrict_oom_score_adj = true" in config  # this machine refuses a lower oom_score_adj than containerd's
    assert f'sandbox_image = "{images.PAUSE_IMAGE}"' in config
    assert "netns_mounts_under_state_dir = true" in config
    assert f'address = "{node.containerd_socket}"' in config and "SystemdCgroup = false" in config


def test_kubelet_runs_on_cgroup_v1_under_the_sims_cgroup_and_is_tainted() -> None:
    node = nodes(2)[1]
    config = realnodes.kubelet_config(node, Layout(Path("/tmp/sim")), 22671)
    assert config["failCgroupV1"] is False and config["cgroupDriver"] == "cgroupfs"
    assert config["cgroupRoot"] == "/gpupoc-22000/real-node-1"
    assert config["address"] == node.ip and config["healthzPort"] == 22671
    assert config["registerWithTaints"] == [realnodes.TAINT]
    assert config["authentication"]["anonymous"]["enabled"] is False


def test_cni_config_gives_each_node_its_own_bridge_and_range() -> None:
    first, second = (realnodes.cni_config(n) for n in nodes(2))
    assert first["plugins"][0]["bridge"] != second["plugins"][0]["bridge"]
    assert first["plugins"][0]["ipam"]["ranges"] == [[{"subnet": "10.245.0.0/24"}]]
    assert first["name"] == "gpupoc-22000-real-node-0"


def test_real_nodes_need_the_data_plane_and_a_kwok_node() -> None:
    with pytest.raises(ConfigError, match="--real-nodes needs the data plane"):
        SimConfig(nodes=0, real_nodes=1)
    with pytest.raises(ConfigError, match="--real-nodes needs the data plane"):
        SimConfig(nodes=1, real_nodes=1, serving=False)
    assert SimConfig(nodes=1, real_nodes=2).real_nodes == 2


def test_egress_proxy_reads_connect_and_dials_loopback_on_the_host_and_the_rest_in_the_sim() -> None:
    assert dataplane.parse_connect(b"CONNECT 10.240.1.1:10250 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") == \
        ("10.240.1.1", 10250)
    assert dataplane.parse_connect(b"CONNECT [::1]:443 HTTP/1.1\r\n\r\n") == ("::1", 443)
    with pytest.raises(ValueError, match="not an HTTP CONNECT"):
        dataplane.parse_connect(b"GET / HTTP/1.1\r\n\r\n")
    assert dataplane.egress_namespace("127.0.0.1", "gpupoc-sim-1") == dataplane.HOST
    assert dataplane.egress_namespace("10.245.0.4", "gpupoc-sim-1") == "gpupoc-sim-1"


def test_image_archive_is_reproducible_and_names_its_layer() -> None:
    spec = images.ImageSpec("gpupoc.local/t:1", (images.ImageFile("bin/busybox", b"\x7fELF"),
                                                 images.ImageFile("bin/sh", target="busybox")), cmd=("sh",))
    archive = images.docker_archive(spec)
    assert archive == images.docker_archive(spec)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        [manifest] = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
        assert manifest["RepoTags"] == ["gpupoc.local/t:1"]
        config = json.loads(tar.extractfile(manifest["Config"]).read())  # type: ignore[union-attr]
        layer = tar.extractfile(manifest["Layers"][0]).read()  # type: ignore[union-attr]
    assert config["config"]["Cmd"] == ["sh"]
    with tarfile.open(fileobj=io.BytesIO(layer)) as inner:
        assert inner.getmember("bin/sh").linkname == "busybox"
        assert inner.getmember("bin").isdir()


def test_real_nodes_carry_the_kwok_nodes_gfd_labels_and_say_their_gpus_are_simulated() -> None:
    labels = realnodes.node_labels(GpuSpec(count=4))
    assert labels["nvidia.com/gpu.count"] == "4" and labels["nvidia.com/gpu.product"] == DEFAULT_GPU_PRODUCT
    assert labels[realnodes.LABEL] == "true" and labels[realnodes.SIMULATED_GPUS_LABEL] == "true"

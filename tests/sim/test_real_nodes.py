"""Real nodes (`gpupoc sim up --real-nodes N`): a pod really runs on a real kubelet (with a simulated GPU from the
sim's device plugin), and `sim down` leaves nothing.

On a sim of its own (home, ports and network namespace apart from the worker's sim), like test_lifecycle.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config as kube_config

from harness.core.paths import build_root
from harness.sim import netns, procs, realnode_teardown, realnodes

PORT_BASE = 20000  # below the side-by-side parts' sims (21000-26000)
REAL_NODES = 2
READY_WITHIN_S = 60.0
POD_TIMEOUT_S = 90.0
LINE = "hello from a real container"
EXIT_CODE = 3


def gpupoc(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture()
def real_node_sim(tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {**os.environ, "GPUPOC_HOME": str(tmp_path), "GPUPOC_BUILD_HOME": str(build_root()),
           "GPUPOC_SIM_PORT_BASE": str(PORT_BASE)}
    yield env
    gpupoc(env, "sim", "down")


def busybox_pod(name: str) -> dict[str, object]:
    """Prints a line (and the GPU the device plugin gave it) and exits non-zero, on a real node only (they are tainted
    against the suites' kwok pods)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "restartPolicy": "Never", "nodeSelector": {realnodes.LABEL: "true"},
        "tolerations": [{"key": realnodes.LABEL, "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{"name": "main", "image": "gpupoc.local/trainer:1", "imagePullPolicy": "Never",
                        "command": ["sh", "-c", f"echo '{LINE}' on $NVIDIA_VISIBLE_DEVICES; exit {EXIT_CODE}"],
                        "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


def wait_terminated(core: client.CoreV1Api, name: str, namespace: str) -> client.V1Pod:
    deadline, last = time.monotonic() + POD_TIMEOUT_S, "not seen"
    while time.monotonic() < deadline:
        pod = core.read_namespaced_pod(name, namespace)
        statuses = pod.status.container_statuses or []
        if statuses and statuses[0].state.terminated is not None:
            return pod
        waiting = statuses[0].state.waiting if statuses else None
        last = f"phase={pod.status.phase}" + (f", waiting: {waiting.reason} {waiting.message}" if waiting else "")
        time.sleep(0.5)
    raise AssertionError(f"pod {namespace}/{name}: its container not terminated after {POD_TIMEOUT_S:.0f}s; "
                         f"last: {last}")


def test_a_pod_really_runs_on_a_real_node_and_down_leaves_nothing(real_node_sim: dict[str, str]) -> None:
    up = gpupoc(real_node_sim, "sim", "up", "--nodes", "1", "--schedulers", "none", "--real-nodes", str(REAL_NODES))
    assert up.returncode == 0, up.stderr + up.stdout
    ready = re.search(r"real nodes\s+Ready after\s+([\d.]+)s", up.stdout)
    assert ready and float(ready.group(1)) < READY_WITHIN_S, up.stdout
    home = Path(real_node_sim["GPUPOC_HOME"])
    state = json.loads((home / "sim" / "state.json").read_text())

    core = client.CoreV1Api(kube_config.new_client_from_config(config_file=str(home / "sim" / "kubeconfig")))
    real = core.list_node(label_selector=f"{realnodes.LABEL}=true").items
    assert sorted(n.metadata.name for n in real) == [f"real-node-{i}" for i in range(REAL_NODES)]
    assert all(n.status.node_info.container_runtime_version.startswith("containerd://") for n in real)
    core.create_namespaced_pod("default", busybox_pod("hello"))
    pod = wait_terminated(core, "hello", "default")
    assert pod.spec.node_name.startswith(realnodes.NAME_PREFIX)
    assert pod.status.container_statuses[0].state.terminated.exit_code == EXIT_CODE
    log = core.read_namespaced_pod_log("hello", "default").strip()  # API server -> egress proxy -> kubelet
    assert re.fullmatch(rf"{LINE} on GPU-sim-{pod.spec.node_name}-\d", log), log  # the device plugin's Allocate
    assert all(n.metadata.labels.get("nvidia.com/gpu.product") for n in real)  # GFD labels, like the kwok nodes

    status = gpupoc(real_node_sim, "sim", "status")
    assert status.returncode == 0, status.stdout
    for i in range(REAL_NODES):
        assert re.search(rf"kubelet-real-node-{i} .* Kubernetes v1\.36", status.stdout), status.stdout
        assert re.search(rf"containerd-real-node-{i} .* containerd \S+ \+ runc \S+", status.stdout), status.stdout
        assert f"device-plugin-real-node-{i}" in status.stdout

    down = gpupoc(real_node_sim, "sim", "down")
    assert down.returncode == 0, down.stderr + down.stdout
    assert not [n for n, c in state["components"].items() if procs.is_running(c["pid"], c["binary"])]
    assert not realnode_teardown.mounts_under(home) and not realnode_teardown.mounts_under(realnodes.NODES_ROOT)
    assert not Path(state["real_nodes"]["dir"]).exists()
    assert not [h for h in realnodes.cgroup_hierarchies() if (h / f"gpupoc-{PORT_BASE}").exists()]
    assert not [s for n in state["real_nodes"]["nodes"] for s in realnode_teardown.stray_shims(n["socket"])]
    assert not netns.exists(netns.name_for(PORT_BASE))

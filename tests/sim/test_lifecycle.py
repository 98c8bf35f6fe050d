"""`sim up | down | status` as a user meets them, on a second sim with its own home and ports."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.core.errors import SimError
from harness.sim import cluster, procs
from harness.sim.components import Component, Layout
from harness.core.paths import build_root

PORT_BASE = 30000


def gpupoc(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture()
def second_sim(tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {**os.environ, "GPUPOC_HOME": str(tmp_path), "GPUPOC_BUILD_HOME": str(build_root()),
           "GPUPOC_SIM_PORT_BASE": str(PORT_BASE)}
    yield env
    gpupoc(env, "sim", "down")


def test_up_twice_changes_nothing_and_down_leaves_no_process_or_listener(second_sim: dict[str, str]) -> None:
    first = gpupoc(second_sim, "sim", "up", "--nodes", "1", "--schedulers", "none")
    assert first.returncode == 0, first.stderr + first.stdout
    state_file = Path(second_sim["GPUPOC_HOME"]) / "sim" / "state.json"
    state = json.loads(state_file.read_text())

    again = gpupoc(second_sim, "sim", "up", "--nodes", "1", "--schedulers", "none")
    assert again.returncode == 0 and "already up" in again.stdout
    assert json.loads(state_file.read_text()) == state

    status = gpupoc(second_sim, "sim", "status")
    assert status.returncode == 0, status.stdout
    assert "kube-apiserver" in status.stdout and "v1.36" in status.stdout

    down = gpupoc(second_sim, "sim", "down")
    assert down.returncode == 0, down.stderr
    components = state["components"].values()
    assert not [c for c in components if procs.is_running(c["pid"], c["binary"])]
    assert not [p for p in state["ports"].values() if procs.listening_inodes(p)]


def test_port_in_use_is_named_with_its_owner(second_sim: dict[str, str]) -> None:
    apiserver_port = PORT_BASE + 443
    with socket.socket() as blocker:
        # The previous test's API server leaves TIME_WAIT sockets on this port; they do not count as in use.
        blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        blocker.bind(("127.0.0.1", apiserver_port))
        blocker.listen()
        result = gpupoc(second_sim, "sim", "up", "--nodes", "1", "--schedulers", "none")
    assert result.returncode == 1
    assert f"port {apiserver_port} (for kube-apiserver) is in use by pid {os.getpid()}" in result.stderr
    assert not (Path(second_sim["GPUPOC_HOME"]) / "sim" / "state.json").exists()


def test_component_dying_at_start_up_is_reported_with_its_log(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.logs.mkdir()
    dying = Component("broken", ("/bin/sh", "-c", "echo 'flag provided but not defined: -x'; exit 3"),
                      "http://127.0.0.1:1/healthz", 1)
    pid = procs.start(list(dying.argv), layout.log("broken"))
    with pytest.raises(SimError, match="broken exited during start-up(.|\n)*flag provided but not defined"):
        cluster.wait_healthy(dying, pid, layout, timeout_s=10)


def test_killed_kueue_shows_not_running(second_sim: dict[str, str]) -> None:
    up = gpupoc(second_sim, "sim", "up", "--nodes", "0", "--schedulers", "kueue")
    assert up.returncode == 0, up.stderr
    state = json.loads((Path(second_sim["GPUPOC_HOME"]) / "sim" / "state.json").read_text())
    kueue = state["components"]["kueue"]
    assert procs.stop(kueue["pid"], kueue["binary"])
    status = gpupoc(second_sim, "sim", "status")
    assert status.returncode == 1
    line = next(x for x in status.stdout.splitlines() if x.startswith("kueue"))
    assert line.split()[2:4] == ["false", "false"]


def kill_9(components: dict[str, dict[str, object]], *names: str) -> None:
    for name in names or tuple(components):
        try:
            os.kill(int(str(components[name]["pid"])), signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_sim_up_after_a_crash_comes_back_without_manual_clean_up(second_sim: dict[str, str]) -> None:
    assert gpupoc(second_sim, "sim", "up", "--nodes", "1", "--schedulers", "kueue").returncode == 0
    state_file = Path(second_sim["GPUPOC_HOME"]) / "sim" / "state.json"

    kill_9(json.loads(state_file.read_text())["components"], "kueue")  # one component dies
    again = gpupoc(second_sim, "sim", "up", "--nodes", "1", "--schedulers", "kueue")
    assert again.returncode == 0, again.stderr
    assert "sim was left broken (kueue not running): stopping what is left and starting afresh" in again.stdout
    assert gpupoc(second_sim, "sim", "status").returncode == 0

    kill_9(json.loads(state_file.read_text())["components"])  # every process gone (a reboot): a stale state
    connecting = subprocess.run(  # a run connecting clears it too: nobody can be looking at a sim with no process
        [sys.executable, "-c", "from harness.sim import cluster, config; "
         "cluster.up(config.SimConfig(nodes=1, schedulers=('kueue',)), recover=False)"],
        env=second_sim, capture_output=True, text=True, timeout=300)
    assert connecting.returncode == 0, connecting.stderr
    assert "state outlived its processes (a reboot?): clearing what is left and starting afresh" in connecting.stdout
    assert gpupoc(second_sim, "sim", "status").returncode == 0


def test_fault_commands_stop_freeze_and_start_a_component(second_sim: dict[str, str]) -> None:
    assert gpupoc(second_sim, "sim", "up", "--nodes", "0", "--schedulers", "none").returncode == 0
    stop = gpupoc(second_sim, "sim", "stop", "kube-scheduler")
    assert stop.returncode == 0 and "stopped kube-scheduler" in stop.stdout, stop.stderr
    status = gpupoc(second_sim, "sim", "status")
    assert status.returncode == 1 and "(stopped by `gpupoc sim stop`)" in status.stdout
    up = gpupoc(second_sim, "sim", "up", "--nodes", "0", "--schedulers", "none")
    assert "nothing changed; stopped on purpose: kube-scheduler" in up.stdout, up.stdout + up.stderr
    assert gpupoc(second_sim, "sim", "start", "kube-scheduler").returncode == 0
    freeze = gpupoc(second_sim, "sim", "freeze", "kube-scheduler", "--for", "1")
    assert freeze.returncode == 0 and "thawed kube-scheduler" in freeze.stdout, freeze.stderr
    assert gpupoc(second_sim, "sim", "status").returncode == 0
    state = json.loads((Path(second_sim["GPUPOC_HOME"]) / "sim" / "state.json").read_text())
    assert [f["component"] for f in state["faults"]] == ["kube-scheduler", "kube-scheduler"]
    assert all(f["to"] is not None for f in state["faults"])

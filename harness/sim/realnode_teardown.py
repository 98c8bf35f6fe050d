"""`gpupoc sim down` for the real nodes: no process, mount, cgroup or namespace of theirs outlives the sim.

Stopping the processes is not enough on a real node: containerd's shims and the containers they run outlive
containerd, and the pods leave cgroups behind. So, per node, while its containerd still runs: stop the device plugin
and the kubelet (it would start the containers again), kill and delete every task through containerd (the shims then
unmount the root filesystems and exit); then stop containerd and sweep what is left: shims that serve this
containerd's socket, the file that keeps the node's mount namespace (its pods' mounts go with it), processes in the
node's cgroups, the cgroups themselves, libcni's cached results. The sysctls the kubelets set go back to what they
were.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.sim import procs
from harness.sim.images import CRI_NAMESPACE
from harness.sim.realnodes import KUBELET_FIXED, cgroup_hierarchies

CTR_TIMEOUT_S = 20.0
CGROUP_EMPTY_WAIT_S = 5.0
MNT_DETACH = 2
CONTAINER_LOGS = Path("/var/log/containers")  # the kubelet's links to its pods' logs (a fixed path)
CNI_RESULTS = Path("/var/lib/cni/results")  # libcni's cache of each sandbox's CNI result (containerd 1.6: fixed)

SHIM_SOCKETS = Path("/run/containerd/s")  # containerd 1.6 puts every shim's socket here, whatever its state dir
_libc = ctypes.CDLL(None, use_errno=True)
Say = Callable[[str], None]


def _ctr(socket: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ctr", f"--address={socket}", f"--namespace={CRI_NAMESPACE}", *args],
                          capture_output=True, text=True, timeout=CTR_TIMEOUT_S)


def delete_tasks(socket: str) -> list[str]:
    """Kill and delete every task of one containerd (while it runs); the ids deleted."""
    if not Path(socket).exists():
        return []
    try:
        listed = _ctr(socket, "tasks", "ls", "-q")
    except subprocess.TimeoutExpired:
        return []
    ids = listed.stdout.split() if listed.returncode == 0 else []
    for task in ids:
        try:
            _ctr(socket, "tasks", "delete", "--force", task)
        except subprocess.TimeoutExpired:
            pass
    return ids


def remove_cni_results(container_ids: list[str]) -> None:
    """libcni's cached results of the sandboxes killed without a CNI DEL (their files name the container id)."""
    if not CNI_RESULTS.is_dir():
        return
    for cached in CNI_RESULTS.iterdir():
        if any(f"-{cid}-" in cached.name for cid in container_ids):
            cached.unlink(missing_ok=True)
    _remove_if_empty(CNI_RESULTS, CNI_RESULTS.parent)  # containerd's CNI library makes them on the first pod


def mounts_under(root: Path) -> list[str]:
    """Mount points at or below `root` (this mount namespace), deepest first."""
    found = []
    prefix = str(root).rstrip("/") + "/"
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point.startswith(prefix) or point == str(root):
            found.append(point)
    return sorted(set(found), key=len, reverse=True)


def unmount_all(root: Path, passes: int = 3) -> list[str]:
    """Detach every mount under `root`; return those still mounted after a few passes (a mount stacked under
    another is listed with it but reachable only once the one above has gone)."""
    errors: dict[str, str] = {}
    for _ in range(passes):
        points = mounts_under(root)
        if not points:
            return []
        for point in points:
            if _libc.umount2(point.encode(), MNT_DETACH) != 0:
                errors[point] = os.strerror(ctypes.get_errno())
    return [f"{point} ({errors.get(point, 'still mounted')})" for point in mounts_under(root)]


def stray_shims(socket: str) -> list[int]:
    """Pids of containerd shims serving this containerd (named by its socket in their arguments)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"containerd-shim-runc-v2") and socket.encode() in argv:
            found.append(int(proc.name))
    return found


def _kill_cgroup(directory: Path) -> None:
    """SIGKILL every process in one cgroup and its children (thawed first: a frozen one cannot die)."""
    freezer = directory / "freezer.state"
    if freezer.exists():
        try:
            freezer.write_text("THAWED")
        except OSError:
            pass
    for pids in directory.rglob("cgroup.procs"):
        try:
            for pid in pids.read_text().split():
                os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def remove_cgroups(parent: str) -> list[str]:
    """rmdir the sim's cgroup directory in every hierarchy, deepest first; return what refused."""
    refused = []
    for hierarchy in cgroup_hierarchies():
        top = hierarchy / parent
        if not top.exists():
            continue
        _kill_cgroup(top)
        deadline = time.monotonic() + CGROUP_EMPTY_WAIT_S
        for directory in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts),
                                reverse=True) + [top]:
            while True:
                try:
                    directory.rmdir()
                    break
                except OSError as exc:
                    if time.monotonic() > deadline:
                        refused.append(f"{directory} ({exc.strerror})")
                        break
                    time.sleep(0.1)
    return refused


def restore_sysctls(values: dict[str, str]) -> None:
    for name, value in values.items():
        try:
            (Path("/proc/sys") / name).write_text(value)
        except OSError:
            pass


def remove_log_links(pod_logs: list[Path]) -> None:
    """The kubelet's /var/log/containers links into these nodes' pod logs; the directory too if it is left empty."""
    if not CONTAINER_LOGS.is_dir():
        return
    roots = tuple(str(p) + "/" for p in pod_logs)
    for link in CONTAINER_LOGS.iterdir():
        if link.is_symlink() and os.readlink(link).startswith(roots):
            link.unlink()
    _remove_if_empty(CONTAINER_LOGS)


def _remove_if_empty(*directories: Path) -> None:
    for directory in directories:
        try:
            directory.rmdir()
        except OSError:
            pass


def teardown(state: dict[str, Any], components: dict[str, Any], say: Say) -> list[str]:
    """Stop each real node's kubelet, its containers and its containerd, then sweep; return what refused to go."""
    refused: list[str] = []
    for node in state.get("nodes", []):
        plugin = components.get(f"device-plugin-{node['name']}")
        if plugin and not procs.stop(plugin["pid"], plugin["binary"]):
            refused.append(f"device plugin of {node['name']} (pid {plugin['pid']})")
        kubelet = components.get(f"kubelet-{node['name']}")
        containerd = components.get(f"containerd-{node['name']}")
        if kubelet and not procs.stop(kubelet["pid"], kubelet["binary"]):
            refused.append(f"kubelet of {node['name']} (pid {kubelet['pid']})")
        if containerd and procs.is_running(containerd["pid"], containerd["binary"]):
            deleted = delete_tasks(node["socket"])
            remove_cni_results(deleted)
            say(f"  {node['name']}: deleted {len(deleted)} container task(s)")
            if not procs.stop(containerd["pid"], containerd["binary"]):
                refused.append(f"containerd of {node['name']} (pid {containerd['pid']})")
        for pid in stray_shims(node["socket"]):
            os.kill(pid, signal.SIGKILL)
            say(f"  {node['name']}: killed a stray shim (pid {pid})")
        refused += unmount_all(Path(node["root"]))
    if state.get("mount_namespaces"):  # a node's mounts go with the last of its processes; its file with the holder
        refused += unmount_all(Path(state["mount_namespaces"][0]).parent)  # (deepest first: the files, then it)
    if state.get("cgroup_parent"):
        refused += remove_cgroups(state["cgroup_parent"])
    restore_sysctls(state.get("sysctls", {}))
    remove_log_links([Path(n["pod_logs"]) for n in state.get("nodes", [])])
    _remove_if_empty(SHIM_SOCKETS, SHIM_SOCKETS.parent)
    if state.get("dir") and not refused:  # nothing mounted there any more
        shutil.rmtree(state["dir"], ignore_errors=True)
        _remove_if_empty(Path(state["dir"]).parent)
    _remove_if_empty(KUBELET_FIXED)  # the mount point of the nodes' own, made by `up` when it was not there
    return refused


"""The sim's own network namespace: where pod and Service addresses live.

Pod and Service IPs (10.x) exist only inside this namespace: its loopback holds the pod and Service
ranges as local routes (any address in them can be bound, the way a pod IP is bound), kube-proxy
programs its nftables rules there, and load generators and probes run there. The host's own network
namespace is never changed and never sends to a 10.x address. A process reaches into the namespace
with `setns(2)`: a socket keeps the namespace it was created in, so one process can listen on
127.0.0.1 of the host and on a pod IP of the sim at once.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

from harness.core.errors import SimError

CLONE_NEWNET = 0x40000000
NETNS_DIR = Path("/run/netns")
_libc = ctypes.CDLL(None, use_errno=True)


def name_for(port_base: int) -> str:
    """One namespace per sim instance (instances differ by port base)."""
    return f"gpupoc-sim-{port_base}"


def path(name: str) -> Path:
    return NETNS_DIR / name


def exists(name: str) -> bool:
    return path(name).exists()


def _ip(args: Sequence[str]) -> None:
    result = subprocess.run(["ip", *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise SimError(f"`ip {' '.join(args)}` failed: {result.stderr.strip() or result.returncode}; the sim's "
                       "data plane needs root and the `ip` command (iproute2)")


def create(name: str, local_range: str, routed_range: str, source: str) -> None:
    """A fresh namespace with loopback up: every address of `local_range` (the pod CIDR) is local to it,
    and `routed_range` (the Service CIDR) is reached from `source` (a pod-range address: a client in the
    namespace looks like a client pod to kube-proxy, which masquerades traffic from outside the pod CIDR)."""
    if exists(name):
        delete(name)
    _ip(["netns", "add", name])
    _ip(["-n", name, "link", "set", "lo", "up"])
    _ip(["-n", name, "route", "add", "local", local_range, "dev", "lo"])
    _ip(["-n", name, "route", "add", routed_range, "dev", "lo", "src", source])


def delete(name: str) -> None:
    """Remove the namespace (its addresses, routes and nftables rules go with it)."""
    if exists(name):
        _ip(["netns", "delete", name])


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise SimError(f"setns into a network namespace failed: {os.strerror(err)} (the data plane needs root)")


@contextlib.contextmanager
def entered(name: str) -> Iterator[None]:
    """This thread in the namespace `name` for the block; sockets made inside stay there. Back on exit."""
    with open(f"/proc/thread-self/ns/net") as here, open(path(name)) as there:
        _setns(there.fileno())
        try:
            yield
        finally:
            _setns(here.fileno())


def enter_for_exec(name: str) -> None:
    """For subprocess `preexec_fn`: the child joins the namespace before it execs its program."""
    with open(path(name)) as there:
        _setns(there.fileno())


def current_inode(pid: int | str = "thread-self") -> int:
    """The network namespace a process (or this thread) is in: compare with another's to tell where it runs."""
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def inode(name: str) -> int:
    return os.stat(path(name)).st_ino

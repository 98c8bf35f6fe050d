"""The host's CPUs while a quiet test measures: the sims' own processes kept on the CPU the real nodes reserve.

A quiet test of make test (tests/heavy.py) (the workload sample's step times, the isolation boundary) measures a pod on a real node's CPU of its
own: the static CPU manager keeps other pods off it, but not host processes. On a real cluster the control plane runs
on other machines; on this host every sim's API server, etcd and controllers do not, and idle sims still load it
(make test, 2026-12-06: two other workers' idle sims, each Karpenter at 23 % of a core, moved the sample's step p50
from 4-6 ms to 62-66 ms). So while the case runs, every process of a sim on this host (an executable of the sim's
builds, in the root cpuset: not a container) is held on the reserved CPU, and given every CPU back after.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from harness.core.paths import build_root

RESERVED_CPUS = frozenset({0})  # the real nodes' kubeReserved, rounded up to a whole CPU by the static CPU manager
PROC = Path("/proc")


def sim_processes(builds: Path | None = None) -> list[int]:
    """Every process on the host running one of the sim's builds, outside any container's cpuset."""
    builds = (builds or build_root()).resolve()
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            exe = Path(os.readlink(entry / "exe"))
            in_root_cpuset = (entry / "cpuset").read_text().strip() == "/"
        except OSError:  # gone, or a kernel thread
            continue
        if in_root_cpuset and exe.is_relative_to(builds):
            found.append(int(entry.name))
    return found


def _pin(pids: Iterable[int], cpus: frozenset[int]) -> None:
    """Every thread of each process (an affinity is a thread's; those started later inherit their creator's)."""
    for pid in pids:
        with contextlib.suppress(OSError):
            for task in (PROC / str(pid) / "task").iterdir():
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(int(task.name), cpus)


@contextlib.contextmanager
def sims_on_reserved_cpus(reserved: frozenset[int] = RESERVED_CPUS, builds: Path | None = None) -> Iterator[None]:
    """The sims' processes on `reserved` for the duration (nothing where the host has no other CPU), then on all."""
    every = frozenset(os.sched_getaffinity(0))
    if not (every - reserved) or not (reserved & every):
        yield
        return
    held = sim_processes(builds)
    _pin(held, reserved & every)
    try:
        yield
    finally:
        _pin({*held, *sim_processes(builds)}, every)

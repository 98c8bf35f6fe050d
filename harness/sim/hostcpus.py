"""The host's CPUs while a quiet test measures: every host process kept on the CPU the real nodes reserve.

A quiet test of make test (tests/heavy.py) (the workload sample's step times, the isolation boundary) measures a pod
on a real node's CPU of its own: the static CPU manager keeps other pods off it, but not host processes. On a real
cluster the control plane and the other tenants' tools run on other machines; on this host every sim's API server,
etcd and controllers, and the other tests' processes, do not (make test, 2026-12-06: two other workers' idle sims,
each Karpenter at 23 % of a core, moved the sample's step p50 from 4-6 ms to 62-66 ms). So while the case runs, every
process on the host outside a container's cpuset is held on the reserved CPU, and given its CPUs back after: the
other tests go on, on one CPU, and the sample has the other to itself (as a real node gives it). The quiet test's
own processes (it, what it starts, its real-node sim) are spared: held with the rest, its cases took 129-163 s,
against 83-90 s alone (make test, 2026-12-06).

The container runtimes are left where they are: a task inherits its creator's CPUs, and the kernel keeps what was
set with sched_setaffinity when the task joins a cpuset (Linux 6.2 on), so a container started by a held containerd
shim ran on the reserved CPU alone, whatever its pod's cpuset (the CPU-isolation-off sample: 1 CPU, not 2, measured
2026-12-06). Afterwards a container's task left on the reserved CPU alone is given its cpuset's CPUs back as well.

A window killed before its end (make test killed: its restore never runs) leaves the host on the reserved CPU; the
next run (sim/one-run.sh) and the next window give those tasks every CPU back first (2026-12-07: after a killed make
test every process on the host ran on CPU 0, the next measurements' included).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

RESERVED_CPUS = frozenset({0})  # the real nodes' kubeReserved, rounded up to a whole CPU by the static CPU manager
PROC = Path("/proc")
RUNTIMES = ("containerd", "runc", "crun", "conmon")  # what starts containers (containerd-shim-runc-v2 among them)


def host_tasks(proc: Path = PROC, in_containers: bool = False, spared: str | None = None) -> list[int]:
    """Every thread of every process that runs a program (not a kernel thread), but a container runtime's: in the
    root cpuset (the host's), or in any other (`in_containers`); less the caller and every process whose command
    line or environment names `spared` (a sim's home: its processes)."""
    found: list[int] = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            program = Path(os.readlink(entry / "exe")).name
            in_root = (entry / "cpuset").read_text().strip() == "/"
            if in_root == in_containers or program.startswith(RUNTIMES):
                continue
            if spared and any(spared.encode() in (entry / part).read_bytes() for part in ("cmdline", "environ")):
                continue
            found.extend(int(task.name) for task in (entry / "task").iterdir())
        except OSError:  # gone, or a kernel thread
            continue
    return found


def _set(task: int, cpus: frozenset[int]) -> frozenset[int] | None:
    """The task's CPUs set to `cpus`; what they were (None: the task is gone)."""
    try:
        was = frozenset(os.sched_getaffinity(task))
        os.sched_setaffinity(task, cpus)
        return was
    except OSError:
        return None


def release_leftovers(reserved: frozenset[int] = RESERVED_CPUS, proc: Path = PROC) -> int:
    """Every CPU back to the host's tasks (and the caller) a killed window left on `reserved` alone; how many. Only
    where no window can be open: as a run starts, as a window opens (one at a time)."""
    every = frozenset(range(os.cpu_count() or 1))
    held = reserved & every
    if not (every - reserved) or not held:
        return 0
    released = 0
    for task in [os.getpid(), *host_tasks(proc)]:
        with contextlib.suppress(OSError):
            if frozenset(os.sched_getaffinity(task)) == held:
                os.sched_setaffinity(task, every)
                released += 1
    return released


@contextlib.contextmanager
def host_on_reserved_cpus(reserved: frozenset[int] = RESERVED_CPUS, proc: Path = PROC,
                          spared: str | None = None) -> Iterator[None]:
    """The host's processes on `reserved` for the duration (nothing where the host has no other CPU), but the
    caller (and so what it starts meanwhile) and the processes of the sim whose home is `spared`; then each on the
    CPUs it had, and those started meanwhile by a held process (they inherited `reserved`) on every CPU."""
    release_leftovers(reserved, proc)
    every = frozenset(os.sched_getaffinity(0))
    held = reserved & every
    if not (every - reserved) or not held:
        yield
        return
    had = {task: was for task in host_tasks(proc, spared=spared) if (was := _set(task, held)) is not None}
    try:
        yield
    finally:
        for task in [*host_tasks(proc), *host_tasks(proc, in_containers=True)]:
            with contextlib.suppress(OSError):
                if task in had:
                    os.sched_setaffinity(task, had[task])
                elif frozenset(os.sched_getaffinity(task)) == held:
                    os.sched_setaffinity(task, every)  # within its cpuset: the kernel keeps it there


if __name__ == "__main__":  # sim/one-run.sh, as a run starts
    if count := release_leftovers():
        print(f"gpupoc: {count} host tasks a killed quiet window left on CPU {sorted(RESERVED_CPUS)}: given every CPU "
              "back")

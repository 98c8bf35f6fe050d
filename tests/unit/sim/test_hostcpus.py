"""A quiet test's CPUs: the host's processes held on the reserved CPU, then given their CPUs back; the caller, what it
starts, a sim's processes it spares and a container runtime (what starts containers) are left where they are."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.run import hostshare
from harness.sim import hostcpus
from tests.heavy import QUIET

EVERY = frozenset(os.sched_getaffinity(0))


@pytest.mark.skipif(len(EVERY) < 2 or 0 not in EVERY, reason="the host has one CPU: nothing to keep apart")
def test_host_processes_are_held_on_the_reserved_cpu_and_given_their_cpus_back(tmp_path: Path) -> None:
    narrow = frozenset({max(EVERY)})
    shim = shutil.copy("/bin/sleep", tmp_path / "containerd-shim-runc-v2")
    home = str(tmp_path / "real-nodes")
    # never beside a real-node test's quiet window (tests/heavy.py), whose restore gave `pinned` its CPU back (mt20);
    # and its processes started only once that window is over: one started while this worker was held kept the
    # reserved CPU (a container runtime's is left where it is), which this test then read as the window's (mt26)
    with hostshare.locked(QUIET):
        started = [subprocess.Popen(["sleep", "60"]), subprocess.Popen(["sleep", "60"]),
                   subprocess.Popen([shim, "60"]),
                   subprocess.Popen(["sleep", "60"], env={**os.environ, "GPUPOC_HOME": home})]
        plain, pinned, runtime, spared = started
        os.sched_setaffinity(pinned.pid, narrow)
        try:
            with hostcpus.host_on_reserved_cpus(frozenset({0}), spared=home):
                assert os.sched_getaffinity(plain.pid) == {0} and os.sched_getaffinity(pinned.pid) == {0}
                assert os.sched_getaffinity(runtime.pid) == EVERY and os.sched_getaffinity(spared.pid) == EVERY
                started.append(later := subprocess.Popen(["sleep", "60"]))
                assert os.sched_getaffinity(0) == EVERY and os.sched_getaffinity(later.pid) == EVERY
                os.sched_setaffinity(later.pid, {0})  # as if a held process had started it
            assert os.sched_getaffinity(plain.pid) == EVERY and os.sched_getaffinity(pinned.pid) == narrow
            assert os.sched_getaffinity(later.pid) == EVERY
        finally:
            for process in started:
                process.kill()
                process.wait()


@pytest.mark.skipif(len(EVERY) < 2 or 0 not in EVERY, reason="the host has one CPU: nothing to keep apart")
def test_what_a_killed_window_left_on_the_reserved_cpu_gets_every_cpu_back() -> None:
    with hostshare.locked(QUIET):  # never while another worker's window holds the host
        left = subprocess.Popen(["sleep", "60"])
        try:
            os.sched_setaffinity(left.pid, {0})  # as a window killed before its restore leaves it
            assert hostcpus.release_leftovers(frozenset({0})) >= 1
            assert os.sched_getaffinity(left.pid) == EVERY
        finally:
            left.kill()
            left.wait()

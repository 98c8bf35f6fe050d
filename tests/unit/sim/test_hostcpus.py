"""A quiet test's CPUs: the sims' processes held on the reserved CPU, then given every CPU back; a container's
process (another cpuset) and a program not of the sim's builds are left where they are."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.sim import hostcpus

EVERY = frozenset(os.sched_getaffinity(0))


@pytest.mark.skipif(len(EVERY) < 2 or 0 not in EVERY, reason="the host has one CPU: nothing to keep apart")
def test_a_sim_process_is_held_on_the_reserved_cpu_and_given_every_cpu_back(tmp_path: Path) -> None:
    builds = tmp_path / "builds"
    (builds / "bin").mkdir(parents=True)
    sleep = shutil.copy("/bin/sleep", builds / "bin" / "sleep")
    with subprocess.Popen([sleep, "60"]) as ours, subprocess.Popen(["sleep", "60"]) as other:
        try:
            assert ours.pid in hostcpus.sim_processes(builds) and other.pid not in hostcpus.sim_processes(builds)
            with hostcpus.sims_on_reserved_cpus(frozenset({0}), builds):
                assert os.sched_getaffinity(ours.pid) == {0}
                assert os.sched_getaffinity(other.pid) == EVERY
            assert os.sched_getaffinity(ours.pid) == EVERY
        finally:
            ours.kill()
            other.kill()

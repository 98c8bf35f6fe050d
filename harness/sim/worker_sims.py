"""Second sims as the workers of one queue over several clusters (operations.multicluster, Kueue MultiKueue).

Each is a sim of its own (its own GPUPOC_HOME and port range, the build shared) with Kueue, KubeRay (for its CRDs)
and a few GPU nodes; the case brings them up, takes one away mid-run (`sim down`: its API server gone, as a cluster
lost), and brings the rest down at its end. Their port ranges are fixed, below the side-by-side parts'
(harness/cli/side_by_side.py), so one run's workers at a time on this host: a lock file says whose they are.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml
from kubernetes import config as kube_config

from harness.core import progress
from harness.core.errors import ConfigError
from harness.cluster.reach import OtherCluster
from harness.core.paths import REPO_ROOT, build_root, gpupoc_home
from harness.sim.config import PORT_BASE_ENV

PORT_BASES = (19000, 18000)  # below the real-node sim of tests/sim/test_real_nodes.py (20000) and every other range
NODES = 2
UP_TIMEOUT_S = 240
DOWN_TIMEOUT_S = 120
LOCK = "multicluster-workers.lock"
SCHEDULERS_ENV = "GPUPOC_SIM_SCHEDULERS"
# Kueue, and KubeRay for its CRDs: the manager's Kueue watches every kind of its Ray integrations on each worker
SCHEDULERS = "kueue,kuberay"


@dataclass(frozen=True)
class WorkerSim:
    name: str
    port_base: int
    gpus_per_node: int

    @property
    def home(self) -> Path:
        return gpupoc_home() / "multicluster" / self.name

    def env(self) -> dict[str, str]:
        return {**os.environ, "GPUPOC_HOME": str(self.home), "GPUPOC_BUILD_HOME": str(build_root()),
                PORT_BASE_ENV: str(self.port_base), SCHEDULERS_ENV: SCHEDULERS}

    def _gpupoc(self, timeout_s: float, *args: str) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run([sys.executable, "-m", "harness.cli", "sim", *args], cwd=REPO_ROOT, env=self.env(),
                                  capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise ConfigError(f"worker sim {self.name}: `sim {' '.join(args)}` still running after {timeout_s:.0f} s "
                              f"(its logs: {self.home / 'sim' / 'logs'})") from exc

    def up(self) -> None:
        done = self._gpupoc(UP_TIMEOUT_S, "up", "--nodes", str(NODES), "--no-serving",
                            "--gpus-per-node", str(self.gpus_per_node))
        if done.returncode != 0:
            last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["no output"]
            raise ConfigError(f"worker sim {self.name} (port base {self.port_base}) did not start: {last[0]}")

    def down(self) -> str:
        """Stop it; '' or what `sim down` said when it failed."""
        done = self._gpupoc(DOWN_TIMEOUT_S, "down")
        return "" if done.returncode == 0 else (done.stderr.strip() or done.stdout.strip())[-300:]

    def cluster(self) -> OtherCluster:
        """The worker as the manager reaches it: its API server on 127.0.0.1, its CA."""
        path = self.home / "sim" / "kubeconfig"
        config = yaml.safe_load(path.read_text())
        entry = config["clusters"][0]["cluster"]
        ca_path = entry["certificate-authority"]
        return OtherCluster(self.name, kube_config.new_client_from_config(config_file=str(path)), entry["server"],
                             Path(ca_path).read_bytes(), ca_path)


@contextlib.contextmanager
def worker_sims(count: int, gpus_per_node: int, say: Callable[[str], None] = progress.say) -> Iterator[list[WorkerSim]]:
    """`count` worker sims up for the block, down after it (those still up); one run's at a time on this host."""
    if count > len(PORT_BASES):
        raise ConfigError(f"at most {len(PORT_BASES)} worker sims, asked for {count}")
    sims = [WorkerSim(f"worker-{i + 1}", PORT_BASES[i], gpus_per_node) for i in range(count)]
    lock_path = build_root() / LOCK
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise ConfigError(f"another run's multicluster case holds the worker sims' ports ({lock_path})") from exc
        try:
            say(f"  worker sims {', '.join(s.name for s in sims)}: up (port bases "
                f"{', '.join(str(s.port_base) for s in sims)}, {NODES} nodes each, {SCHEDULERS})")
            started = time.monotonic()
            with ThreadPoolExecutor(len(sims)) as pool:
                list(pool.map(WorkerSim.up, sims))
            say(f"  worker sims up in {time.monotonic() - started:.0f} s")
            yield sims
        finally:
            with ThreadPoolExecutor(len(sims)) as pool:
                list(pool.map(WorkerSim.down, sims))

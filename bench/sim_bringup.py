"""Benchmark of the sim: warm `sim up` to all nodes Ready and all controllers healthy, `sim down`, total RSS.

Run: python bench/sim_bringup.py [--repeat N] [--schedulers none] [--no-serving] (the control plane alone, as
kwokctl runs it, is `--schedulers none --no-serving`). Numbers go to the README; nothing here asserts.
Uses its own GPUPOC_HOME and port base so a running sim is left alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.sim.paths import build_root

PORT_BASE = "31000"
GPUPOC = (sys.executable, "-m", "harness.cli")  # this checkout's harness, in this interpreter's environment


def rss_mib(pids: list[int]) -> float:
    total_kib = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total_kib += int(line.split()[1])
    return total_kib / 1024


def one_round(env: dict[str, str], home: Path, schedulers: str, serving: bool = True) -> dict[str, float]:
    started = time.monotonic()
    subprocess.run([*GPUPOC, "sim", "up", "--schedulers", schedulers, *([] if serving else ["--no-serving"])],
                   env=env, check=True,
                   stdout=subprocess.DEVNULL)
    up_s = time.monotonic() - started
    state = json.loads((home / "sim" / "state.json").read_text())
    time.sleep(5)  # let the processes settle before sampling their memory
    memory = rss_mib([c["pid"] for c in state["components"].values()])
    started = time.monotonic()
    subprocess.run([*GPUPOC, "sim", "down"], env=env, check=True, stdout=subprocess.DEVNULL)
    return {"up_s": up_s, "down_s": time.monotonic() - started, "rss_mib": memory}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-serving", dest="serving", action="store_false",
                        help="without the data plane (kube-proxy, stand-ins, metrics adapter)")
    parser.add_argument("--schedulers", default="kueue,volcano,kuberay", help="as for `gpupoc sim up`; 'none' for "
                        "the control plane alone")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GPUPOC_HOME": tmp, "GPUPOC_BUILD_HOME": str(build_root()),
               "GPUPOC_SIM_PORT_BASE": PORT_BASE}
        rounds = [one_round(env, Path(tmp), args.schedulers, args.serving) for _ in range(args.repeat)]
    for key in ("up_s", "down_s", "rss_mib"):
        values = [r[key] for r in rounds]
        print(f"{key:8} median {statistics.median(values):7.1f}  min {min(values):7.1f}  max {max(values):7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

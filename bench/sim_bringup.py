"""Benchmark of the sim: warm `sim up` to all nodes Ready and all controllers healthy, `sim down`, total RSS.

Run: python bench/sim_bringup.py [--repeat N] [--schedulers none] [--no-serving] [--nodes N [--hold S]] (the control
plane alone, as kwokctl runs it, is `--schedulers none --no-serving`; the scale suite's sim is `--nodes 1000`, held
S seconds to see that every node stays Ready). Numbers go to the README; nothing here asserts.
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

from harness.core.paths import build_root

PORT_BASE = "31000"
GPUPOC = (sys.executable, "-m", "harness.cli")  # this checkout's harness, in this interpreter's environment


def rss_mib(pids: list[int]) -> float:
    total_kib = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total_kib += int(line.split()[1])
    return total_kib / 1024


def ready_nodes(env: dict[str, str]) -> str:
    from kubernetes import client, config  # imported here: the bench's other modes need no client
    api = config.new_client_from_config(str(Path(env["GPUPOC_HOME"]) / "sim" / "kubeconfig"))
    found = client.CoreV1Api(api).list_node().items
    ready = sum(1 for n in found if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or []))
    return f"{ready} of {len(found)} nodes Ready"


def one_round(env: dict[str, str], home: Path, schedulers: str, serving: bool = True, nodes: int | None = None,
              hold_s: float = 0.0) -> dict[str, float]:
    started = time.monotonic()
    subprocess.run([*GPUPOC, "sim", "up", "--schedulers", schedulers, *([] if serving else ["--no-serving"]),
                    *([] if nodes is None else ["--nodes", str(nodes)])], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    up_s = time.monotonic() - started
    state = json.loads((home / "sim" / "state.json").read_text())
    if nodes is not None:
        print(f"up in {up_s:.1f}s: {ready_nodes(env)}")
    time.sleep(max(5.0, hold_s))  # let the processes settle before sampling their memory (and nodes stay Ready)
    memory = rss_mib([c["pid"] for c in state["components"].values()])
    if nodes is not None:
        print(f"after {max(5.0, hold_s):.0f}s: {ready_nodes(env)}; the sim's processes {memory:.0f} MiB resident")
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
    parser.add_argument("--nodes", type=int, default=None, help="GPU nodes (default: the sim's own default)")
    parser.add_argument("--hold", type=float, default=0.0, help="seconds to keep it up before measuring memory")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GPUPOC_HOME": tmp, "GPUPOC_BUILD_HOME": str(build_root()),
               "GPUPOC_SIM_PORT_BASE": PORT_BASE}
        rounds = [one_round(env, Path(tmp), args.schedulers, args.serving, args.nodes, args.hold) for _ in range(args.repeat)]
    for key in ("up_s", "down_s", "rss_mib"):
        values = [r[key] for r in rounds]
        print(f"{key:8} median {statistics.median(values):7.1f}  min {min(values):7.1f}  max {max(values):7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

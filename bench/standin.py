"""Benchmark of the model-server stand-in: the requests/s one stand-in pod sustains on this machine, measured with the
same load generator the latency criterion drives (inference-perf, through kube-proxy, from the sim's namespace).

Run against a running sim (`gpupoc sim up`): python bench/standin.py [--rates 50,100,200,400]. Prints one row per
rate: achieved requests/s, error rate, TTFT p50/p99, and the CPU the data plane process used. Nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from kubernetes import client

from harness.serving import loadgen
from harness.cluster.apply import apply_objects
from harness.cluster.manifests import dressed
from harness.config.options import DEFAULT_SIM_PROFILE
from harness.config.profile import Tenant, load_profile
from harness.jobs.service import ModelService
from harness.sim import cluster, netns
from harness.serving.traffic import Traffic
from harness.cluster.wait import poll

NAMESPACE = "gpupoc-bench"
DURATION_S = 10.0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="50,100,200,400")
    parser.add_argument("--tokens", type=int, default=16, help="prompt and output tokens per request")
    args = parser.parse_args()
    name = cluster.data_plane_netns()
    traffic = Traffic(name, enter=lambda: netns.enter_for_exec(name)) if name and netns.exists(name) else None
    generator = loadgen.ensure()
    if traffic is None or isinstance(generator, str):
        raise SystemExit(f"needs a running sim with its data plane and inference-perf: {generator}")
    api = cluster.api_client()
    core = client.CoreV1Api(api)
    tenant = Tenant(name="bench", namespace=NAMESPACE, identity="default", weight=1.0, quota_gpus=1, limit_gpus=1,
                    queues={}, dev_queues={}, dev_gpus=0)
    service = ModelService("bench-llm", tenant, replicas=1,
                           server={"load-time": "0s", "ttft": "1ms", "itl": "1ms", "max-num-seqs": "256",
                                   "slowdown": "0"})
    apply_objects(api, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
                        *dressed([service.deployment({})], load_profile(DEFAULT_SIM_PROFILE).workloads),
                        service.service()])
    try:
        poll(lambda: core.list_namespaced_pod(NAMESPACE).items,
             lambda pods: any(c.type == "Ready" and c.status == "True" for p in pods
                              for c in p.status.conditions or []), 60)
        url = traffic.service_url(api, NAMESPACE, service.app)
        pid = int(json.loads((cluster.layout().state).read_text())["components"]["sim-dataplane"]["pid"])
        print(f"one stand-in pod, {args.tokens} prompt + {args.tokens} output tokens, {DURATION_S:g} s per rate, "
              f"{os.cpu_count()} cores")
        print("requested/s  achieved/s  errors  ttft_p50_ms  ttft_p99_ms  dataplane_cpu_%")
        for rate in (float(r) for r in args.rates.split(",")):
            with tempfile.TemporaryDirectory() as tmp:
                work = Path(tmp)
                config = generator.config(url, service.model, rate, DURATION_S, (args.tokens, args.tokens),
                                          {"ttft": 10.0}, work)
                before, started = cpu_seconds(pid), time.monotonic()
                report = generator.run(traffic, config, work, timeout_s=DURATION_S + 120)
                cpu = (cpu_seconds(pid) - before) / (time.monotonic() - started) * 100
            print(f"{rate:11.0f}  {report.requests_per_s:10.1f}  {report.error_rate:6.3f}  "
                  f"{report.ttft.get('p50', 0) * 1000:11.1f}  {report.ttft.get('p99', 0) * 1000:11.1f}  {cpu:15.0f}")
    finally:
        core.delete_namespace(NAMESPACE)


if __name__ == "__main__":
    main()

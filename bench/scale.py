"""Scale benchmark on the sim: N simulated GPU nodes, M whole-node jobs submitted at R per second across the
profile's tenants on one backend; admissions per second, admission latency against queue depth, time to drain,
Jain's index, and whether the harness keeps up (its resident memory, its API requests per job).

Run (the sim up, e.g. `gpupoc sim up --schedulers kueue`):
    python bench/scale.py --backend kueue --nodes 50 --jobs 500 --rate 50
Nodes are added for the run and removed after; the queue model is scaled to the nodes for the run (each tenant's
quota by its weight) and the reference one put back after. Figures go to the README; nothing here asserts.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import resource
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubernetes import client
from kubernetes.client import rest

from harness import backends
from harness.backends.base import GangJob
from harness.config import resolve
from harness.prometheus import Prometheus
from harness.queue_model import apply_queue_model
from harness.scale import Admission, figures
from harness.sim import cluster, nodes
from harness.sim.config import GpuSpec
from harness.target import connect
from harness.workloads import Workloads

SUBMITTERS = 8  # concurrent submissions (the client's own limit: one connection each)


class Counting:
    """Every request the harness's Kubernetes clients send (a watch counts once, however long it streams)."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self._original = rest.RESTClientObject.request
        counts, original = self.counts, self._original

        def counting(obj: Any, method: str, url: str, *a: Any, **kw: Any) -> Any:
            counts["watch" if "watch=true" in url.lower() else method] += 1
            return original(obj, method, url, *a, **kw)
        rest.RESTClientObject.request = counting

    def total(self) -> int:
        return sum(self.counts.values())


def scaled_profile(profile: Any, gpus: int) -> Any:
    """Each tenant's quota by its weight, the whole cluster as its limit: the scheduler, not the quota, limits."""
    weight = sum(t.weight for t in profile.tenants)
    tenants = [dataclasses.replace(t, quota_gpus=int(gpus * t.weight / weight), limit_gpus=gpus)
               for t in profile.tenants]
    return dataclasses.replace(profile, tenants=tenants)


def submit_all(workloads: Workloads, jobs: list[GangJob], rate: float) -> dict[str, float]:
    """Submit at `rate` per second (a token per 1/rate s, SUBMITTERS at once); the time each was sent."""
    sent: dict[str, float] = {}
    lock = threading.Lock()
    started = time.monotonic()

    def one(index_job: tuple[int, GangJob]) -> None:
        index, job = index_job
        delay = started + index / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        at = time.time()
        workloads.submit(job)
        with lock:
            sent[job.name] = at

    with ThreadPoolExecutor(SUBMITTERS) as pool:
        list(pool.map(one, enumerate(jobs)))
    return sent


def admissions(workloads: Workloads, jobs: list[GangJob], sent: dict[str, float]) -> list[Admission]:
    found = []
    for job in jobs:
        tracker = workloads.jobs(job.tenant.namespace)
        status = workloads.status_of(job, {**tracker.gone, **tracker.objects})  # Kueue tracks its Workloads
        admitted = status.admitted_at.timestamp() if status is not None and status.admitted_at else None
        found.append(Admission(job.tenant.name, sent[job.name], admitted, job.gpus))
    return found


def process_figures(prometheus: Prometheus, job: str, seconds: int) -> str:
    cpu = prometheus.instant(f'sum(increase(process_cpu_seconds_total{{job="{job}"}}[{seconds}s]))')
    rss = prometheus.instant(f'max(max_over_time(process_resident_memory_bytes{{job="{job}"}}[{seconds}s]))')
    cpu_s = f"{cpu[0].value:.1f} CPU-s" if cpu else "CPU not measured"
    rss_mib = f"peak {rss[0].value / 2**20:.0f} MiB" if rss else "memory not measured"
    return f"{job}: {cpu_s}, {rss_mib}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="kueue")
    parser.add_argument("--nodes", type=int, default=50, help="GPU nodes for the run (added to the sim's)")
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--rate", type=float, default=50.0, help="submissions per second")
    parser.add_argument("--run-for", type=float, default=30.0, help="seconds each job runs")
    parser.add_argument("--cap", type=float, default=1200.0, help="seconds to wait for every admission")
    parser.add_argument("--scheduler-job", default="", help="Prometheus scrape job of the scheduler (default: "
                        "the backend's name)")
    args = parser.parse_args()
    if not cluster.is_up():
        print("the sim is not up: gpupoc sim up --schedulers <backend>", file=sys.stderr)
        return 2
    counting = Counting()
    cfg = resolve({"backends": args.backend})
    target = connect(cfg)
    backend = backends.ALL[args.backend]
    reason = backend.unavailable_reason(target.api)
    if reason:
        print(reason, file=sys.stderr)
        return 2
    core = client.CoreV1Api(target.api)
    have = len(nodes.simulated_node_names(core))
    added = nodes.add_nodes(core, max(0, args.nodes - have), GpuSpec()) if args.nodes > have else []
    nodes.wait_nodes_ready(core, added, timeout_s=600)
    profile = scaled_profile(cfg.profile, args.nodes * cfg.profile.gpu.per_node)
    apply_queue_model(target, profile, say=lambda _: None, slurm=False)
    workloads = Workloads(target.api, backend, f"scale-{int(time.time())}", "bench/scale.py",
                          cfg.profile.timeouts.delete, target.seam.as_tenant, simulated=True)
    weights = {t.name: t.weight for t in profile.tenants}
    order = [t for t in profile.tenants for _ in range(int(t.weight))]
    jobs = [GangJob(workloads.job_name(f"s{i}"), order[i % len(order)], 1, cfg.profile.gpu.per_node,
                    run_for_s=args.run_for) for i in range(args.jobs)]
    for tenant in profile.tenants:
        workloads.jobs(tenant.namespace)
    before = counting.total()
    started = time.monotonic()
    try:
        sent = submit_all(workloads, jobs, args.rate)
        submit_s = time.monotonic() - started
        print(f"submitted {len(jobs)} jobs in {submit_s:.1f} s ({len(jobs) / submit_s:.1f}/s, asked {args.rate:g}/s)")
        deadline = started + args.cap
        while time.monotonic() < deadline:
            found = admissions(workloads, jobs, sent)
            waiting = sum(1 for a in found if a.admitted is None)
            if not waiting:
                break
            print(f"  {len(found) - waiting} of {len(found)} admitted ({time.monotonic() - started:.0f} s)")
            time.sleep(10)
        wall = time.monotonic() - started
        result = figures(admissions(workloads, jobs, sent), weights)
        requests = counting.total() - before
        print(f"backend {args.backend}, {args.nodes} nodes x {cfg.profile.gpu.per_node} GPUs, {args.jobs} jobs of "
              f"{args.run_for:g} s, {args.rate:g}/s asked, on {len(os.sched_getaffinity(0))} cores:")
        for line in result.lines():
            print(f"  {line}")
        print(f"  harness: peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB; "
              f"{requests} API requests ({requests / len(jobs):.2f} per job; "
              f"{', '.join(f'{k} {v}' for k, v in sorted(counting.counts.items()))})")
        if target.prometheus_url:
            prometheus = Prometheus(target.prometheus_url)
            for job in (args.scheduler_job or args.backend, "kube-apiserver"):
                print(f"  {process_figures(prometheus, job, int(wall) + 30)}")
            p99 = prometheus.instant('histogram_quantile(0.99, sum by (le) (rate(apiserver_request_duration_seconds_'
                                     f'bucket{{verb!~"WATCH|CONNECT"}}[{int(wall) + 30}s])))')
            print(f"  API server request latency p99: {p99[0].value * 1000:.0f} ms" if p99 else
                  "  API server request latency: not measured")
    finally:
        leftovers = workloads.close()
        if added:
            nodes.remove_nodes(core, added)
        apply_queue_model(target, cfg.profile, say=lambda _: None, slurm=False)
        for line in leftovers:
            print(f"left behind: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

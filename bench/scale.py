"""Scale benchmark on the sim: the scale suite's scenario (harness/scenarios/scale.py) on one backend, printed:
admissions per second, admission latency against queue depth, time to drain, Jain's index, the scheduler's and the
API server's CPU and memory, and whether the harness keeps up (its peak resident memory, its API requests per job
as M grows).

Run (the sim up with the backend under test, e.g. `gpupoc sim up --schedulers kueue`):
    python bench/scale.py --backend kueue                       # the profile's size: 1,000 nodes x 10,000 jobs
    python bench/scale.py --backend kueue --nodes 50 --jobs 500 --run-for 5
    python bench/scale.py --backend volcano --jobs 1000,5000,10000   # requests per job as M grows, one run each
Nodes are added for the run and removed after; the queue model is scaled to them and the reference one put back.
Figures go to the README; nothing here asserts.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

from harness import backends
from harness.core import progress
from harness.scenarios import scale
from harness.config.options import resolve
from harness.criteria.scale.throughput import figures
from harness.config.profile import Profile, ScaleSpec
from harness.cluster.prometheus import Prometheus
from harness.sim import cluster
from harness.targets.target import Target, connect
from harness.jobs.kubernetes import Workloads


def one_run(target: Target, profile: Profile, backend: backends.Backend, spec: ScaleSpec) -> None:
    counter = scale.RequestCount()
    with scale.scaled_cluster(target, profile, spec, apply_model=True) as nodes, counter.counting():
        workloads = Workloads(target.api, backend, f"scale-{int(time.time())}", "bench/scale.py",
                              profile.timeouts.delete, target.seam.as_tenant, simulated=True,
                              workload_spec=profile.workloads)
        try:
            run = scale.run_scenario(workloads, profile, spec, nodes)
            report(target, profile, backend, spec, run, counter)  # before the clean-up, which can take minutes
        finally:
            started = time.monotonic()
            leftovers = workloads.close()
            print(f"deleted the run's objects in {time.monotonic() - started:.0f}s"
                  + "".join(f"\nleft behind: {line}" for line in leftovers))


def report(target: Target, profile: Profile, backend: backends.Backend, spec: ScaleSpec, run: scale.ScaleRun,
           counter: scale.RequestCount) -> None:
    result = figures(run.admissions, {t.name: t.weight for t in profile.tenants}, until=run.ended_at)
    print(f"backend {backend.name}, {run.nodes} nodes x {profile.gpu.per_node} GPUs, {spec.jobs} jobs of "
          f"{spec.run_for_s:g}s, {spec.rate_per_s:g}/s asked, on {len(os.sched_getaffinity(0))} cores"
          + (f"; the {spec.cap_s:.0f}s cap ended the wait" if run.capped else "") + ":")
    for line in result.lines():
        print(f"  {line}")
    print(f"  harness: peak RSS {scale.peak_rss_mib():.0f} MiB; {counter.describe(spec.jobs)}")
    if target.prometheus_url:
        prometheus = Prometheus(target.prometheus_url)
        seconds = int(run.wall_s) + 30
        controllers = backend.controllers
        for line in scale.process_figures(prometheus, (*(controllers.sim + controllers.needs if controllers else ()),
                                                       "kube-apiserver", "etcd"), seconds):
            print(f"  {line}")
        print(f"  {scale.apiserver_p99(prometheus, seconds)}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="kueue")
    parser.add_argument("--nodes", type=int, help="whole GPU nodes for the run (the sim adds what it lacks)")
    parser.add_argument("--jobs", help="jobs per run; a comma-separated list runs once per size")
    parser.add_argument("--rate", type=float, help="submissions per second")
    parser.add_argument("--run-for", type=float, help="seconds each job runs")
    parser.add_argument("--cap", type=float, help="seconds to wait for every admission")
    parser.add_argument("--submitters", type=int, help="submissions at once")
    args = parser.parse_args()
    if not cluster.is_up():
        print("the sim is not up: gpupoc sim up --schedulers <backend>", file=sys.stderr)
        return 2
    cfg = resolve({"backends": args.backend})
    target = connect(cfg)
    backend = backends.ALL[args.backend]
    reason = backend.unavailable_reason(target)
    if reason:
        print(reason, file=sys.stderr)
        return 2
    progress.enable(print)
    spec = cfg.profile.scale
    given = {"nodes": args.nodes, "rate_per_s": args.rate, "run_for_s": args.run_for, "cap_s": args.cap,
             "submitters": args.submitters}
    spec = dataclasses.replace(spec, **{k: v for k, v in given.items() if v is not None})
    for jobs in ([int(j) for j in args.jobs.split(",")] if args.jobs else [spec.jobs]):
        one_run(target, cfg.profile, backend, dataclasses.replace(spec, jobs=jobs))
    return 0


if __name__ == "__main__":
    sys.exit(main())

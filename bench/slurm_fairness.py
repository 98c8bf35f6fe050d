"""Slurm's fair share over time, on the sim's real Slurm: how far each account's share of the GPU-seconds is from its
fair-share shares as contention goes on. It sizes the fairness case on Slurm, which is judged over ranking periods:
Slurm ranks accounts only every PriorityCalcPeriod (a minute), so a share measured over seconds says nothing.

Every tenant of the profile queues whole-node jobs of --run-for seconds, more than it could run in --minutes, from
accounts whose usage is reset to 0 (sacctmgr RawUsage=0: the sim's administrator) and ranked on it by slurmctld, under
the reference model's GPU limits (GrpTRES: the tenants' limit_gpus, team-b at most half the cluster), as the
fairness case does. Every
--every seconds it prints each tenant's share of the GPU-seconds so far and over the last period, against the
weights' shares, and how far the shares so far are from them (what the fairness case calls max_share_deviation).
Everything it submitted is cancelled at the end.

Run (the sim up with slurm, e.g. `gpupoc sim up`):
    python bench/slurm_fairness.py --minutes 12
"""

from __future__ import annotations

import argparse
import sys
import time

from harness import backends
from harness.jobs.model import GangJob
from harness.backends.slurm import SlurmBackend
from harness.config.options import resolve
from harness.criteria.training import queue_fairness as fairness
from harness.core.errors import HarnessError
from harness.sim import cluster
from harness.targets.target import connect
from harness.core.timeline import running_intervals

def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--minutes", type=float, default=12.0, help="how long the contention lasts")
    parser.add_argument("--run-for", type=float, default=10.0, help="seconds each job runs")
    parser.add_argument("--every", type=float, default=30.0, help="seconds between the lines printed")
    args = parser.parse_args()
    if not cluster.component_running("slurmrestd"):
        print("the sim runs no Slurm: gpupoc sim up (with slurm among its schedulers)", file=sys.stderr)
        return 2
    cfg = resolve({"backends": "slurm"})
    target = connect(cfg)
    backend = backends.ALL["slurm"]
    assert isinstance(backend, SlurmBackend)
    reason = backend.unavailable_reason(target)
    if reason:
        print(reason, file=sys.stderr)
        return 2
    profile = cfg.profile
    backend.apply_reference_model(profile)
    period_s = backend.usage_from_zero(profile)
    jobs = backend.job_system(target, profile, f"fs-{int(time.time())}", "bench/slurm_fairness.py", apply_model=False)
    nodes = jobs.capacity_nodes(profile.gpu.resource, profile.gpu.per_node)
    per_tenant = int(nodes * args.minutes * 60 / args.run_for) + nodes
    names = [t.name for t in profile.tenants]
    expected = profile.expected_shares()
    print(f"{len(names)} tenants ({', '.join(f'{n} {expected[n]:.2f}' for n in names)}), {nodes} nodes x "
          f"{profile.gpu.per_node} GPUs; {per_tenant} jobs of {args.run_for:g}s each; fair share recomputed every "
          f"{period_s:.0f}s", flush=True)
    try:
        for i in range(per_tenant):
            for tenant in profile.tenants:
                jobs.submit(GangJob(jobs.job_name(f"fs-{tenant.name}-{i}"), tenant, 1, profile.gpu.per_node,
                                    run_for_s=args.run_for))
        started = time.time()
        print(f"submitted {per_tenant * len(names)} jobs; contention from now", flush=True)
        print(f"{'s':>5}  " + "  ".join(f"{n + ' so far':>14} {n + ' last ' + str(int(period_s)) + 's':>16}"
                                          for n in names) + "  deviation so far", flush=True)
        while (elapsed := time.time() - started) < args.minutes * 60:
            time.sleep(min(args.every, args.minutes * 60 - elapsed))
            now = time.time()
            intervals = fairness.tenant_intervals(running_intervals(jobs.timeline, now), names, "fs-",
                                                  profile.gpu.per_node)
            so_far = fairness.shares(fairness.gpu_seconds(intervals, (started, now)), names)
            last = fairness.shares(fairness.gpu_seconds(intervals, (max(started, now - period_s), now)), names)
            print(f"{now - started:5.0f}  " + "  ".join(f"{so_far[n]:14.3f} {last[n]:16.3f}" for n in names)
                  + f"  {fairness.max_deviation(so_far, expected):.3f}", flush=True)
    finally:
        try:
            left = jobs.close()
        except HarnessError as exc:
            left = [str(exc)]
        print("cancelled the run's jobs" + "".join(f"\nleft behind: {line}" for line in left))
    return 0


if __name__ == "__main__":
    sys.exit(main())

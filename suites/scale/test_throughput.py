"""Scale — scheduler throughput at the profile's size (default on the sim: 1,000 GPU nodes, 10,000 whole-node jobs).

The jobs are submitted at a fixed rate across the tenants, so the queue gets deep; each job's first admission is
taken from the watch events as they arrive. Checked: admissions per second, admission latency p95, the queue
drained within the cap, the tenants' shares (Jain's index) while all waited, and the harness's own memory. Not in
the default run (the record shows it as not run): `gpupoc run --scale on`, or name suites/scale.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from harness.scenarios import scale
from harness.backends import Backend
from harness.backends.base import JOBS_COMPLETE
from harness.config.options import RunConfig
from harness.criteria.scale.throughput import CRITERION, depth_points, figures, over_time
from harness.jobs.system import JobSystem
from harness.config.profile import Profile
from harness.cluster.prometheus import Prometheus
from harness.record.evidence import Evidence
from harness.targets.target import Target
from harness.jobs.kubernetes import Workloads
from suites.training.common import require

pytestmark = pytest.mark.scale


def test_scheduler_throughput(target: Target, backend: Backend, queue_model: Profile, gpupoc_config: RunConfig,
                              workloads: JobSystem, prometheus: Prometheus,
                              evidence: Callable[[str], Evidence]) -> None:
    require(target, backend, JOBS_COMPLETE)
    if not isinstance(workloads, Workloads):
        pytest.skip(f"{backend.name}: the scale scenario is built for Kubernetes job objects; the sim's Slurm runs one "
                    "slurmd per node, which does not reach 1,000 nodes on 2 cores")
    profile, spec, ev = queue_model, queue_model.scale, evidence(CRITERION.id)
    counter = scale.RequestCount()
    with scale.scaled_cluster(target, profile, spec, gpupoc_config.apply_queue_model, say=ev.note) as nodes, \
            counter.counting():
        run = scale.run_scenario(workloads, profile, spec, nodes, say=ev.note)
        workloads.close()  # before the added nodes go: their pods would otherwise wait for the pod GC
    result = figures(run.admissions, {t.name: t.weight for t in profile.tenants}, until=run.ended_at)
    ev.expect("min_sustained_jobs_per_s", round(result.sustained_per_s, 2))
    ev.expect("admission_p95_s", round(result.latency_s["p95"], 2) if result.latency_s else None)
    ev.expect("drain_within_s", None if result.drain_s is None else round(result.drain_s, 1))
    if result.jain is None:
        ev.not_checked("min_jain_index", "the tenants never all waited at once" if len(profile.tenants) > 1
                       else "one tenant: no shares to compare")
    else:
        ev.expect("min_jain_index", round(result.jain, 3))
    ev.expect("max_harness_rss_mib", round(scale.peak_rss_mib()))
    ev.note(f"{nodes} nodes x {profile.gpu.per_node} GPUs, {spec.jobs} jobs of {spec.run_for_s:g}s submitted at "
            f"{spec.rate_per_s:g}/s in {run.submit_s:.1f}s; " + ("the cap ended the wait" if run.capped else
                                                                     f"observed for {run.wall_s:.0f}s"))
    for line in result.lines():
        ev.note(line)
    ev.note(f"harness: {counter.describe(spec.jobs)}")
    seconds = int(run.wall_s) + 30
    controllers = backend.controllers
    for line in scale.process_figures(prometheus, (*(controllers.sim + controllers.needs if controllers else ()),
                                                   "kube-apiserver"), seconds):
        ev.note(line)
    ev.note(scale.apiserver_p99(prometheus, seconds))
    ev.series["admissions"] = over_time(run.admissions)
    ev.series["latency_by_depth"] = {"p95": depth_points(result)}
    ev.verdict()

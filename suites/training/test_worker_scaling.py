"""Batch training 12 — a running Ray cluster's worker group resized, as the Ray autoscaler asks.

The first tenant's RayCluster (a head and one worker, queued by its Kueue LocalQueue as an elastic job) runs; the
case then asks for more workers the way the Ray autoscaler does (the worker group's `replicas`), and for fewer once
they run. Measured from the pods' watch: seconds from each request to the last worker asked for Ready, and to the
last extra one going. What admitted the growth (Kueue's Workload slices) is in the record.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from harness.backends import Backend
from harness.backends.base import ELASTIC_WORKERS
from harness.cluster.tracker import Tracker
from harness.config.profile import Profile
from harness.core.errors import WaitTimeout
from harness.criteria.training.worker_scaling import CRITERION, pod_state, tally
from harness.jobs.kubernetes import Workloads
from harness.jobs.model import GangJob
from harness.record.evidence import Evidence
from harness.targets.target import Target
from suites.training.common import LONG_RUN_S, belongs, require

FROM_WORKERS = 1
TO_WORKERS = 3
GRACE_S = 15.0  # how long past its threshold a step is waited for: the FAIL then says how far it got


def test_worker_scaling(target: Target, backend: Backend, workloads: Workloads, queue_model: Profile,
                        evidence: Callable[[str], Evidence]) -> None:
    resize_run(target, backend, workloads, queue_model, evidence(CRITERION.id), TO_WORKERS)


def resize_run(target: Target, backend: Backend, workloads: Workloads, profile: Profile, ev: Evidence,
               max_workers: int) -> None:
    """`max_workers`: the most the worker group allows (below TO_WORKERS: a misconfiguration)."""
    require(target, backend, ELASTIC_WORKERS)
    tenant = profile.tenants[0]
    job = workloads.gang("ray-elastic", tenant, 1 + FROM_WORKERS, 1, run_for_s=LONG_RUN_S)
    elastic = backend.elastic(job, max_workers)
    assert elastic is not None  # ELASTIC_WORKERS says so
    pods = workloads.pods(tenant.namespace)
    owned = workloads.owned(tenant.namespace)  # before the apply: every slice of it seen
    workloads.apply(tenant, elastic.manifests, queued=True)
    ev.note(f"a RayCluster of a head and {FROM_WORKERS} worker ({job.gpus_per_pod} GPU each) for {tenant.name}, "
            f"its worker group allowing {max_workers}; asked for {TO_WORKERS} workers, then {FROM_WORKERS}")

    def workers(objs: dict[str, dict[str, Any]]) -> list[str]:
        return [pod_state(p) for p in objs.values() if belongs(p, job) and elastic.is_worker(p)]

    def state(objs: dict[str, dict[str, Any]]) -> str:
        return f"workers: {tally(workers(objs))}"

    pods.wait_until(f"{job.name} running with {FROM_WORKERS} worker", lambda o: workers(o).count("ready") ==
                    FROM_WORKERS and len(pods_of(o, job)) == 1 + FROM_WORKERS, profile.timeouts.admit,
                    describe=state)
    api = workloads.client_for(tenant)
    for threshold, want, done in (
            ("scale_up_within_s", TO_WORKERS, lambda o: workers(o).count("ready") == TO_WORKERS),
            ("scale_down_within_s", FROM_WORKERS, lambda o: len(workers(o)) - workers(o).count("going")
             == FROM_WORKERS)):
        asked = time.time()
        elastic.resize(api, want)
        ev.expect(threshold, round(step(pods, ev, threshold, f"{want} workers", done, state) - asked, 2))
    ev.tables["the job's pods"] = [{"pod": p["metadata"]["name"], "worker": elastic.is_worker(p),
                                    "state": pod_state(p)}
                                   for p in {**pods.gone, **pods.objects}.values() if belongs(p, job)]
    if owned is not None:
        slices = [w for w in {**owned.gone, **owned.objects}.values() if owned_by(w, job)]
        ev.note("admitted by the queue as: " + ("; ".join(slice_of(w) for w in slices) or "nothing"))
    ev.verdict()


def step(pods: Tracker, ev: Evidence, threshold: str, what: str, done: Callable[[dict[str, Any]], bool],
         state: Callable[[dict[str, Any]], str]) -> float:
    """When `done` was seen; past the threshold and its grace, when the wait gave up (the FAIL's measured value)."""
    try:
        pods.wait_until(what, done, ev.thresholds[threshold] + GRACE_S, describe=state)
    except WaitTimeout as exc:
        ev.note(f"{threshold}: {exc}")
    return time.time()


def pods_of(objs: dict[str, dict[str, Any]], job: GangJob) -> list[dict[str, Any]]:
    return [p for p in objs.values() if belongs(p, job) and not p["metadata"].get("deletionTimestamp")]


def owned_by(obj: dict[str, Any], job: GangJob) -> bool:
    return any(r.get("name") == job.name for r in obj["metadata"].get("ownerReferences") or [])


def slice_of(workload: dict[str, Any]) -> str:
    """A Kueue Workload (a slice of the elastic job) in a few words: its pod sets' counts, admitted or not."""
    counts = ", ".join(f"{s.get('name')} {s.get('count')}" for s in (workload.get("spec") or {}).get("podSets") or [])
    conditions = {c.get("type"): c.get("status") for c in (workload.get("status") or {}).get("conditions") or []}
    state = ("replaced or finished" if conditions.get("Finished") == "True" else
             "admitted" if conditions.get("Admitted") == "True" else "pending")
    return f"{workload['metadata']['name']} ({counts}; {state})"

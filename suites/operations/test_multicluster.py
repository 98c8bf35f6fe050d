"""Operations 3 — one queue over two clusters: Kueue MultiKueue, a manager's queue dispatching to worker clusters.

The cluster under test is the manager; on the sim the case brings up two worker sims (Kueue, 2 GPU nodes each) and
joins them (harness/setup/multicluster.py). Each tenant submits one job to the shared queue on the manager. Measured
from the clusters' own objects: seconds from each job's submission on the manager to its pod running on a worker;
the manager queue's GPUs in use against the workers' queues' together; a worker then taken away (its sim down, its
API server gone) and the seconds until each of its jobs runs on the other worker; jobs lost or seen running on two
workers at once; each tenant's GPU-hours read on the manager (its Jobs' status, which MultiKueue copies from the
worker) against the sums read on the workers.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from harness.backends import Backend
from harness.backends.base import MULTICLUSTER
from harness.backends.kueue import API_VERSION, cluster_queue_gpus
from harness.cluster.apply import dynamic_client
from harness.cluster.reach import OtherCluster
from harness.cluster.tracker import Tracker
from harness.config.profile import Profile
from harness.core import progress
from harness.criteria.operations.multicluster import CRITERION, job_gpu_seconds, relative_error, run_twice
from harness.criteria.training.capacity_elasticity import running_at, timestamp
from harness.jobs.model import JOB_LABEL, SUCCEEDED, GangJob
from harness.jobs.system import JobSystem
from harness.record.evidence import Evidence
from harness.setup.multicluster import CA_BY_PATH_ENV, QUEUE, connect, disconnect, tenant_on_queue
from harness.targets.target import Target
from suites.training.common import require

WORKERS = 2
RUN_FOR_S = 30.0  # long enough to be running when a worker is taken away, and to run again on the other
GRACE_S = 15.0  # how long past its threshold a step is waited for: the FAIL then says how far it got
POLL_S = 0.5
VIEW_SETTLE_S = 10.0  # how long the two views may take to agree (the workers' usage reaches the manager)


def test_multicluster(target: Target, backend: Backend, workloads: JobSystem, queue_model: Profile,
                      evidence: Callable[[str], Evidence]) -> None:
    require(target, backend, MULTICLUSTER)
    ev = evidence(CRITERION.id)
    with worker_clusters(target, queue_model) as (workers, take_away):
        multicluster_run(target, workloads, queue_model, workers, take_away, ev)


@contextlib.contextmanager
def worker_clusters(target: Target, profile: Profile) -> Iterator[tuple[list[OtherCluster], Callable[[str], str]]]:
    """The worker clusters and how to take one away: on the sim, worker sims this case brings up and down."""
    if not target.features.own_processes:
        pytest.skip("one queue over clusters needs worker clusters: on the sim the case starts them; naming a real "
                    "cluster's workers in the profile is not built")
    with target.worker_clusters(WORKERS, profile.gpu.per_node) as sims:
        by_name = {s.name: s for s in sims}
        yield [s.cluster() for s in sims], lambda name: by_name[name].down()


class Watch:
    """What the workers show of the case's jobs, from one watch per worker and namespace: where each job's pod
    runs and since when, and the workers' copies of the Jobs (MultiKueue deletes a copy as soon as the manager has
    read its end; a watch keeps its last state)."""

    def __init__(self, workers: list[OtherCluster], jobs: list[GangJob]) -> None:
        self.workers, self.jobs = list(workers), jobs
        self.namespaces = sorted({j.tenant.namespace for j in jobs})
        self.started: dict[tuple[str, str], float] = {}  # (job, worker) -> when its pod ran there (server time)
        self.samples: list[dict[str, set[str]]] = []
        names = ",".join(j.name for j in jobs)
        self.pods = {(w.name, ns): Tracker(w.api, "v1", "Pod", namespace=ns,
                                           label_selector=f"{JOB_LABEL} in ({names})").start()
                     for w in workers for ns in self.namespaces}
        self.copies = {(w.name, ns): Tracker(w.api, "batch/v1", "Job", namespace=ns).start()
                       for w in workers for ns in self.namespaces}

    def poll(self) -> dict[str, set[str]]:
        """Where each job runs now, as the watches last saw it."""
        sample: dict[str, set[str]] = {j.name: set() for j in self.jobs}
        live = {w.name for w in self.workers}
        for (worker, _ns), tracker in self.pods.items():
            if worker not in live:
                continue
            for pod in list(tracker.objects.values()):
                job, ran = pod["metadata"]["labels"][JOB_LABEL], running_at(pod)
                if ran is not None and job in sample:
                    sample[job].add(worker)
                    self.started.setdefault((job, worker), ran)
        self.samples.append(sample)
        return sample

    def drop(self, name: str) -> None:
        """A worker taken away: no more polls or watches of it (what was seen of it stays)."""
        self.workers = [w for w in self.workers if w.name != name]
        for (worker, _ns), tracker in [*self.pods.items(), *self.copies.items()]:
            if worker == name:
                tracker.stop(wait=False)

    def stop(self) -> None:
        for tracker in [*self.pods.values(), *self.copies.values()]:
            tracker.stop(wait=False)

    def worker_jobs(self, job: str) -> list[dict[str, Any]]:
        """The last state of each worker's copy of the job."""
        return [obj for tracker in self.copies.values() for name, obj in {**tracker.gone, **tracker.objects}.items()
                if name == job]

    def until(self, what: str, done: Callable[[dict[str, set[str]]], bool], timeout_s: float,
              stop: Callable[[], str] = lambda: "") -> tuple[bool, str]:
        """Poll until `done`, `timeout_s` or `stop` says why not; (done, why not)."""
        deadline, waiting = time.monotonic() + timeout_s, progress.Waiting(what, timeout_s)
        while time.monotonic() < deadline:
            sample = self.poll()
            if done(sample):
                return True, ""
            waiting.tick(lambda: "; ".join(f"{job} on {', '.join(sorted(on)) or 'no worker'}"
                                           for job, on in sample.items()))
            why = stop()
            if why:
                return False, why
            time.sleep(POLL_S)
        return False, f"not within {timeout_s:.0f} s"

    def where(self, job: str) -> set[str]:
        return self.samples[-1].get(job, set()) if self.samples else set()


def multicluster_run(target: Target, workloads: JobSystem, profile: Profile, workers: list[OtherCluster],
                     take_away: Callable[[str], str], ev: Evidence) -> None:
    tenants = [tenant_on_queue(t) for t in profile.tenants[:2]]
    resource, per_node = profile.gpu.resource, profile.gpu.per_node
    ca_by_path = os.environ.get(CA_BY_PATH_ENV) == "1"
    with target.seam.requests.not_the_runners():  # the sim admin's join of its worker sims, not the runner's
        gpus = connect(target.admin_api, workers, tenants, resource, ca_by_path)
    ev.note(f"{len(workers)} worker clusters ({', '.join(f'{n}: {g} GPUs' for n, g in gpus.items())}) joined to the "
            f"manager's queue {QUEUE} (their GPUs together: {sum(gpus.values())})"
            + ("; their kubeconfigs name the CA by path (misconfigured on purpose)" if ca_by_path else ""))
    jobs = [workloads.gang(f"mc-{t.name}", t, 1, per_node, run_for_s=RUN_FOR_S) for t in tenants]
    watch = Watch(workers, jobs)
    try:
        measure(target, workloads, profile, watch, take_away, jobs, ev)
    finally:
        watch.stop()
        for job in jobs:
            workloads.delete(job)
        with target.seam.requests.not_the_runners():
            left = disconnect(target.admin_api) + [f"{w.name}: {p}" for w in workers for p in disconnect_if_up(w)]
        if left:
            ev.note("left behind: " + "; ".join(left))


def measure(target: Target, workloads: JobSystem, profile: Profile, watch: Watch, take_away: Callable[[str], str],
            jobs: list[GangJob], ev: Evidence) -> None:
    thresholds = ev.thresholds
    queued = {ns: workloads.jobs(ns) for ns in watch.namespaces}
    for job in jobs:
        workloads.submit(job)
    ev.note(f"{len(jobs)} jobs of 1 pod x {jobs[0].gpus_per_pod} GPUs, one per tenant, each running {RUN_FOR_S:g} s")
    submitted = {j.name: manager_job(target, j) for j in jobs}
    ran, why = watch.until("each job running on a worker", lambda s: all(s[j.name] for j in jobs),
                           thresholds["max_dispatch_s"] + GRACE_S,
                           stop=lambda: workers_refused(target))
    dispatch = {j.name: dispatch_s(submitted[j.name], watch, j.name) for j in jobs}
    waits = [dispatch[j.name] for j in jobs]
    if None in waits and why.startswith(REFUSED):
        ev.expect("max_dispatch_s", None)  # never: no worker can take them
    else:  # a job not running anywhere: its wait so far
        now = time.time()
        ev.expect("max_dispatch_s", max(w if w is not None else round(now - created(submitted[j.name]), 1)
                                        for j, w in zip(jobs, waits)))
    if not ran:
        ev.note(f"dispatch: {why}; " + "; ".join(f"{j.name}: {dispatch_state(target, j)}" for j in jobs))
        for name in ("max_usage_view_error_gpus", "max_redispatch_s", "max_gpu_hours_error"):
            ev.not_checked(name, "the jobs were not all running on a worker")
        ev.expect("max_jobs_lost", sum(1 for w in waits if w is None))  # never ran within the case
        ev.expect("max_jobs_run_twice", len(run_twice(watch.samples)))
        ev.verdict()
        return
    ev.expect("max_usage_view_error_gpus", usage_view_error(target, watch.workers, profile.gpu.resource))
    redispatched = take_one_away(watch, take_away, jobs, thresholds["max_redispatch_s"] + GRACE_S, ev)
    ended = all_ended(workloads, watch, queued, jobs, profile.timeouts.complete)
    ev.expect("max_jobs_lost", len(jobs) - len(ended))
    ev.expect("max_jobs_run_twice", len(run_twice(watch.samples)))
    hours_manager = per_tenant({j.tenant.name: job_gpu_seconds(manager_job(target, j), j.gpus_per_pod) for j in jobs})
    hours_clusters = per_tenant({j.tenant.name: sum_over_workers(watch, j) for j in jobs})
    if None in hours_manager.values() or None in hours_clusters.values():
        ev.not_checked("max_gpu_hours_error", "a job's start or end was not read on the manager and on its worker")
    else:
        ev.expect("max_gpu_hours_error", relative_error({t: h or 0.0 for t, h in hours_manager.items()},
                                                        {t: h or 0.0 for t, h in hours_clusters.items()}))
    ev.tables["each job, on the manager and on the workers"] = [{
        "job": j.name, "tenant": j.tenant.name,
        "first ran on": next((w for (n, w) in watch.started if n == j.name), "never"),
        "dispatch s": dispatch[j.name] if dispatch[j.name] is not None else "never",
        "re-dispatched s": redispatched.get(j.name, "-"),
        "ran on": ", ".join(sorted(w for (n, w) in watch.started if n == j.name)) or "none",
        "ended": "succeeded" if j.name in ended else "not finished",
        "GPU-hours, manager": _hours(hours_manager.get(j.tenant.name)),
        "GPU-hours, workers": _hours(hours_clusters.get(j.tenant.name))} for j in jobs]
    ev.verdict()


def manager_job(target: Target, job: GangJob) -> dict[str, Any]:
    obj = client.BatchV1Api(target.api).read_namespaced_job(job.name, job.tenant.namespace)
    return dict(target.api.sanitize_for_serialization(obj))


def created(obj: dict[str, Any]) -> float:
    return timestamp(obj["metadata"]["creationTimestamp"]) or time.time()


def dispatch_s(submitted: dict[str, Any], watch: Watch, job: str) -> float | None:
    """Seconds from the job's creation on the manager to its pod first running on a worker, None if never."""
    first = min((t for (n, _w), t in watch.started.items() if n == job), default=None)
    return round(max(0.0, first - created(submitted)), 1) if first is not None else None


# A worker the manager's Kueue refuses for good: its kubeconfig, not its reachability (multikueuecluster.go)
PERMANENT = ("InsecureKubeConfig", "BadKubeConfig", "BadClusterProfile", "BadRestConfig")
REFUSED = "every worker refused"


def workers_refused(target: Target) -> str:
    """Why no job can ever be dispatched: every worker the manager knows refused for a reason that does not pass
    (its Active condition); '' while one is active or may still become so."""
    states = []
    for obj in _objects(target.api, "MultiKueueCluster"):
        active = next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == "Active"),
                      None)
        if active is None or active.get("status") == "True" or active.get("reason") not in PERMANENT:
            return ""
        states.append(f"MultiKueueCluster {obj['metadata']['name']}: Active False, {active.get('reason')}: "
                      f"{str(active.get('message', ''))[:200]}")
    return f"{REFUSED}: " + "; ".join(states) if states else ""


def dispatch_state(target: Target, job: GangJob) -> str:
    """The manager's Workload of the job: its MultiKueue check and where it was sent."""
    for obj in _objects(target.api, "Workload", job.tenant.namespace):
        if any(r.get("name") == job.name for r in obj["metadata"].get("ownerReferences") or []):
            status = obj.get("status") or {}
            checks = "; ".join(f"{c.get('name')} {c.get('state')} {c.get('message', '')}".strip()
                               for c in status.get("admissionChecks") or [])
            return f"check {checks or 'none yet'}, cluster {status.get('clusterName') or 'none'}"
    return "no Workload on the manager"


def _objects(api: client.ApiClient, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
    resource = dynamic_client(api).resources.get(api_version=API_VERSION, kind=kind)
    return [dict(o) for o in resource.get(namespace=namespace).to_dict()["items"]]


def usage_view_error(target: Target, workers: list[OtherCluster], resource: str) -> float:
    """|the manager queue's GPUs in use - the workers' queues' together|, once they agree or after a while."""
    deadline, error = time.monotonic() + VIEW_SETTLE_S, 0.0
    while True:
        manager = cluster_queue_gpus(_queue(target.api), resource)
        on_workers = sum(cluster_queue_gpus(_queue(w.api), resource) for w in workers)
        error = abs(manager - on_workers)
        if error == 0 or time.monotonic() > deadline:
            return error
        time.sleep(POLL_S)


def _queue(api: client.ApiClient) -> dict[str, Any]:
    obj = dynamic_client(api).resources.get(api_version=API_VERSION, kind="ClusterQueue").get(name=QUEUE)
    return dict(obj.to_dict())


def take_one_away(watch: Watch, take_away: Callable[[str], str], jobs: list[GangJob], timeout_s: float,
                  ev: Evidence) -> dict[str, float]:
    """Take away the worker running most of the jobs; seconds until each of its jobs runs on another worker."""
    running = {w.name: [j.name for j in jobs if w.name in watch.where(j.name)] for w in watch.workers}
    victim = max(running, key=lambda name: len(running[name]))
    moved = running[victim]
    gone_at = time.time()
    progress.say(f"  worker {victim} taken away (its sim down) while running {', '.join(moved)}")
    problem = take_away(victim)
    watch.drop(victim)
    ev.note(f"worker {victim} taken away (its API server stopped) while running {', '.join(moved)}"
            + (f"; stopping it said: {problem}" if problem else ""))
    done, why = watch.until(f"the jobs of {victim} running on another worker",
                            lambda s: all(s[name] for name in moved), timeout_s)
    seconds = {name: round(max(0.0, t - gone_at), 1) for (name, w), t in watch.started.items()
               if name in moved and w != victim}
    worst = max(seconds.values(), default=0.0) if done else round(time.time() - gone_at, 1)
    if not done:
        ev.note(f"after {victim} was taken away: {len(seconds)} of {len(moved)} jobs running elsewhere, {why}")
    ev.expect("max_redispatch_s", worst)
    return seconds


def all_ended(workloads: JobSystem, watch: Watch, queued: dict[str, Any], jobs: list[GangJob],
              timeout_s: float) -> set[str]:
    """The jobs whose Workload on the manager finished successfully, waited for up to `timeout_s` (the workers
    watched meanwhile: their copies of the Jobs, read before MultiKueue deletes them)."""
    deadline, waiting = time.monotonic() + timeout_s, progress.Waiting("each job finished on the manager", timeout_s)
    while True:
        watch.poll()
        ended = {j.name for j in jobs if (s := workloads.status_of(j, queued[j.tenant.namespace].objects))
                 and s.state == SUCCEEDED}
        if len(ended) == len(jobs) or time.monotonic() > deadline:
            return ended
        waiting.tick(lambda: f"{len(ended)} of {len(jobs)} finished")
        time.sleep(POLL_S)


def sum_over_workers(watch: Watch, job: GangJob) -> float | None:
    """GPU-seconds of the job's runs that ended on a worker still there (read from its Job there)."""
    runs = [job_gpu_seconds(obj, job.gpus_per_pod) for obj in watch.worker_jobs(job.name)]
    ended = [r for r in runs if r is not None]
    return sum(ended) if ended else None


def per_tenant(values: dict[str, float | None]) -> dict[str, float | None]:
    return {tenant: (v / 3600 if v is not None else None) for tenant, v in values.items()}


def _hours(value: float | None) -> str:
    return f"{value:.4f}" if value is not None else "not read"


def disconnect_if_up(worker: OtherCluster) -> list[str]:
    try:
        client.VersionApi(worker.api).get_code(_request_timeout=2)
    except Exception:  # noqa: BLE001 - taken away by the case: nothing to clean there
        return []
    return disconnect(worker.api)


"""The scale scenario on a cluster: N whole GPU nodes (the sim adds what it lacks), the queue model scaled to them,
M whole-node jobs submitted at a fixed rate across the tenants, each job's first admission taken from the watch
events of its object and its pods as they arrive (one watch per kind per namespace; nothing read per job).
`suites/scale/` checks the figures against the profile; `bench/scale.py` prints them."""

from __future__ import annotations

import collections
import dataclasses
import resource
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from kubernetes import client
from kubernetes.client import rest

from harness.core import progress
from harness.jobs.model import GangJob, job_of, pod_state
from harness.criteria.scale.throughput import Admission
from harness.core.errors import HarnessError
from harness.config.profile import Profile, ScaleSpec
from harness.cluster.prometheus import Prometheus
from harness.setup.queue_model import apply_queue_model
from harness.record import operations
from harness.targets.target import Target
from harness.jobs.kubernetes import Workloads

ADMITTED = ("admitted", "running", "succeeded", "failed")  # a job object past admission
BOUND = ("bound", "running", "succeeded", "failed")  # a pod placed on a node
PROGRESS_S = 10.0


class RequestCount:
    """Every request this process's Kubernetes clients send while counting (a watch counts once, however long it
    streams): whether the harness's requests per job stay flat as the queue grows."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()

    @contextmanager
    def counting(self) -> Iterator[RequestCount]:
        original, counts = rest.RESTClientObject.request, self.counts

        def counted(obj: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            counts["watch" if "watch=true" in url.lower() else method] += 1
            return original(obj, method, url, *args, **kwargs)
        rest.RESTClientObject.request = counted
        try:
            yield self
        finally:
            rest.RESTClientObject.request = original

    def total(self) -> int:
        return sum(self.counts.values())

    def describe(self, jobs: int) -> str:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        return f"{self.total()} API requests ({self.total() / max(1, jobs):.2f} per job; {kinds})"


def peak_rss_mib() -> float:
    """This process's peak resident memory so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def scaled_profile(profile: Profile, gpus: int) -> Profile:
    """Each tenant's quota by its weight, the whole cluster as its limit: the scheduler, not a quota, limits."""
    weight = sum(t.weight for t in profile.tenants)
    tenants = tuple(dataclasses.replace(t, quota_gpus=int(gpus * t.weight / weight), limit_gpus=gpus)
                    for t in profile.tenants)
    return dataclasses.replace(profile, tenants=tenants)


@contextmanager
def scaled_cluster(target: Target, profile: Profile, spec: ScaleSpec, apply_model: bool,
                   say: Callable[[str], None] = print) -> Iterator[int]:
    """The cluster at the scenario's size for the block: on the sim, simulated GPU nodes added up to `spec.nodes`
    (removed after); with `apply_model`, the queue model scaled to the GPUs (the reference one put back after).
    Yields the whole GPU nodes the run has. A real cluster runs on what it has: nothing is added."""
    core = client.CoreV1Api(target.api)
    have = sum(1 for n in core.list_node().items
               if int((n.status.allocatable or {}).get(profile.gpu.resource, "0")) >= profile.gpu.per_node)
    added: list[str] = []
    try:
        if target.features.adds_nodes and spec.nodes > have:
            started = time.monotonic()
            with target.seam.requests.not_the_runners():  # the sim's own nodes: not the runner's job
                added = target.add_gpu_nodes(spec.nodes - have, profile.gpu.per_node,
                                             timeout_s=max(120.0, spec.nodes / 2))
            say(f"added {len(added)} simulated GPU nodes in {time.monotonic() - started:.1f}s")
        total = have + len(added)
        if apply_model:
            with target.seam.requests.not_the_runners():  # an admin's set-up, not in the runner's role
                apply_queue_model(target.as_admin(), scaled_profile(profile, total * profile.gpu.per_node),
                                  say=lambda _: None, slurm=False)
        yield total
    finally:
        if apply_model:
            with target.seam.requests.not_the_runners():
                apply_queue_model(target.as_admin(), profile, say=lambda _: None, slurm=False)
        if added:
            with target.seam.requests.not_the_runners():
                target.remove_nodes(added)


class FirstAdmission:
    """The first moment each job was past admission: its own object admitted, or any of its pods bound. Fed by the
    trackers' listeners, event by event (constant work per event, whatever the queue's depth)."""

    def __init__(self, workloads: Workloads, jobs: list[GangJob]) -> None:
        self._workloads, self._names = workloads, {job.name for job in jobs}
        self.at: dict[str, float] = {}
        self.all_admitted = threading.Event()
        self._lock = threading.Lock()

    def watch(self, namespace: str) -> None:
        self._workloads.jobs(namespace).on_event(self._job_event)
        self._workloads.pods(namespace).on_event(self._pod_event)

    def _admit(self, name: str | None) -> None:
        if name in self._names:
            with self._lock:
                self.at.setdefault(name, time.time())
                if len(self.at) == len(self._names):
                    self.all_admitted.set()

    def _job_event(self, event: str, obj: dict[str, Any]) -> None:
        if event == "DELETED" or self._workloads.backend.status(obj).state not in ADMITTED:
            return
        meta = obj.get("metadata") or {}
        names = [meta.get("name"), *(o.get("name") for o in meta.get("ownerReferences") or [])]  # Kueue: its Workload
        self._admit(next((n for n in names if n in self._names), None))

    def _pod_event(self, event: str, pod: dict[str, Any]) -> None:
        if event != "DELETED" and pod_state(pod) in BOUND:
            self._admit(job_of(pod))


@dataclasses.dataclass
class ScaleRun:
    admissions: list[Admission]
    nodes: int
    submit_s: float     # from the first submission to the last
    wall_s: float       # from the first submission to the end of observation
    capped: bool        # the cap ended the wait before every job was admitted
    ended_at: float     # when observation ended (epoch seconds)


def whole_node_jobs(workloads: Workloads, profile: Profile, spec: ScaleSpec) -> list[GangJob]:
    """`spec.jobs` whole-node jobs, the tenants in turn by their weights (3:1 -> a, a, a, b, ...)."""
    order = [t for t in profile.tenants for _ in range(max(1, round(t.weight)))]
    return [workloads.gang(f"s{i}", order[i % len(order)], 1, profile.gpu.per_node,
                           run_for_s=spec.run_for_s) for i in range(spec.jobs)]


def run_scenario(workloads: Workloads, profile: Profile, spec: ScaleSpec, nodes_: int,
                 say: Callable[[str], None] = print) -> ScaleRun:
    """Submit the jobs at `spec.rate_per_s` (`spec.submitters` at once) and watch until each is admitted or the cap
    ends the wait; the watches' own errors end it early."""
    jobs = whole_node_jobs(workloads, profile, spec)
    first = FirstAdmission(workloads, jobs)
    namespaces = sorted({job.tenant.namespace for job in jobs})
    for namespace in namespaces:
        first.watch(namespace)
    sent: dict[str, float] = {}
    started = time.monotonic()

    def submit(index_job: tuple[int, GangJob]) -> None:
        index, job = index_job
        delay = started + index / spec.rate_per_s - time.monotonic()
        if delay > 0:
            time.sleep(delay)  # the rate's schedule, not a wait for the cluster
        at = time.time()
        workloads.submit(job)
        sent[job.name] = at

    with ThreadPoolExecutor(spec.submitters, thread_name_prefix="submit") as pool:
        for _ in pool.map(submit, enumerate(jobs)):
            pass
    submit_s = time.monotonic() - started
    say(f"submitted {len(jobs)} jobs in {submit_s:.1f}s ({len(jobs) / max(submit_s, 1e-9):.1f}/s; asked "
        f"{spec.rate_per_s:g}/s, {spec.submitters} at once)")
    deadline = started + spec.cap_s
    # the cap counts from the first submission: what is left of it once the last job is in
    waiting = progress.Waiting(f"{len(jobs)} jobs admitted", max(0.0, deadline - time.monotonic()))
    while not first.all_admitted.is_set() and time.monotonic() < deadline:
        for namespace in namespaces:
            for tracker in (workloads.jobs(namespace), workloads.pods(namespace)):
                if tracker.error is not None:
                    raise HarnessError(f"the watch on {tracker.kind} in {namespace} broke after "
                                       f"{len(first.at)} of {len(jobs)} admissions: {tracker.error}")
        waiting.tick(lambda: f"{len(first.at)} of {len(jobs)} admitted")
        first.all_admitted.wait(min(PROGRESS_S, max(0.0, deadline - time.monotonic())))
    wall = time.monotonic() - started
    admissions = [Admission(job.tenant.name, sent[job.name], first.at.get(job.name), job.gpus) for job in jobs]
    return ScaleRun(admissions, nodes_, submit_s, wall, capped=not first.all_admitted.is_set(), ended_at=time.time())


def process_figures(prometheus: Prometheus, components: tuple[str, ...], seconds: int) -> list[str]:
    """CPU and peak resident memory over the run of each component (the backend's controllers, the API server),
    from their own process metrics; what Prometheus does not scrape is "not measured"."""
    window = int(seconds)
    usage = operations.usage_by_job(
        [(s.labels, s.value) for s in prometheus.instant(operations.CPU_QUERY.format(window=window))],
        [(s.labels, s.value) for s in prometheus.instant(operations.MEMORY_QUERY.format(window=window))])
    lines = []
    for row in operations.usage_rows(list(components), usage, float(window)):
        lines.append(f"{row['component']}: {row['CPU (s)']} CPU-s ({row['CPU (cores, mean)']} cores), "
                     f"memory peak {row['memory peak (MiB)']} MiB")
    return lines


def apiserver_p99(prometheus: Prometheus, seconds: int) -> str:
    p99 = prometheus.instant('histogram_quantile(0.99, sum by (le) (rate(apiserver_request_duration_seconds_bucket'
                             f'{{verb!~"WATCH|CONNECT"}}[{seconds}s])))')
    return (f"API server request latency p99 {p99[0].value * 1000:.0f} ms (its own histogram, WATCH excluded)"
            if p99 else "API server request latency: not measured")

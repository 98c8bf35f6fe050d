"""Kueue's published scheduler baseline (kueue test/performance/scheduler, configs/baseline) on the sim's real Kueue.

5 cohorts x 6 ClusterQueues, 15,000 bare Workloads in three classes created at the pace of Kueue's generator; a
runner thread marks each admitted Workload Finished after its running time and gives an evicted one's quota back,
as Kueue's perf runner does. Prints first creation -> last admission / last finish, admission latency per class,
and Kueue's published figures beside ours; what those figures are: bench/KUEUE_BASELINE.md.

Run (the sim up with Kueue, e.g. `gpupoc sim up`):
    .venv/bin/python bench/kueue_baseline.py --scale 0.02     # 300 workloads, under a minute
    .venv/bin/python bench/kueue_baseline.py --cap 900        # all 15,000
Everything it creates is named kb-*, labelled gpupoc.io/bench=kueue-baseline, and deleted at the end (Ctrl-C too).
"""

from __future__ import annotations

import argparse
import functools
import heapq
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import urllib3.exceptions
import yaml
from kubernetes import client, config as kube_config
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from harness.core.objects import condition_time, condition_true as is_true, created_at
from harness.sim import cluster
from harness.config.versions import load_pins
from harness.core.timeline import percentile
from harness.cluster.wait import RELIST, SYNCED, ApiSource, events

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"  # v1beta2: Kueue v0.19's storage version, and what its perf test uses
LABEL, BENCH, CLASS_LABEL = "gpupoc.io/bench", "kueue-baseline", "gpupoc.io/kb-class"
SELECTOR = f"{LABEL}={BENCH}"
FLAVOR, LOCAL_QUEUE, RUNNER = "kb-rf", "kb-lq", "gpupoc-kueue-baseline"
COHORTS, QUEUES_PER_COHORT, NOMINAL_CPU, BORROWING_LIMIT_CPU = 5, 6, "20", "100"
CREATORS, RUNNERS = 16, 8  # concurrent creates; concurrent finishes and requeues (a pool each, as Kueue's runner)
PROGRESS_S, SETUP_TIMEOUT_S, DELETE_TIMEOUT_S = 10.0, 60.0, 600.0
WATCH_FOR_S = 7 * 24 * 3600.0  # the run stops the watch
# (cohort, ClusterQueue); each ClusterQueue has a namespace of its name holding LocalQueue kb-lq
QUEUES = [(f"kb-cohort-{c}", f"kb-c{c}-q{q}") for c in range(COHORTS) for q in range(QUEUES_PER_COHORT)]
PUBLISHED_WALL_S, PUBLISHED_WALL_CEILING_S = 351.1, 425.0  # rangespec.yaml cmd.maxWallMs: its comment, its value


@dataclass(frozen=True)
class WorkloadClass:
    name: str
    per_queue: int
    interval_s: float
    cpu: int
    running_s: float
    priority: int
    published_avg_s: float  # rangespec.yaml wlClassesMaxAvgTimeToAdmissionMs: the measured average, the ceiling
    published_ceiling_s: float


CLASSES = (WorkloadClass("small", 350, 0.1, 1, 0.2, 50, 215.5, 260.0),
           WorkloadClass("medium", 100, 0.5, 5, 0.5, 100, 76.8, 90.0),
           WorkloadClass("large", 50, 1.2, 20, 1.0, 200, 16.5, 23.0))


@dataclass
class Seen:
    """One workload: client clocks (time.time()) and server timestamps (whole seconds)."""
    cls: WorkloadClass
    created: float | None = None          # the create call was sent
    created_server: float | None = None   # creationTimestamp
    admitted: float | None = None         # the watch first showed Admitted=True
    admitted_server: float | None = None  # that condition's lastTransitionTime
    finished: float | None = None
    admissions: int = 0
    active: bool = False                  # Admitted=True now
    evictions: int = 0
    evicting: bool = False                # evicted, its quota still reserved


def now_stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def meta(name: str, namespace: str | None = None, **labels: str) -> dict[str, Any]:
    return {"name": name, "labels": {LABEL: BENCH, **labels}, **({"namespace": namespace} if namespace else {})}


def kueue_object(kind: str, metadata: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": metadata, **fields}


def cluster_queue(name: str, cohort: str) -> dict[str, Any]:
    quota = {"name": "cpu", "nominalQuota": NOMINAL_CPU, "borrowingLimit": BORROWING_LIMIT_CPU}
    return kueue_object("ClusterQueue", meta(name), spec={
        "cohortName": cohort, "namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": FLAVOR, "resources": [quota]}]}],
        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}})


def workload(name: str, namespace: str, cls: WorkloadClass) -> dict[str, Any]:
    pod = {"restartPolicy": "Never", "containers": [{"name": "c", "resources": {"requests": {"cpu": str(cls.cpu)}}}]}
    return kueue_object("Workload", meta(name, namespace, **{CLASS_LABEL: cls.name}), spec={
        "queueName": LOCAL_QUEUE, "priority": cls.priority,
        "podSets": [{"name": "main", "count": 1, "template": {"spec": pod}}]})


def schedule(scale: float) -> list[tuple[float, str, str, WorkloadClass]]:
    """(due s after start, namespace, name, class): in every queue each class one per interval, side by side, as
    Kueue's generator (it sleeps the interval before each create)."""
    return sorted((((i + 1) * cls.interval_s, ns, f"{cls.name}-{i}", cls) for _, ns in QUEUES for cls in CLASSES
                   for i in range(max(1, round(cls.per_queue * scale)))), key=lambda p: p[0])


def wait_empty(what: str, left: Callable[[], list[str]], timeout_s: float) -> list[str]:
    """Poll until `left()` is empty or the timeout; what is still left (progress every PROGRESS_S)."""
    deadline, said = time.monotonic() + timeout_s, time.monotonic()
    while (remaining := left()) and time.monotonic() < deadline:
        if time.monotonic() - said > PROGRESS_S:
            print(f"  {what}: {len(remaining)} left, e.g. {remaining[0]}", flush=True)
            said = time.monotonic()
        time.sleep(0.5)
    return remaining


class Bench:
    def __init__(self, api: client.ApiClient, scale: float) -> None:
        self.core, self.custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        self.source = ApiSource(DynamicClient(api).resources.get(api_version=f"{GROUP}/{VERSION}", kind="Workload").get)
        self.plan = schedule(scale)
        self.seen = {f"{ns}/{name}": Seen(cls) for _, ns, name, cls in self.plan}
        self.finish_at: list[tuple[float, str, int]] = []
        self.lock, self.stop = threading.Lock(), threading.Event()
        self.creators, self.runners = ThreadPoolExecutor(CREATORS), ThreadPoolExecutor(RUNNERS)
        self.flavor_ours, self.started, self.max_lag_s, self.errors, self.last = False, 0.0, 0.0, 0, "no event yet"
        self.broken = False

    def names(self, plural: str, false: str = "") -> list[str]:
        """Names of our cluster-scoped objects of a kind (only those whose condition `false` is not True)."""
        found = self.custom.list_cluster_custom_object(GROUP, VERSION, plural, label_selector=SELECTOR)["items"]
        return [o["metadata"]["name"] for o in found if not (false and is_true(o, false))]

    def setup(self) -> None:
        try:
            self.custom.create_cluster_custom_object(GROUP, VERSION, "resourceflavors",
                                                     kueue_object("ResourceFlavor", meta(FLAVOR)))
            self.flavor_ours = True
        except ApiException as exc:  # there already: ours to delete only if an earlier run of this bench left it
            if exc.status != 409:
                raise
            found = self.custom.get_cluster_custom_object(GROUP, VERSION, "resourceflavors", FLAVOR)
            self.flavor_ours = (found["metadata"].get("labels") or {}).get(LABEL) == BENCH
        for cohort, name in QUEUES:
            self.core.create_namespace({"metadata": meta(name)})
            self.custom.create_cluster_custom_object(GROUP, VERSION, "clusterqueues", cluster_queue(name, cohort))
            self.custom.create_namespaced_custom_object(GROUP, VERSION, name, "localqueues", kueue_object(
                "LocalQueue", meta(LOCAL_QUEUE, name), spec={"clusterQueue": name}))
        if inactive := wait_empty("ClusterQueues not Active yet", lambda: self.names("clusterqueues", "Active"),
                                  SETUP_TIMEOUT_S):
            raise TimeoutError(f"ClusterQueues not Active after {SETUP_TIMEOUT_S:.0f}s: {', '.join(inactive)}")

    def call(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except ApiException as exc:
            if not (fn == self.requeue and exc.status == 409):  # changed since: its next event asks again
                self.errors += 1
                self.last = f"{fn.__name__}: {exc.status} {exc.reason}"
        except urllib3.exceptions.HTTPError as exc:
            self.errors += 1
            self.last = f"{fn.__name__}: {exc}"

    def create(self, due: float, namespace: str, name: str, cls: WorkloadClass) -> None:
        self.max_lag_s = max(self.max_lag_s, time.monotonic() - self.started - due)
        sent = time.time()
        self.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "workloads",
                                                    workload(name, namespace, cls))
        self.seen[f"{namespace}/{name}"].created = sent

    def generate(self) -> None:
        for due, namespace, name, cls in self.plan:
            if self.stop.wait(max(0.0, self.started + due - time.monotonic())):
                return
            self.creators.submit(self.call, self.create, due, namespace, name, cls)

    def observe(self, obj: dict[str, Any]) -> None:
        key, now = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}", time.time()
        if (seen := self.seen.get(key)) is None:
            return
        seen.created_server = created.timestamp() if (created := created_at(obj)) else None
        admitted, reserved = is_true(obj, "Admitted"), is_true(obj, "QuotaReserved")
        if admitted and not seen.active and not is_true(obj, "Finished"):
            seen.admissions += 1
            with self.lock:
                heapq.heappush(self.finish_at, (now + seen.cls.running_s, key, seen.admissions))
        if admitted and seen.admitted is None:
            at = condition_time(obj, "Admitted")
            seen.admitted, seen.admitted_server = now, at.timestamp() if at else None
        seen.active = admitted
        if is_true(obj, "Evicted") and reserved and seen.finished is None:
            seen.evictions += 0 if seen.evicting else 1
            seen.evicting = True
            self.runners.submit(self.call, self.requeue, obj)
        elif not reserved:
            seen.evicting = False
        if is_true(obj, "Finished") and seen.finished is None:
            seen.finished = now
        true = [c["type"] for c in (obj.get("status") or {}).get("conditions") or [] if c["status"] == "True"]
        self.last = f"{key}: {'+'.join(true) or 'pending'}"

    def requeue(self, obj: dict[str, Any]) -> None:
        """Give an evicted workload's quota back, as its job would (Kueue's runner does the same)."""
        unset = {"QuotaReserved": ("Pending", "Evicted by the test runner"),
                 "Admitted": ("NoReservation", "The workload has no reservation")}
        conditions = [{**c, "status": "False", "reason": unset[c["type"]][0], "message": unset[c["type"]][1],
                       "lastTransitionTime": now_stamp()} if c["type"] in unset else c
                      for c in obj["status"]["conditions"]]
        body = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
                "status": {"admission": None, "conditions": conditions}}
        self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, obj["metadata"]["namespace"], "workloads", obj["metadata"]["name"], body,
            _content_type="application/merge-patch+json")

    def finish(self, key: str) -> None:
        namespace, name = key.split("/")
        done = {"type": "Finished", "status": "True", "reason": "ByTest", "message": "By test runner",
                "lastTransitionTime": now_stamp()}
        body = kueue_object("Workload", {"name": name, "namespace": namespace}, status={"conditions": [done]})
        self.custom.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, "workloads", name, body,
                                                          field_manager=RUNNER, force=True,
                                                          _content_type="application/apply-patch+yaml")

    def watch(self) -> None:
        try:
            for kind, obj in events(self.source, time.monotonic() + WATCH_FOR_S, self.stop, label_selector=SELECTOR):
                if kind not in (RELIST, SYNCED, "DELETED"):
                    self.observe(obj.to_dict())
        except Exception as exc:  # nothing more will be seen: the run reports what it saw so far
            self.errors += 1
            self.last, self.broken = f"the watch broke: {exc}", True

    def run_finishes(self) -> None:
        """Kueue's runner: Finished once the running time has passed since the admission was seen."""
        while not self.stop.wait(0.02):
            due = []
            with self.lock:
                while self.finish_at and self.finish_at[0][0] <= time.time():
                    due.append(heapq.heappop(self.finish_at))
            for _, key, admission in due:
                seen = self.seen[key]
                if seen.active and seen.admissions == admission and seen.finished is None:
                    self.runners.submit(self.call, self.finish, key)

    def run(self, cap_s: float) -> float:
        for target in (self.watch, self.run_finishes):
            threading.Thread(target=target, daemon=True).start()
        self.started = time.monotonic()
        threading.Thread(target=self.generate, daemon=True).start()
        while (elapsed := time.monotonic() - self.started) < cap_s:
            states = list(self.seen.values())
            if all(s.finished for s in states) or self.broken:
                return elapsed
            print(f"  {elapsed:4.0f}s: {sum(1 for s in states if s.created)} created (max lag {self.max_lag_s:.1f}s), "
                  f"{sum(1 for s in states if s.admitted)} admitted, {sum(1 for s in states if s.finished)} finished "
                  f"of {len(states)}; {sum(s.evictions for s in states)} evictions, {self.errors} API errors; "
                  f"last: {self.last}", flush=True)
            self.stop.wait(min(PROGRESS_S, cap_s - elapsed))
        print(f"  cap of {cap_s:.0f}s reached: reporting what was admitted")
        return cap_s

    def cleanup(self) -> None:
        self.stop.set()
        for pool in (self.creators, self.runners):
            pool.shutdown(wait=True, cancel_futures=True)
        try:
            self.delete_all()
        except (ApiException, urllib3.exceptions.HTTPError) as exc:
            print(f"  cleanup stopped ({exc}): delete what is labelled {SELECTOR} once the API server answers")

    def delete_all(self) -> None:
        for _, name in QUEUES:
            for delete, args in ((self.custom.delete_collection_namespaced_custom_object,
                                  (GROUP, VERSION, name, "workloads")), (self.core.delete_namespace, (name,))):
                try:
                    delete(*args)
                except ApiException as exc:
                    if exc.status != 404:
                        print(f"  cleanup of {name}: {exc.status} {exc.reason}")
        left = wait_empty("namespaces terminating", lambda: [
            n.metadata.name for n in self.core.list_namespace(label_selector=SELECTOR).items], DELETE_TIMEOUT_S)
        for plural in ["clusterqueues"] + (["resourceflavors"] if self.flavor_ours else []):
            self.custom.delete_collection_cluster_custom_object(GROUP, VERSION, plural, label_selector=SELECTOR)
            left += wait_empty(f"{plural} being deleted", functools.partial(self.names, plural), SETUP_TIMEOUT_S)
        if left:
            print(f"  left behind after the cleanup's timeouts: {', '.join(left)}")


def differences() -> list[str]:
    """What differs from Kueue's run (the sources: bench/KUEUE_BASELINE.md); the sim's Kueue as `sim up` set it."""
    try:
        kueue = yaml.safe_load((cluster.layout().root / "kueue-config.yaml").read_text()) or {}
    except OSError:
        kueue = {}
    rate = kueue.get("clientConnection") or {}  # unset: Kueue v0.19's defaults, 300 and 500
    workers = ((kueue.get("controller") or {}).get("groupKindConcurrency") or {}).get("Workload.kueue.x-k8s.io", 1)
    return [
        "Kueue's: envtest (etcd + kube-apiserver, inflight 5000/2500) + minimalkueue (core controllers and scheduler, "
        f"QPS 50/burst 100, 5 Workload workers); here: the whole Kueue (QPS {rate.get('qps', 300)}/burst "
        f"{rate.get('burst', 500)}, {workers} Workload workers) with its webhooks, fair sharing and waitForPodsReady, "
        "an API server at default inflight limits with RBAC and an audit log, and the sim's other components",
        f"Kueue's runner: Go, QPS 1000/burst 2000; here: one Python process ({CREATORS + RUNNERS} threads, one watch) "
        f"on the same {len(os.sched_getaffinity(0))} cores as the cluster",
        "Kueue's 351 s: minimalkueue's wall time, start to exit once all finished; ours: first creation to last finish",
    ]


def report(bench: Bench, scale: float, elapsed: float) -> None:
    states = list(bench.seen.values())
    admitted = [s for s in states if s.admitted and s.created]
    first = min((s.created for s in states if s.created), default=0.0)
    first_server = min((s.created_server for s in states if s.created_server), default=0.0)
    print(f"\nKueue baseline on the sim: scale {scale:g}, {len(states)} workloads in {COHORTS} cohorts x "
          f"{QUEUES_PER_COHORT} ClusterQueues; Kueue {load_pins().kueue}; {elapsed:.0f}s")
    print(f"  created {sum(1 for s in states if s.created)} (at most {bench.max_lag_s:.1f}s behind Kueue's pace), "
          f"admitted {len(admitted)}, finished {sum(1 for s in states if s.finished)}; "
          f"{sum(s.evictions for s in states)} evictions, {bench.errors} API errors")
    if admitted:
        print(f"  first creation -> last admission: {max(s.admitted or 0.0 for s in admitted) - first:.1f}s (watch), "
              f"{max(s.admitted_server or 0.0 for s in admitted) - first_server:.0f}s (server timestamps)")
    if all(s.finished for s in states):
        print(f"  first creation -> last finish:    {max(s.finished or 0.0 for s in states) - first:.1f}s;  Kueue "
              f"published: {PUBLISHED_WALL_S:.0f}s average, {PUBLISHED_WALL_CEILING_S:.0f}s ceiling, for 15,000"
              f"{'' if scale == 1 else ' (not comparable at this scale)'}")
    print(f"  admission latency (s)  {'n':>5} {'mean':>7} {'p50':>7} {'p95':>7} {'p99':>7} {'server mean':>11}"
          "   Kueue published: average (ceiling)")
    for cls in CLASSES:
        mine = [s for s in admitted if s.cls is cls]
        watched = [(s.admitted or 0.0) - (s.created or 0.0) for s in mine] or [float("nan")]
        server = sum((s.admitted_server or 0.0) - (s.created_server or 0.0) for s in mine) / max(1, len(mine))
        print(f"    {cls.name:<19} {len(mine):>5} {sum(watched) / len(watched):>7.2f} {percentile(watched, 50):>7.2f} "
              f"{percentile(watched, 95):>7.2f} {percentile(watched, 99):>7.2f} {server:>11.1f}"
              f"   {cls.published_avg_s:g} ({cls.published_ceiling_s:g})")
    print("  what differs:\n" + "\n".join(f"    - {line}" for line in differences()))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0,
                        help="fraction of the 15,000: the first F of every queue's workloads, same pace (default 1)")
    parser.add_argument("--cap", type=float, default=900.0, help="seconds to wait for every workload to finish")
    args = parser.parse_args()
    if not 0 < args.scale <= 1:
        parser.error("--scale takes a fraction in (0, 1]")
    if not cluster.is_up():
        print("the sim is not up: gpupoc sim up (Kueue among its schedulers)", file=sys.stderr)
        return 2
    configuration = client.Configuration()
    kube_config.load_kube_config(config_file=str(cluster.layout().kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = CREATORS + RUNNERS + 4  # else the client's pool bounds the threads
    bench = Bench(client.ApiClient(configuration), args.scale)
    try:
        bench.setup()
        report(bench, args.scale, bench.run(args.cap))
    except KeyboardInterrupt:
        print("\ninterrupted: cleaning up")
    finally:
        bench.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())

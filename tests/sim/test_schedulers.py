"""The real scheduler controllers on the sim: Kueue quota, Volcano gang, KubeRay clusters, their metrics."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from harness.cluster.apply import apply_objects
from harness.backends import Backend
from harness.jobs.model import GangJob
from harness.config.profile import Profile
from harness.jobs.kubernetes import Workloads
from harness.cluster.prometheus import Prometheus, Sample
from harness.sim import cluster, nodes
from harness.sim.config import DEFAULT_GPUS_PER_NODE, GpuSpec
from harness.cluster.wait import wait_for, wait_for_set

TIMEOUT_S = 90
GPU = "nvidia.com/gpu"
LONG_RUN = {"sim.gpupoc.io/run-for": "600s"}


def requires(scheduler: str) -> None:
    component = {"volcano": "volcano-scheduler", "kuberay": "kuberay-operator",
                 "kai": "kai-scheduler"}.get(scheduler, scheduler)
    if not cluster.component_running(component):
        pytest.skip(f"{scheduler} is not running on this sim (gpupoc sim up --schedulers ...)")


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


def gpu_job(name: str, gpus: int, labels: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": labels},
            "spec": {"backoffLimit": 0, "template": {
                "metadata": {"annotations": annotations or {}},
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "train", "image": "sim/trainer:1",
                    "resources": {"requests": {"cpu": "1"}, "limits": {GPU: str(gpus)}}}]}}}}


@pytest.fixture()
def dynamic(sim_api: client.ApiClient) -> DynamicClient:
    return DynamicClient(sim_api)


@pytest.fixture()
def kueue_queue(sim_api: client.ApiClient, dynamic: DynamicClient, namespace: str) -> Iterator[str]:
    """A ClusterQueue with 8 GPUs of nominal quota and a LocalQueue for it in the test's namespace."""
    requires("kueue")
    cq = f"cq-{uuid.uuid4().hex[:6]}"
    apply_objects(sim_api, [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "sim-gpu"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": cq},
         "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                  "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU], "flavors": [{
                      "name": "sim-gpu", "resources": [{"name": "cpu", "nominalQuota": "64"},
                                                       {"name": "memory", "nominalQuota": "1Ti"},
                                                       {"name": GPU, "nominalQuota": "8"}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
         "metadata": {"name": "team", "namespace": namespace}, "spec": {"clusterQueue": cq}},
    ])
    yield "team"
    dynamic.resources.get(api_version="kueue.x-k8s.io/v1beta2", kind="ClusterQueue").delete(name=cq)


def workload_of(dynamic: DynamicClient, namespace: str, job: str) -> Any:
    workloads = dynamic.resources.get(api_version="kueue.x-k8s.io/v1beta2", kind="Workload")
    return wait_for(workloads.get, f"Workload of Job {namespace}/{job}",
                    lambda w: any(o["name"] == job for o in w.metadata.get("ownerReferences") or []),
                    timeout_s=TIMEOUT_S, describe=lambda w: w.metadata.name, namespace=namespace)


def test_kueue_admits_within_quota_and_holds_beyond_it(sim_api: client.ApiClient, dynamic: DynamicClient,
                                                       namespace: str, kueue_queue: str) -> None:
    batch = client.BatchV1Api(sim_api)
    queued = {"kueue.x-k8s.io/queue-name": kueue_queue}
    created = batch.create_namespaced_job(namespace, gpu_job("fits", 8, queued))
    # the object as created (after the webhook): read back, Kueue may already have admitted and unsuspended it
    assert created.spec.suspend is True, "Kueue's webhook did not suspend the Job"
    done = wait_for(batch.list_namespaced_job, f"Job {namespace}/fits",
                    lambda j: any(c.type == "Complete" and c.status == "True" for c in j.status.conditions or []),
                    timeout_s=TIMEOUT_S, describe=lambda j: f"suspend={j.spec.suspend} active={j.status.active}",
                    namespace=namespace, field_selector="metadata.name=fits")
    assert done.status.succeeded == 1

    batch.create_namespaced_job(namespace, gpu_job("holder", 8, queued, LONG_RUN))
    wait_for(batch.list_namespaced_job, f"Job {namespace}/holder", lambda j: (j.status.active or 0) == 1,
             timeout_s=TIMEOUT_S, describe=lambda j: f"suspend={j.spec.suspend}", namespace=namespace,
             field_selector="metadata.name=holder")
    batch.create_namespaced_job(namespace, gpu_job("beyond", 8, queued))
    pending = workload_of(dynamic, namespace, "beyond")
    workloads = dynamic.resources.get(api_version="kueue.x-k8s.io/v1beta2", kind="Workload")
    held = wait_for(workloads.get, f"Workload {pending.metadata.name}",
                    lambda w: (condition(w.to_dict(), "QuotaReserved") or {}).get("status") == "False",
                    timeout_s=TIMEOUT_S, describe=lambda w: str((w.to_dict().get("status") or {}).get("conditions")),
                    namespace=namespace, field_selector=f"metadata.name={pending.metadata.name}")
    reason = condition(held.to_dict(), "QuotaReserved")
    assert reason is not None and GPU in reason["message"], reason
    assert batch.read_namespaced_job("beyond", namespace).spec.suspend is True


def volcano_job(name: str, namespace: str, replicas: int, gpus: int) -> dict[str, Any]:
    container = {"name": "train", "image": "sim/trainer:1",
                 "resources": {"requests": {"cpu": "1"}, "limits": {GPU: str(gpus)}}}
    task = {"name": "worker", "replicas": replicas,
            "template": {"metadata": {"annotations": LONG_RUN},
                         "spec": {"restartPolicy": "Never", "containers": [container]}}}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minAvailable": replicas, "schedulerName": "volcano", "queue": "default", "tasks": [task]}}


@pytest.fixture()
def node_adder(core: client.CoreV1Api) -> Iterator[Callable[[], None]]:
    """Adds a simulated node; removes it once the test's namespace is gone (asked for before `namespace`). A node
    removed first leaves its pods to the pod garbage collector: the namespace took 42-63 s to go (2026-12-06)."""
    added: list[str] = []
    yield lambda: added.extend(nodes.add_nodes(core, 1, GpuSpec()))
    nodes.remove_nodes(core, added)


def test_volcano_gang_binds_no_pod_until_all_fit(sim_api: client.ApiClient, core: client.CoreV1Api,
                                                dynamic: DynamicClient, node_adder: Callable[[], None],
                                                namespace: str) -> None:
    requires("volcano")
    fill_all_but(core, namespace, 3)  # a gang of 4 whole-node pods cannot fit
    apply_objects(sim_api, [volcano_job("gang", namespace, 4, DEFAULT_GPUS_PER_NODE)])
    podgroups = dynamic.resources.get(api_version="scheduling.volcano.sh/v1beta1", kind="PodGroup")
    wait_for(podgroups.get, f"PodGroup of {namespace}/gang",
             lambda pg: pg.to_dict().get("status", {}).get("phase") in ("Pending", "Inqueue")
             and any(c.get("type") == "Unschedulable" for c in pg.to_dict()["status"].get("conditions") or []),
             timeout_s=TIMEOUT_S, describe=lambda pg: str(pg.to_dict().get("status")), namespace=namespace)
    assert_gang_unbound_until_a_node_is_added(core, namespace, "volcano.sh/job-name=gang", 4, node_adder)


def fill_all_but(core: client.CoreV1Api, namespace: str, free: int) -> None:
    """Bind whole-node filler pods to every simulated node but `free` of them."""
    for i, node in enumerate(nodes.simulated_node_names(core)[free:]):
        core.create_namespaced_pod(namespace, {"metadata": {"name": f"filler-{i}"}, "spec": {
            "nodeName": node, "containers": [{"name": "c", "image": "sim/x:1",
                                              "resources": {"limits": {GPU: str(DEFAULT_GPUS_PER_NODE)}}}]}})


def assert_gang_unbound_until_a_node_is_added(core: client.CoreV1Api, namespace: str, selector: str,
                                              members: int, add_node: Callable[[], None]) -> None:
    """No member of the gang is bound now; once a node is added, all `members` are."""
    bound = [p.metadata.name for p in core.list_namespaced_pod(namespace, label_selector=selector).items
             if p.spec.node_name]
    assert bound == [], f"gang pods bound while the gang cannot fit: {bound}"
    add_node()
    wait_for_set(core.list_namespaced_pod, f"gang {namespace}/{selector} after a node was added",
                 lambda pods: len(pods) == members and all(p.spec.node_name for p in pods.values()),
                 timeout_s=TIMEOUT_S, describe=lambda pods: str({n: p.spec.node_name for n, p in pods.items()}),
                 namespace=namespace, label_selector=selector)


def kai_gang(name: str, namespace: str, pods: int, gpus: int) -> list[dict[str, Any]]:
    """KAI's explicit gang: a PodGroup with minMember, and bare pods that name it."""
    group = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
             "metadata": {"name": name, "namespace": namespace},
             "spec": {"minMember": pods, "queue": "default-queue"}}
    members = [{"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"{name}-{i}", "namespace": namespace, "labels": {"gang": name},
        "annotations": {"pod-group-name": name, **LONG_RUN}}, "spec": {
        "schedulerName": "kai-scheduler", "restartPolicy": "Never", "containers": [{
            "name": "train", "image": "sim/trainer:1", "resources": {"limits": {GPU: str(gpus)}}}]}}
        for i in range(pods)]
    return [group, *members]


def test_kai_gang_binds_no_pod_until_all_fit(sim_api: client.ApiClient, core: client.CoreV1Api,
                                            dynamic: DynamicClient, node_adder: Callable[[], None],
                                            namespace: str) -> None:
    requires("kai")
    fill_all_but(core, namespace, 3)
    apply_objects(sim_api, kai_gang("gang", namespace, 4, DEFAULT_GPUS_PER_NODE))
    podgroups = dynamic.resources.get(api_version="scheduling.run.ai/v2alpha2", kind="PodGroup")
    wait_for(podgroups.get, f"PodGroup {namespace}/gang unschedulable",
             lambda pg: any(c.get("reason") == "Unschedulable"
                            for c in (pg.to_dict().get("status") or {}).get("schedulingConditions") or []),
             timeout_s=TIMEOUT_S, describe=lambda pg: str(pg.to_dict().get("status")), namespace=namespace)
    assert_gang_unbound_until_a_node_is_added(core, namespace, "gang=gang", 4, node_adder)


def ray_cluster_spec(workers: int) -> dict[str, Any]:
    container = {"name": "ray", "image": "rayproject/ray:2.9.0",
                 "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}
    gpu_container = {**container, "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1", GPU: "1"}}}
    return {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [container]}}},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": workers, "minReplicas": workers,
                                  "maxReplicas": workers, "rayStartParams": {},
                                  "template": {"spec": {"containers": [gpu_container]}}}]}


def test_raycluster_becomes_ready(sim_api: client.ApiClient, dynamic: DynamicClient, namespace: str) -> None:
    requires("kuberay")
    apply_objects(sim_api, [{"apiVersion": "ray.io/v1", "kind": "RayCluster",
                             "metadata": {"name": "rc", "namespace": namespace}, "spec": ray_cluster_spec(2)}])
    clusters = dynamic.resources.get(api_version="ray.io/v1", kind="RayCluster")
    wait_for(clusters.get, f"RayCluster {namespace}/rc", lambda rc: (rc.to_dict().get("status") or {}).get("state") == "ready",
             timeout_s=TIMEOUT_S, describe=lambda rc: str((rc.to_dict().get("status") or {}).get("state")),
             namespace=namespace, field_selector="metadata.name=rc")


def test_rayjob_through_kueue_is_admitted_and_its_cluster_ready(
        sim_api: client.ApiClient, dynamic: DynamicClient, namespace: str, kueue_queue: str) -> None:
    requires("kuberay")
    apply_objects(sim_api, [{
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "rj", "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": kueue_queue}},
        "spec": {"entrypoint": "python train.py", "shutdownAfterJobFinishes": True,
                 "rayClusterSpec": ray_cluster_spec(2)}}])
    workload = workload_of(dynamic, namespace, "rj")
    workloads = dynamic.resources.get(api_version="kueue.x-k8s.io/v1beta2", kind="Workload")
    wait_for(workloads.get, f"Workload {workload.metadata.name}",
             lambda w: (condition(w.to_dict(), "Admitted") or {}).get("status") == "True", timeout_s=TIMEOUT_S,
             describe=lambda w: str((w.to_dict().get("status") or {}).get("conditions")), namespace=namespace,
             field_selector=f"metadata.name={workload.metadata.name}")
    clusters = dynamic.resources.get(api_version="ray.io/v1", kind="RayCluster")
    wait_for(clusters.get, f"RayCluster of RayJob {namespace}/rj",
             lambda rc: (rc.to_dict().get("status") or {}).get("state") == "ready", timeout_s=TIMEOUT_S,
             describe=lambda rc: f"{rc.metadata.name}: {(rc.to_dict().get('status') or {}).get('state')}",
             namespace=namespace)


def wait_for_series(promql: str) -> list[Sample]:
    prometheus = Prometheus(cluster.prometheus_url())
    deadline = time.monotonic() + TIMEOUT_S
    series: list[Sample] = []
    while not series and time.monotonic() < deadline:
        series = prometheus.instant(promql)
        time.sleep(1)
    assert series, f"no series for {promql} in Prometheus after {TIMEOUT_S}s"
    return series


def test_kueue_admissions_are_in_prometheus(sim_api: client.ApiClient, namespace: str, kueue_queue: str) -> None:
    client.BatchV1Api(sim_api).create_namespaced_job(
        namespace, gpu_job("counted", 1, {"kueue.x-k8s.io/queue-name": kueue_queue}))
    wait_for_series('kueue_admitted_workloads_total{job="kueue"} > 0')


@pytest.mark.parametrize("backend", ["volcano"], indirect=True)
def test_volcano_wait_histogram_the_suite_queries_is_in_prometheus(backend: Backend, workloads: Workloads,
                                                                   queue_model: Profile) -> None:
    """The queue-wait suite's cross-check reads the backend's histogram: the same metric must be scraped."""
    histogram = backend.wait_histogram()
    assert histogram is not None
    workloads.submit(GangJob("latency", queue_model.tenants[0], 1, 1, run_for_s=1))
    wait_for_series(f'{histogram.metric}_count{{job="volcano-scheduler"}}')


def test_kai_metrics_are_in_prometheus(sim_api: client.ApiClient) -> None:
    requires("kai")
    wait_for_series('kai_e2e_scheduling_latency_milliseconds{job="kai-scheduler"}')  # a gauge in KAI
    wait_for_series('kai_queue_allocated_gpus{job="kai-queuecontroller"}')


def test_pod_phases_are_in_prometheus(core: client.CoreV1Api, namespace: str) -> None:
    """kube-state-metrics has series only for pods that exist: this test makes one."""
    requires("kube-state-metrics")
    core.create_namespaced_pod(namespace, {"metadata": {"name": "seen"}, "spec": {
        "containers": [{"name": "c", "image": "sim/x:1"}]}})
    wait_for_series(f'kube_pod_status_phase{{job="kube-state-metrics", namespace="{namespace}", phase="Running"}} == 1')

"""The sim is a real cluster: nodes, scheduling, Jobs, Deployments, failure injection, audit, Prometheus."""

from __future__ import annotations

import json
import time
from typing import Any

from kubernetes import client

from harness.cluster.prometheus import Prometheus
from harness.sim import cluster
from harness.sim.config import DEFAULT_GPU_PRODUCT, DEFAULT_GPUS_PER_NODE, DEFAULT_DRIVER_VERSION, GpuSpec
from harness.sim.nodes import SIMULATED_LABEL, gfd_labels, simulated_node_names
from harness.cluster.wait import wait_for, wait_gone

TIMEOUT_S = 60


def job(name: str, gpus: int, pods: int = 1, labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None, backoff_limit: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"parallelism": pods, "completions": pods, "backoffLimit": backoff_limit,
                 "template": {"metadata": {"labels": labels or {}, "annotations": annotations or {}},
                              "spec": {"restartPolicy": "Never", "containers": [{
                                  "name": "train", "image": "sim/trainer:1",
                                  "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}},
    }


def job_condition(j: Any, kind: str) -> bool:
    return any(c.type == kind and c.status == "True" for c in (j.status.conditions or []))


def describe_job(j: Any) -> str:
    s = j.status
    return f"active={s.active} succeeded={s.succeeded} failed={s.failed} " \
           f"conditions={[c.type for c in (s.conditions or [])]}"


def test_nodes_are_ready_with_gpu_capacity_and_gfd_labels(core: client.CoreV1Api) -> None:
    nodes = core.list_node(label_selector=f"{SIMULATED_LABEL}=true").items
    assert len(nodes) >= 1
    wanted = gfd_labels(GpuSpec())
    for node in nodes:
        ready = [c.status for c in node.status.conditions if c.type == "Ready"]
        assert ready == ["True"], node.metadata.name
        assert node.status.capacity["nvidia.com/gpu"] == str(DEFAULT_GPUS_PER_NODE)
        assert node.status.allocatable["nvidia.com/gpu"] == str(DEFAULT_GPUS_PER_NODE)
        for key in ("cpu", "memory", "pods"):
            assert key in node.status.allocatable
        labels = node.metadata.labels
        assert {k: labels.get(k) for k in wanted} == wanted
        assert labels["nvidia.com/gpu.product"] == DEFAULT_GPU_PRODUCT
        assert labels["nvidia.com/cuda.driver-version.full"] == DEFAULT_DRIVER_VERSION


def test_gpu_job_runs_to_succeeded(sim_api: client.ApiClient, namespace: str) -> None:
    batch = client.BatchV1Api(sim_api)
    batch.create_namespaced_job(namespace, job("two-gpus", gpus=2, pods=2))
    done = wait_for(batch.list_namespaced_job, f"Job {namespace}/two-gpus", lambda j: job_condition(j, "Complete"),
                    failed=lambda j: job_condition(j, "Failed"), describe=describe_job, timeout_s=TIMEOUT_S,
                    namespace=namespace, field_selector="metadata.name=two-gpus")
    assert done.status.succeeded == 2


def test_pod_asking_more_gpus_than_any_node_stays_pending(core: client.CoreV1Api, namespace: str) -> None:
    too_many = DEFAULT_GPUS_PER_NODE + 1
    core.create_namespaced_pod(namespace, {"metadata": {"name": "too-big"}, "spec": {"containers": [{
        "name": "c", "image": "sim/x:1", "resources": {"limits": {"nvidia.com/gpu": str(too_many)}}}]}})
    event = wait_for(core.list_namespaced_event, f"FailedScheduling event of {namespace}/too-big",
                     lambda e: e.reason == "FailedScheduling", describe=lambda e: f"{e.reason}: {e.message}",
                     timeout_s=TIMEOUT_S, namespace=namespace, field_selector="involvedObject.name=too-big")
    assert "nvidia.com/gpu" in event.message
    pod = core.read_namespaced_pod("too-big", namespace)
    assert pod.status.phase == "Pending" and pod.spec.node_name is None


def test_deployment_becomes_available_and_namespace_delete_removes_pods(
        sim_api: client.ApiClient, core: client.CoreV1Api) -> None:
    apps = client.AppsV1Api(sim_api)
    name = f"deploy-{int(time.time())}"
    core.create_namespace({"metadata": {"name": name, "labels": {"gpupoc.io/test": "deployment"}}})
    apps.create_namespaced_deployment(name, {
        "metadata": {"name": "serve"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "serve"}},
                 "template": {"metadata": {"labels": {"app": "serve"}}, "spec": {"containers": [{
                     "name": "c", "image": "sim/serve:1", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}})
    wait_for(apps.list_namespaced_deployment, f"Deployment {name}/serve",
             lambda d: (d.status.available_replicas or 0) == 3,
             describe=lambda d: f"available={d.status.available_replicas}", timeout_s=TIMEOUT_S,
             namespace=name, field_selector="metadata.name=serve")
    assert len(core.list_namespaced_pod(name).items) == 3
    core.delete_namespace(name)
    wait_gone(core.list_namespace, f"Namespace {name}", timeout_s=TIMEOUT_S,
              describe=lambda n: f"phase={n.status.phase}", field_selector=f"metadata.name={name}")
    assert core.list_namespaced_pod(name).items == []


def test_failure_label_fails_the_pod_with_the_exit_code(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, {
        "metadata": {"name": "crash", "labels": {"sim.gpupoc.io/fail": "true"},
                     "annotations": {"sim.gpupoc.io/fail-after": "1s", "sim.gpupoc.io/exit-code": "137",
                                     "sim.gpupoc.io/fail-reason": "OOMKilled"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "sim/x:1"}]}})
    pod = wait_for(core.list_namespaced_pod, f"Pod {namespace}/crash", lambda p: p.status.phase == "Failed",
                   failed=lambda p: p.status.phase == "Succeeded", describe=lambda p: p.status.phase,
                   timeout_s=TIMEOUT_S, namespace=namespace, field_selector="metadata.name=crash")
    terminated = pod.status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (137, "OOMKilled")


def test_audit_log_records_who_created_a_job(sim_api: client.ApiClient, namespace: str) -> None:
    client.BatchV1Api(sim_api).create_namespaced_job(namespace, job("audited", gpus=1))
    audit_log = cluster.layout().audit_log
    deadline = time.monotonic() + 10
    found: list[dict[str, Any]] = []
    while not found and time.monotonic() < deadline:
        events = [json.loads(line) for line in audit_log.read_text().splitlines() if '"audited"' in line]
        found = [e for e in events if e["verb"] == "create" and e["objectRef"]["resource"] == "jobs"
                 and e["objectRef"]["namespace"] == namespace]
        time.sleep(0.2)
    assert found, f"no create of Job {namespace}/audited in {audit_log}"
    assert found[0]["user"]["username"] == "gpupoc-admin"


def test_prometheus_scrapes_apiserver_and_kwok(sim_api: client.ApiClient) -> None:
    deadline = time.monotonic() + 30
    up: dict[str, float] = {}
    while time.monotonic() < deadline and not (up.get("kube-apiserver") == up.get("kwok") == 1.0):
        up = {s.labels["job"]: s.value for s in Prometheus(cluster.prometheus_url()).instant("up")}
        time.sleep(1)
    assert up.get("kube-apiserver") == 1.0, up
    assert up.get("kwok") == 1.0, up


def test_nodes_can_be_added_and_removed_while_running(core: client.CoreV1Api) -> None:
    from harness.cli import main
    before = simulated_node_names(core)
    assert main(["sim", "nodes", "add", "--count", "1"]) == 0
    added = sorted(set(simulated_node_names(core)) - set(before))
    assert len(added) == 1
    assert main(["sim", "nodes", "remove", *added]) == 0
    assert simulated_node_names(core) == before

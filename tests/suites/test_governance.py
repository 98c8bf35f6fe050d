"""The governance suite on the sim: each criterion once per mechanism, as the suite runs it (outcomes as the
reference sim is designed to give, suites/expected.yaml), and each FAILing, with the measured value, on a
deliberately misconfigured cluster. The full criterion x backend matrix is `make poc`'s job.

Mechanisms: quota and ResourceQuota on Kueue (borrowingLimit) and the API server; borrowing and reclaim on KAI
(its queue status and metric); GPU sharing on KAI (its fractions); isolation by RBAC (once per cluster) and by queue (Kueue's namespaced
LocalQueue holds, Volcano's queue is open: a designed FAIL); monitoring on Kueue (KAI's missing series: a
designed FAIL); the development queue on Volcano (reclaim; Kueue's, by kube-scheduler's priority preemption,
is the sensitivity test's); audit from the API server's log file; cost over the scenario's own pods; quota per GPU
model on Kueue (a flavor per model), on L40S nodes added beside the sim's H100s.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from harness.run.outcomes import load_expected, unexpected
from harness.record.model import load_record
from harness.sim import cluster
from harness.core.paths import REPO_ROOT
from tests.suites.test_training_sensitivity import KUBERNETES_QUEUES, gpupoc, profile_variant

SCENARIOS = ("test_quota.py::test_quota[kueue]", "test_quota.py::test_gpu_resource_quota_refuses_at_creation",
             "test_borrowing_reclaim.py::test_borrowing_reclaim[kai]",
             "test_tenant_isolation.py::test_tenant_isolation",
             "test_tenant_isolation.py::test_queue_isolation[kueue]",
             "test_tenant_isolation.py::test_queue_isolation[volcano]",
             "test_monitoring_coverage.py::test_monitoring_coverage[kueue]",
             "test_monitoring_coverage.py::test_monitoring_coverage[kai]",
             "test_queue_classes.py::test_queue_classes[volcano]",
             "test_sharing_granularity.py::test_sharing_granularity[kai]",
             "test_audit.py::test_audit", "test_cost_attribution.py::test_cost_attribution")


def suite(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs", *args],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)


def test_each_governance_criterion_once_per_mechanism(tmp_path: Path, sim_api: client.ApiClient) -> None:
    result = suite(*(f"suites/governance/{s}" for s in SCENARIOS), "--run-id=governance",
                   f"--reports-dir={tmp_path}")
    record = load_record(tmp_path / "governance" / "record.json")
    outcomes = [(r.criterion, r.backend, r.outcome) for r in record.results]
    assert not unexpected(outcomes, load_expected()), "\n".join(
        f"{r.nodeid}: {r.outcome} {r.message}" for r in record.results) + result.stdout[-3000:]
    passed = {(c, b) for c, b, o in outcomes if o == "PASS"}
    assert {("governance.quota", "kueue"), ("governance.quota", "-"), ("governance.tenant_isolation", "-"),
            ("governance.tenant_isolation", "kueue"), ("governance.audit", "-"),
            ("governance.monitoring_coverage", "kueue"), ("governance.cost_attribution", "-"),
            ("governance.queue_classes", "volcano")} <= passed, outcomes
    assert ("governance.tenant_isolation", "volcano", "FAIL") in outcomes
    if cluster.component_running("kai-scheduler"):
        assert {("governance.borrowing_reclaim", "kai"), ("governance.sharing_granularity", "kai")} <= passed, \
            outcomes
    html = (tmp_path / "governance" / "record.html").read_text()
    for table in ("isolation matrix: who tried what, expected, got", "audit: each submitted object"):
        assert table in html
    audit = next(r for r in record.results if r.criterion == "governance.audit")
    rows = audit.evidence[0]["tables"]["audit: each submitted object and its audit entry"]
    assert len(rows) > 5 and all(r["verdict"] == "as expected" for r in rows), rows[:3]


def test_quota_fails_when_the_queue_caps_the_tenant_above_its_limit(
        tmp_path: Path, sim_api: client.ApiClient, reference_queue_model_afterwards: None) -> None:
    """Kueue lets team-b borrow up to 32 GPUs where the profile says its limit is 16."""
    def generous(data: dict[str, object]) -> None:
        tenants = data["tenants"]
        assert isinstance(tenants, list)
        tenants[1]["limit_gpus"] = 32
    gpupoc("setup", "--backends=kueue", f"--profile={profile_variant(tmp_path, generous)}")
    result = suite("suites/governance/test_quota.py::test_quota[kueue]", "--queue-model=keep")
    assert "1 failed" in result.stdout, result.stdout[-3000:]
    assert "governance.quota [kueue]: measured max_gpus_over_limit: 8 GPUs (wanted <= 0 GPUs)" in result.stdout, \
        result.stdout[-3000:]


@pytest.fixture()
def reference_queue_model_afterwards() -> Iterator[None]:
    yield
    gpupoc("setup", KUBERNETES_QUEUES)


def threshold(criterion: str, name: str, value: float) -> Callable[[dict[str, object]], None]:
    """A profile change: one threshold set to `value`."""
    def change(data: dict[str, object]) -> None:
        thresholds = data["thresholds"]
        assert isinstance(thresholds, dict)
        thresholds[criterion][name] = value
    return change


# the wait is twice the threshold: 20 s
RECLAIM_IN_10_S = threshold("governance.borrowing_reclaim", "reclaim_within_s", 10)
SESSION_IN_10_S = threshold("governance.queue_classes", "session_start_within_s", 10)


def test_borrowing_reclaim_fails_when_the_cohort_does_not_reclaim(
        tmp_path: Path, sim_api: client.ApiClient, reference_queue_model_afterwards: None) -> None:
    queues = DynamicClient(sim_api).resources.get(api_version="kueue.x-k8s.io/v1beta2", kind="ClusterQueue")
    for name in ("team-a", "team-b"):
        queues.patch(name=name, body={"spec": {"preemption": {"reclaimWithinCohort": "Never"}}},
                     content_type="application/merge-patch+json")
    result = suite("suites/governance/test_borrowing_reclaim.py::test_borrowing_reclaim[kueue]", "--queue-model=keep",
                   f"--profile={profile_variant(tmp_path, RECLAIM_IN_10_S)}")
    assert "1 failed" in result.stdout, result.stdout[-3000:]
    assert "governance.borrowing_reclaim [kueue]: measured reclaim_within_s: 20." in result.stdout, \
        result.stdout[-3000:]


def test_isolation_fails_listing_what_a_cross_tenant_role_binding_allows(sim_api: client.ApiClient) -> None:
    rbac = client.RbacAuthorizationV1Api(sim_api)
    binding = {"metadata": {"name": "gpupoc-test-cross-tenant", "namespace": "poc-team-b",
                            "labels": {"app.kubernetes.io/managed-by": "gpupoc"}},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
               "subjects": [{"kind": "ServiceAccount", "name": "team-a-submitter", "namespace": "poc-team-a"}]}
    rbac.create_namespaced_role_binding("poc-team-b", binding)
    try:
        result = suite("suites/governance/test_tenant_isolation.py::test_tenant_isolation", "--queue-model=keep")
    finally:
        rbac.delete_namespaced_role_binding("gpupoc-test-cross-tenant", "poc-team-b")
    assert "1 failed" in result.stdout, result.stdout[-3000:]
    assert "governance.tenant_isolation [-]: measured max_cross_tenant_allowed: " in result.stdout
    assert "ALLOWED: team-a: delete batch/jobs in poc-team-b" in result.stdout, result.stdout[-3000:]
    assert "ALLOWED: team-b" not in result.stdout


@pytest.fixture()
def audit_policy_without_workload_creates() -> Iterator[None]:
    """The API server restarted on a policy that logs nothing; afterwards the reference policy, restarted."""
    policy = cluster.layout().audit_policy
    reference = policy.read_text()
    policy.write_text(yaml.safe_dump({"apiVersion": "audit.k8s.io/v1", "kind": "Policy",
                                      "rules": [{"level": "None"}]}))
    cluster.restart_component("kube-apiserver", say=lambda _: None)
    try:
        yield
    finally:
        policy.write_text(reference)
        cluster.restart_component("kube-apiserver", say=lambda _: None)
        # Two API outages within 2 min leave client-go's reflectors backing off for up to 60 s
        # (client-go tools/cache/reflector.go): kube-state-metrics showed a new pod 16.5 s after the API server
        # was back, and the next test in this file (monitoring coverage) once missed its pods' series for 40 s
        # (make test, 2026-12-05). A fresh kube-state-metrics lists at once.
        cluster.restart_component("kube-state-metrics", say=lambda _: None)


@pytest.fixture()
def restarts_the_api_server(disrupts: Callable[[str], None]) -> None:
    disrupts("kube-apiserver")


def test_audit_fails_when_the_policy_drops_workload_creates(sim_api: client.ApiClient, restarts_the_api_server: None,
                                                            audit_policy_without_workload_creates: None) -> None:
    """Run alone, the audit criterion submits one job of its own: the policy leaves it out of the log."""
    result = suite("suites/governance/test_audit.py")
    assert "1 failed" in result.stdout, result.stdout[-3000:]
    assert ("governance.audit [-]: measured max_missing: 1 objects (wanted <= 0 objects); max_time_skew_s: "
            "nothing measured") in result.stdout, result.stdout[-3000:]


@pytest.fixture()
def kueue_without_its_queue_resource_metrics() -> Iterator[None]:
    """Kueue restarted with metrics.enableClusterQueueResources off; afterwards the reference configuration."""
    config = cluster.layout().root / "kueue-config.yaml"
    reference = config.read_text()
    data = yaml.safe_load(reference)
    data["metrics"]["enableClusterQueueResources"] = False
    config.write_text(yaml.safe_dump(data))
    cluster.restart_component("kueue", say=lambda _: None)
    try:
        yield
    finally:
        config.write_text(reference)
        cluster.restart_component("kueue", say=lambda _: None)


def test_monitoring_coverage_fails_naming_the_series_kueue_no_longer_exports(
        sim_api: client.ApiClient, disrupts: Callable[[str], None],
        kueue_without_its_queue_resource_metrics: None) -> None:
    disrupts("kueue")
    result = suite("suites/governance/test_monitoring_coverage.py::test_monitoring_coverage[kueue]", "--backends=kueue")
    assert "1 failed" in result.stdout, result.stdout[-3000:]
    assert "governance.monitoring_coverage [kueue]: measured max_missing_series: 3 series" in result.stdout, \
        result.stdout[-3000:]
    assert "missing: usage per queue: kueue_cluster_queue_resource_usage (missing)" in result.stdout


@pytest.fixture()
def gpu_pods_outside_any_queue(core: client.CoreV1Api) -> Iterator[None]:
    """Two whole-node GPU pods in team-b's namespace straight on kube-scheduler: billed per namespace, in no
    queue (they take the half of the cluster the quota scenario leaves free)."""
    names = ["gpupoc-test-bypass-0", "gpupoc-test-bypass-1"]
    for name in names:
        core.create_namespaced_pod("poc-team-b", {
            "metadata": {"name": name, "namespace": "poc-team-b", "labels": {"app.kubernetes.io/managed-by": "gpupoc"}},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "train", "image": "sim/trainer:1", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}})
    try:
        yield
    finally:
        for name in names:
            core.delete_namespaced_pod(name, "poc-team-b", grace_period_seconds=0)


def test_cost_attribution_fails_when_a_gpu_pod_bypasses_the_queues(sim_api: client.ApiClient,
                                                                  gpu_pods_outside_any_queue: None) -> None:
    result = suite("suites/governance/test_quota.py::test_quota[kueue]",
                   "suites/governance/test_cost_attribution.py", "--queue-model=keep")
    assert "1 failed, 1 passed" in result.stdout, result.stdout[-3000:]
    # The bypass pods' share of team-b's bill depends on how long the quota case ran: any value over the
    # threshold (0.1) is the FAIL wanted; 1.04 was seen when they outlasted team-b's queued jobs.
    measured = re.search(r"governance\.cost_attribution \[-\]: measured max_tenant_disagreement: ([0-9.]+)",
                         result.stdout)
    assert measured and float(measured.group(1)) > 0.1, result.stdout[-3000:]
    assert "max_queue_disagreement" not in result.stdout.split("measured")[1].split("|")[0]  # the queue agrees


def test_queue_classes_fails_when_the_development_queue_has_no_reserved_quota(
        tmp_path: Path, sim_api: client.ApiClient, reference_queue_model_afterwards: None) -> None:
    """Kueue's development ClusterQueue with no GPUs of its own: the session waits behind training."""
    queues = DynamicClient(sim_api).resources.get(api_version="kueue.x-k8s.io/v1beta2", kind="ClusterQueue")
    queue = queues.get(name="team-a-dev").to_dict()
    for resource in queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]:
        if resource["name"] == "nvidia.com/gpu":
            resource["nominalQuota"] = 0
    queues.patch(name="team-a-dev", body={"spec": {"resourceGroups": queue["spec"]["resourceGroups"]}},
                 content_type="application/merge-patch+json")
    result = suite("suites/governance/test_queue_classes.py::test_queue_classes[kueue]", "--queue-model=keep",
                   f"--profile={profile_variant(tmp_path, SESSION_IN_10_S)}")
    assert "1 failed" in result.stdout, result.stdout[-3000:]
    assert "governance.queue_classes [kueue]: measured session_start_within_s: 20 s" in result.stdout, \
        result.stdout[-3000:]


@pytest.fixture()
def device_side_reporting_one_uuid() -> Iterator[None]:
    """The sim's device side of KAI's GPU reservations restarted to give every reservation pod one GPU UUID;
    afterwards its own arguments again."""
    with cluster.running_with("kai-gpu-reservations", lambda argv: (*argv, "--same-uuid")):
        yield


def test_sharing_granularity_fails_when_every_reservation_reports_one_device(
        sim_api: client.ApiClient, disrupts: Callable[[str], None], device_side_reporting_one_uuid: None) -> None:
    """KAI puts the 1.5 GPUs of fractions on two devices; the nodes say both are one: 1.5 on one device."""
    if not cluster.component_running("kai-scheduler"):
        pytest.skip("the sim runs without KAI")
    disrupts("kai-gpu-reservations")
    result = suite("suites/governance/test_sharing_granularity.py::test_sharing_granularity[kai]", "--backends=kai")
    assert "1 failed" in result.stdout, result.stdout[-3000:]
    assert "governance.sharing_granularity [kai]: measured max_device_commit: 1.5 GPU (wanted <= 1 GPU)" in \
        result.stdout, result.stdout[-3000:]
    assert "4 of 4 fractional pods placed on 1 device;" in result.stdout, result.stdout[-3000:]


L40S_NODES, L40S_GPUS = 2, 4  # the second model's GPUs: more than team-a's quota of it (4), so the quota holds


@pytest.fixture()
def l40s_nodes(sim_api: client.ApiClient) -> Iterator[list[str]]:
    """Simulated NVIDIA L40S nodes beside the sim's H100s (the profile's second model, gpu.models), removed after."""
    core = client.CoreV1Api(sim_api)
    before = {n.metadata.name for n in core.list_node().items}
    gpupoc("sim", "nodes", "add", "--count", str(L40S_NODES), "--gpu-product", "NVIDIA-L40S", "--gpus-per-node",
           str(L40S_GPUS), "--gpu-memory-mib", "46068")
    added = sorted({n.metadata.name for n in core.list_node().items} - before)
    try:
        yield added
    finally:
        gpupoc("sim", "nodes", "remove", *added)


def count_every_model_together(sim_api: client.ApiClient) -> None:
    """team-a's per-model ClusterQueue with one flavor of no model for all its GPUs (12: both models' quotas) instead
    of a flavor per model (the caller puts the reference queue model back)."""
    queues = DynamicClient(sim_api).resources.get(api_version="kueue.x-k8s.io/v1beta2", kind="ClusterQueue")
    resources = [{"name": "cpu", "nominalQuota": "1000"}, {"name": "memory", "nominalQuota": "10Ti"},
                 {"name": "nvidia.com/gpu", "nominalQuota": 12}]
    queues.patch(name="team-a-models", body={"spec": {"resourceGroups": [{
        "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
        "flavors": [{"name": "gpupoc-gpu", "resources": resources}]}]}},
        content_type="application/merge-patch+json")


def test_model_quota_holds_each_model_apart_on_kueue_and_fails_when_the_queue_counts_them_together(
        tmp_path: Path, sim_api: client.ApiClient, l40s_nodes: list[str], reference_queue_model_afterwards: None
) -> None:
    """Kueue's flavor per model, Volcano's and KAI's queue per model: team-a's fifth L40S job is held at its L40S
    quota of 4 (4 L40S GPUs still free), its H100 job is admitted meanwhile, and every pod is on its model's nodes;
    cost attribution finds each scheduler's usage of those queues what the jobs held there. Then Kueue's queue counts
    every model's GPUs together (one flavor of no model): the fifth L40S job starts at once, one GPU beyond the L40S
    quota."""
    result = suite(*(f"suites/governance/test_model_quota.py::test_model_quota[{b}]" for b in ("kueue", "volcano", "kai")),
                   "suites/governance/test_cost_attribution.py", "--queue-model=keep", "--run-id=models",
                   f"--reports-dir={tmp_path}")
    assert "4 passed" in result.stdout, result.stdout[-3000:]
    [cost] = [r for r in load_record(tmp_path / "models" / "record.json").results
              if r.criterion == "governance.cost_attribution"]
    charged = {row["queue"] for row in cost.evidence[0]["tables"]["cost: GPU-hours per queue over the run"]}
    assert {"kueue team-a-models", "volcano team-a-nvidia-l40s", "kai team-a-nvidia-l40s"} <= charged, charged
    count_every_model_together(sim_api)  # on the reference queue model the run applied
    result = suite("suites/governance/test_model_quota.py::test_model_quota[kueue]", "--queue-model=keep")
    assert "1 failed" in result.stdout, result.stdout[-3000:]
    assert re.search(r"governance\.model_quota \[kueue\]: measured .*held_for_s: \d+\.\d+ s", result.stdout), \
        result.stdout[-3000:]
    assert "max_gpus_over_model_limit: 1 GPUs (wanted <= 0 GPUs)" in result.stdout, result.stdout[-3000:]

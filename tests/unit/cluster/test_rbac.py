"""The runner's least privilege, pure parts: a request as RBAC sees it, RBAC rules evaluated, the role rendered for
a profile, the preflight's permission list and queue states, a Prometheus's credentials."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from harness.backends import controller_deployments
from harness.config.options import resolve
from harness.core.errors import ConfigError
from harness.setup.preflight import Check, MISSING, OK, blocked, needed_permissions, queue_state_problem, table
from harness.cluster.prometheus import credentials
from harness.cluster.rbac import Request, allowed, impersonation_of, outside, request_of, runner_manifests

API = "https://127.0.0.1:29443"


@pytest.mark.parametrize("method, path, expected", [
    ("GET", "/api/v1/nodes", Request("list", "", "nodes")),
    ("GET", "/api/v1/nodes/gpu-node-1", Request("get", "", "nodes", name="gpu-node-1")),
    ("GET", "/api/v1/namespaces/poc-team-a/pods?watch=true&timeoutSeconds=30",
     Request("watch", "", "pods", namespace="poc-team-a")),
    ("GET", "/api/v1/namespaces/poc-team-a/pods/p-1/log?limitBytes=4096",
     Request("get", "", "pods", "log", "poc-team-a", "p-1")),
    ("POST", "/apis/batch/v1/namespaces/poc-team-a/jobs", Request("create", "batch", "jobs", namespace="poc-team-a")),
    ("DELETE", "/apis/batch/v1/namespaces/poc-team-a/jobs/j", Request("delete", "batch", "jobs", "", "poc-team-a", "j")),
    ("DELETE", "/api/v1/namespaces/poc-team-a/pods?labelSelector=x",
     Request("deletecollection", "", "pods", namespace="poc-team-a")),
    ("PATCH", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq-a",
     Request("patch", "kueue.x-k8s.io", "clusterqueues", name="cq-a")),
    ("GET", "/api/v1/namespaces/poc-team-a", Request("get", "", "namespaces", "", "poc-team-a", "poc-team-a")),
    ("POST", "/api/v1/namespaces/poc-team-a/serviceaccounts/team-a-submitter/token",
     Request("create", "", "serviceaccounts", "token", "poc-team-a", "team-a-submitter")),
    ("GET", "/version", Request("get", path="/version")),
    ("GET", "/apis/kueue.x-k8s.io/v1beta2", Request("get", path="/apis/kueue.x-k8s.io/v1beta2")),
])
def test_a_request_as_the_rbac_authorizer_sees_it(method: str, path: str, expected: Request) -> None:
    assert request_of(method, API + path) == expected


def test_acting_as_a_tenant_asks_to_impersonate_exactly_its_service_account() -> None:
    assert impersonation_of("system:serviceaccount:poc-team-a:team-a-submitter") == Request(
        "impersonate", "", "serviceaccounts", "", "poc-team-a", "team-a-submitter")


def role(kind: str, rules: list[dict[str, object]], namespace: str = "") -> dict[str, object]:
    return {"kind": kind, "metadata": {"name": "r", **({"namespace": namespace} if namespace else {})}, "rules": rules}


def test_rules_allow_as_the_api_server_does() -> None:
    docs = [role("ClusterRole", [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
                                 {"nonResourceURLs": ["/metrics*"], "verbs": ["get"]}]),
            role("Role", [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["*"]},
                          {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
                          {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"],
                           "resourceNames": ["team-a-submitter"]}], "poc-team-a")]
    assert allowed(docs, Request("list", "", "nodes"))
    assert not allowed(docs, Request("patch", "", "nodes", name="gpu-node-1"))
    assert allowed(docs, Request("get", path="/metrics/cadvisor"))
    assert allowed(docs, Request("create", "batch", "jobs", namespace="poc-team-a"))
    assert not allowed(docs, Request("create", "batch", "jobs", namespace="poc-team-b")), "a Role is its namespace's"
    assert not allowed(docs, Request("create", "batch", "jobs")), "a Role grants nothing cluster-wide"
    assert allowed(docs, Request("get", "", "pods", "log", "poc-team-a", "p"))
    assert not allowed(docs, Request("get", "", "pods", "", "poc-team-a", "p")), "a subresource is not its parent"
    assert allowed(docs, impersonation_of("system:serviceaccount:poc-team-a:team-a-submitter"))
    assert not allowed(docs, impersonation_of("system:serviceaccount:poc-team-a:admin"))
    assert outside(docs, [Request("list", "", "nodes"), Request("delete", "", "nodes", name="n"),
                          Request("delete", "", "nodes", name="n")]) == [Request("delete", "", "nodes", name="n")]


def test_the_role_for_a_profile_is_reads_cluster_wide_and_workloads_in_the_tenants_namespaces() -> None:
    profile = resolve({}).profile
    docs = runner_manifests(profile, "gpupoc/runner", ("default", "gpupoc-run-lock"))
    kinds = [(d["kind"], d["metadata"].get("namespace", "")) for d in docs]
    for tenant in profile.tenants:
        assert ("Role", tenant.namespace) in kinds and ("RoleBinding", tenant.namespace) in kinds
        assert allowed(docs, impersonation_of(f"system:serviceaccount:{tenant.namespace}:{tenant.identity}"))
        assert not allowed(docs, Request("create", "batch", "jobs", namespace=tenant.namespace)), "tenants submit"
        assert allowed(docs, Request("delete", "batch", "jobs", "", tenant.namespace, "j"))
        assert allowed(docs, Request("list", "", "secrets", namespace=tenant.namespace))
    assert not allowed(docs, Request("list", "", "secrets", namespace="kube-system"))
    assert not allowed(docs, Request("create", "batch", "jobs", namespace="kube-system"))
    assert not allowed(docs, Request("create", "kueue.x-k8s.io", "clusterqueues"))
    assert not allowed(docs, impersonation_of("system:admin"))
    assert allowed(docs, Request("update", "coordination.k8s.io", "leases", "", "default", "gpupoc-run-lock"))
    assert not allowed(docs, Request("update", "coordination.k8s.io", "leases", "", "default", "other-lease"))
    assert not allowed(docs, Request("patch", "apps", "deployments", "scale", "kueue-system", "kueue-controller-manager"))
    runner_submits = dataclasses.replace(profile, submit_as="runner")
    with_creates = runner_manifests(runner_submits, "gpupoc/runner", None, destructive=controller_deployments())
    assert allowed(with_creates, Request("create", "batch", "jobs", namespace=profile.tenants[0].namespace))
    assert allowed(with_creates, Request("patch", "apps", "deployments", "scale", "kueue-system",
                                         "kueue-controller-manager"))
    assert not allowed(with_creates, Request("patch", "apps", "deployments", "scale", "kube-system", "coredns"))
    assert not allowed(docs, Request("patch", "", "nodes", name="gpu-node-1")), "a node is lost only when destructive"
    assert allowed(with_creates, Request("patch", "", "nodes", name="gpu-node-1"))
    assert not allowed(with_creates, Request("delete", "", "nodes", name="gpu-node-1"))
    sim = runner_manifests(profile, "gpupoc/runner", None, destructive=())
    assert allowed(sim, Request("patch", "", "nodes", name="gpu-node-1"))
    assert not allowed(sim, Request("patch", "apps", "deployments", "scale", "kube-system", "coredns")), \
        "no Deployment named: none, never all"
    binding = next(d for d in docs if d["kind"] == "ClusterRoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "runner", "namespace": "gpupoc"}]
    assert not any("cluster-admin" in str(d) for d in docs)


def test_the_preflight_reviews_every_verb_the_role_names_and_says_what_blocks() -> None:
    docs = [role("Role", [{"apiGroups": ["batch"], "resources": ["jobs", "jobs/status"], "verbs": ["get", "create"]},
                          {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"],
                           "resourceNames": ["a", "b"]}], "ns")]
    needed = needed_permissions(docs)
    assert Request("create", "batch", "jobs", namespace="ns") in needed
    assert Request("get", "batch", "jobs", "status", "ns") in needed
    assert Request("impersonate", "", "serviceaccounts", "", "ns", "b") in needed and len(needed) == 6
    checks = [Check("api", "answers", OK), Check("permissions", "may not create batch/jobs in namespace ns", MISSING,
                                                 "add it", blocking=True)]
    assert blocked(checks) and "1 blocking problem(s)" in table(checks)
    assert "MISSING  permissions  may not create batch/jobs in namespace ns — add it" in table(checks)


@pytest.mark.parametrize("kind, queue, problem", [
    ("ClusterQueue", {"spec": {"stopPolicy": "Hold"}}, "stopPolicy Hold"),
    ("LocalQueue", {"spec": {"stopPolicy": "HoldAndDrain"}}, "stopPolicy HoldAndDrain"),
    ("ClusterQueue", {"spec": {}, "status": {"conditions": [{"type": "Active", "status": "False",
                                                            "reason": "FlavorNotFound", "message": "x"}]}},
     "not active (FlavorNotFound: x)"),
    ("ClusterQueue", {"spec": {"stopPolicy": "None"}, "status": {"conditions": [{"type": "Active", "status": "True"}]}},
     None),
    ("Queue", {"status": {"state": "Closed"}}, "state Closed"),
    ("Queue", {"status": {"state": "Open"}}, None),
])
def test_a_queue_that_will_not_admit_is_named(kind: str, queue: dict[str, object], problem: str | None) -> None:
    assert queue_state_problem(kind, queue) == problem


def test_prometheus_credentials_come_from_files_or_the_url_and_leave_the_url_clean(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    assert credentials("http://127.0.0.1:9090", {"GPUPOC_PROMETHEUS_TOKEN_FILE": str(token)}) == (
        "http://127.0.0.1:9090", {"Authorization": "Bearer s3cret-token"}, None)
    bare, header, auth = credentials("https://ops:p%40ss@prom.example:9443/prom", {})
    assert bare == "https://prom.example:9443/prom" and header is None and auth == ("ops", "p@ss")
    password = tmp_path / "password"
    password.write_text("hunter2")
    assert credentials("http://127.0.0.1:9090", {"GPUPOC_PROMETHEUS_USER": "ops",
                                                 "GPUPOC_PROMETHEUS_PASSWORD_FILE": str(password)})[2] == ("ops",
                                                                                                           "hunter2")
    with pytest.raises(ConfigError, match="GPUPOC_PROMETHEUS_USER is set without a password"):
        credentials("http://127.0.0.1:9090", {"GPUPOC_PROMETHEUS_USER": "ops"})
    with pytest.raises(ConfigError, match="cannot read it"):
        credentials("http://127.0.0.1:9090", {"GPUPOC_PROMETHEUS_TOKEN_FILE": str(tmp_path / "absent")})


def test_a_refusing_prometheus_is_said_in_a_few_words() -> None:
    from harness.cluster.prometheus import refusal
    html = Exception("HTTP Status Code 501 (b'<!DOCTYPE HTML>\\n<html lang=\"en\"><head>...</html>')")
    assert refusal(html) == "HTTP 501: an HTML page, not the Prometheus API"
    bad = Exception('HTTP Status Code 400 (b\'{"status":"error","errorType":"bad_data","error":"parse error"}\')')
    assert refusal(bad) == "HTTP 400: parse error"
    assert "refuses the credentials" in refusal(Exception("HTTP Status Code 401 (b'Unauthorized')"))


def test_bindings_carry_no_rules() -> None:
    docs = runner_manifests(resolve({}).profile, "gpupoc/runner", ("default", "lock"), destructive=controller_deployments())
    assert all("rules" not in d for d in docs if d["kind"].endswith("Binding"))

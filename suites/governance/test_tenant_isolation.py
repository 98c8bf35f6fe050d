"""Governance 3 — tenant isolation.

Once per cluster: each tenant's identity, with its own credentials (a token the API server issues for
its ServiceAccount, or its own kubeconfig context), tries every action the criterion lists against
the other tenant's namespace and against cluster scope; each is asked by SubjectAccessReview (with the
identity's groups) and sent as a real request (writes as server-side dry runs, so nothing changes),
expecting 403. Positive controls (it may submit in its own namespace) must be allowed, or the
identities are broken and nothing can be judged (ERROR). Per backend: a job naming the other tenant's
queue, submitted in its own namespace, must never start.
"""

from __future__ import annotations

import json
import time
from urllib.parse import urlencode
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from harness.cluster.apply import dynamic_client
from harness.backends import Backend
from harness.backends.base import QUEUE_QUOTA
from harness.criteria.governance import tenant_isolation as iso
from harness.criteria.governance.tenant_isolation import ALLOWED, NOT_APPLICABLE, REFUSED, CRITERION
from harness.core.errors import HarnessError, Refused
from harness.core.estimate import exact
from harness.criteria.governance.quota import HOLD_PAST_S
from harness.jobs.system import JobSystem
from harness.config.profile import Profile, Tenant
from harness.run import collect as record
from harness.record.evidence import Evidence
from harness.cluster.manifests import dressed
from harness.cluster.seam import install, service_account_user
from harness.config.workloads import TRAIN_CONTAINER, WorkloadSpec
from harness.targets.target import Target
from suites.governance.common import held_reason, started_within
from suites.training.common import require

PROBE = "gpupoc-isolation-probe"   # a name nothing has: a request allowed past authorization answers 404
TOKEN_S = 600
WORKLOAD_RESOURCES = (("batch", "jobs"), ("apps", "deployments"), ("", "pods"), ("", "services"),
                      ("batch.volcano.sh", "jobs"), ("ray.io", "rayjobs"), ("ray.io", "rayclusters"),
                      ("kueue.x-k8s.io", "workloads"), ("kueue.x-k8s.io", "localqueues"),
                      ("scheduling.volcano.sh", "podgroups"), ("scheduling.run.ai", "podgroups"))
WORKLOAD_VERBS = ("get", "list", "create", "update", "patch", "delete")
READS = (("", "secrets", "list"), ("", "secrets", "get"), ("", "configmaps", "list"), ("", "configmaps", "get"),
         ("", "events", "list"), ("", "pods/log", "get"))
POD_CONNECT = ("pods/exec", "pods/attach", "pods/portforward")
CLUSTER_RESOURCES = (("kueue.x-k8s.io", "clusterqueues"), ("kueue.x-k8s.io", "resourceflavors"),
                     ("scheduling.volcano.sh", "queues"), ("scheduling.run.ai", "queues"),
                     ("scheduling.k8s.io", "priorityclasses"))
CHANGE_VERBS = ("create", "update", "patch", "delete")
SA_GROUPS = ("system:serviceaccounts", "system:authenticated")


@dataclass(frozen=True)
class Action:
    verb: str
    group: str
    resource: str           # may carry a subresource: "pods/log"
    namespace: str | None   # None: cluster scope
    name: str | None = PROBE

    def describe(self) -> str:
        what = f"{self.group}/{self.resource}" if self.group else self.resource
        where = f" in {self.namespace}" if self.namespace else " (cluster)"
        return f"{self.verb} {what}{where}"


def tenant_client(target: Target, tenant: Tenant, remember: Callable[[str], None]) -> client.ApiClient:
    """The tenant's own credentials: its kubeconfig context, else a short-lived token for its ServiceAccount."""
    if tenant.context:
        return target.seam.as_tenant(tenant)
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[],
                                                                                 expiration_seconds=TOKEN_S))
    token = client.CoreV1Api(target.api).create_namespaced_service_account_token(
        tenant.identity, tenant.namespace, request).status.token
    remember(token)
    config = client.Configuration()
    runner = target.api.configuration
    config.host, config.ssl_ca_cert, config.verify_ssl = runner.host, runner.ssl_ca_cert, runner.verify_ssl
    config.api_key = {"authorization": f"Bearer {token}"}
    return install(client.ApiClient(config), target.seam.log, target.seam.read_timeout_s, target.seam.budget_s)


def served(dynamic: DynamicClient, group: str, resource: str) -> str | None:
    """The served version of group/resource, or None when the cluster does not serve it."""
    try:
        found = dynamic.resources.search(group=group, name=resource.split("/")[0])
    except ResourceNotFoundError:
        return None
    versions = sorted({r.api_version for r in found if getattr(r, "group", "") == group})
    preferred = [r.api_version for r in found if getattr(r, "preferred", False) and getattr(r, "group", "") == group]
    chosen = (preferred or versions or [None])[0]
    return str(chosen) if chosen else None


def review(api: client.ApiClient, tenant: Tenant, action: Action) -> str:
    """SubjectAccessReview for the tenant's identity with the groups the API server gives a ServiceAccount."""
    resource, _, sub = action.resource.partition("/")
    attributes = client.V1ResourceAttributes(verb=action.verb, group=action.group, resource=resource,
                                             subresource=sub or None, namespace=action.namespace,
                                             name=action.name if action.verb not in ("list", "create") else None)
    body = client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
        user=service_account_user(tenant), resource_attributes=attributes,
        groups=[*SA_GROUPS, f"system:serviceaccounts:{tenant.namespace}"]))
    allowed = client.AuthorizationV1Api(api).create_subject_access_review(body).status.allowed
    return ALLOWED if allowed else REFUSED


def path_of(action: Action, version: str) -> str:
    base = f"/api/{version}" if not action.group else f"/apis/{action.group}/{version.split('/')[-1]}"
    resource, _, sub = action.resource.partition("/")
    scope = f"/namespaces/{action.namespace}" if action.namespace else ""
    collection = f"{base}{scope}/{resource}"
    if action.verb in ("list", "create") and not sub:
        return collection
    return f"{collection}/{action.name}" + (f"/{sub}" if sub else "")


def send(api: client.ApiClient, action: Action, version: str, extra_headers: dict[str, str] | None = None,
         body: Any = None) -> tuple[str, str]:
    """The real request (writes as dry runs); (allowed/refused, 'HTTP status: message')."""
    method = {"get": "GET", "list": "GET", "create": "POST", "update": "PUT", "patch": "PATCH",
              "delete": "DELETE"}[action.verb]
    query = [("dryRun", "All")] if method in ("POST", "PUT", "PATCH", "DELETE") else []
    if action.resource in POD_CONNECT:
        query = [("command", "true")] if action.resource == "pods/exec" else []
        if action.resource == "pods/portforward":
            query = [("ports", "80")]
    resource, _, sub = action.resource.partition("/")
    if body is None and method in ("POST", "PUT") and not sub:  # authorization comes before decoding the body
        body = {"apiVersion": version, "kind": "Probe", "metadata": {"name": PROBE, "namespace": action.namespace}}
    elif body is None and method == "PATCH":
        body = {"metadata": {"labels": {"gpupoc.io/probe": "true"}}}
    headers = {**api.default_headers, **auth_headers(api),
               "Content-Type": "application/merge-patch+json" if method == "PATCH" else "application/json",
               **(extra_headers or {})}
    url = api.configuration.host + path_of(action, version) + (f"?{urlencode(query)}" if query else "")
    response = api.call_api(method, url, header_params=headers, body=body)
    response.read()
    if 200 <= response.status < 300:
        return ALLOWED, f"HTTP {response.status}"
    try:
        message = str(json.loads(response.data or b"{}").get("message", ""))
    except ValueError:
        message = str(response.reason)
    return iso.request_outcome(response.status), f"HTTP {response.status}: {message[:160]}"


def auth_headers(api: client.ApiClient) -> dict[str, str]:
    """The client's credential headers (a bearer token; client certificates travel in TLS)."""
    return {s["key"]: s["value"] for s in api.configuration.auth_settings().values()
            if s.get("in") == "header" and s.get("value")}


def cross_tenant_actions(me: Tenant, other: Tenant) -> list[Action]:
    actions = [Action(v, g, r, other.namespace) for g, r in WORKLOAD_RESOURCES for v in WORKLOAD_VERBS]
    actions += [Action(v, g, r, other.namespace) for g, r, v in READS]
    actions += [Action("create", "", r, other.namespace) for r in POD_CONNECT]
    actions += [Action(v, g, r, None) for g, r in CLUSTER_RESOURCES for v in CHANGE_VERBS]
    actions += [Action("create", "rbac.authorization.k8s.io", "rolebindings", other.namespace),
                Action("create", "rbac.authorization.k8s.io", "rolebindings", me.namespace),
                Action("create", "rbac.authorization.k8s.io", "roles", me.namespace)]
    return actions


def attempts_of(target: Target, me: Tenant, other: Tenant, mine: client.ApiClient,
                workloads: WorkloadSpec) -> list[iso.Attempt]:
    dynamic = dynamic_client(target.api)
    result = []
    for action in cross_tenant_actions(me, other):
        version = served(dynamic, action.group, action.resource)
        if version is None:
            continue  # the cluster does not serve it (a backend not installed): nothing to touch
        outcome, answer = send(mine, action, version)
        result.append(iso.Attempt(me.name, action.describe(), REFUSED, review(target.api, me, action), outcome,
                                  answer))
    impersonate = Action("impersonate", "", "serviceaccounts", other.namespace, other.identity)
    outcome, answer = send(mine, Action("list", "", "pods", other.namespace, None), "v1",
                           {"Impersonate-User": service_account_user(other)})
    result.append(iso.Attempt(me.name, f"impersonate {service_account_user(other)}", REFUSED,
                              review(target.api, me, impersonate), outcome, answer))
    for verb, resource, name in (("bind", "clusterroles", "cluster-admin"), ("escalate", "clusterroles", "admin")):
        action = Action(verb, "rbac.authorization.k8s.io", resource, None, name)
        result.append(iso.Attempt(me.name, f"{verb} clusterrole {name}", REFUSED, review(target.api, me, action),
                                  NOT_APPLICABLE, "review only: the real request is the role/rolebinding create"))
    job = dressed([{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": PROBE, "namespace": me.namespace},
                    "spec": {"template": {"spec": {"restartPolicy": "Never",
                                                   "containers": [{"name": TRAIN_CONTAINER, "image": ""}]}}}}],
                  workloads)[0]
    for action, body in ((Action("create", "batch", "jobs", me.namespace), job),
                         (Action("list", "", "pods", me.namespace), None)):
        outcome, answer = send(mine, action, served(dynamic, action.group, action.resource) or "v1", body=body)
        result.append(iso.Attempt(me.name, f"{action.describe()} (own namespace)", ALLOWED,
                                  review(target.api, me, action), outcome, answer))
    return result


def test_tenant_isolation(target: Target, queue_model: Profile, request: pytest.FixtureRequest,
                          evidence: Callable[[str], Evidence]) -> None:
    """A property of the cluster (its RBAC), checked once per target."""
    ev = evidence(CRITERION.id)
    if len(queue_model.tenants) < 2:
        pytest.skip("the profile has one tenant: there is no other tenant to be isolated from")
    attempts: list[iso.Attempt] = []
    for me in queue_model.tenants:
        mine = tenant_client(target, me, lambda token: record.remember_value(request.config, token))
        for other in queue_model.tenants:
            if other is not me:
                attempts += attempts_of(target, me, other, mine, queue_model.workloads)
    ev.note(f"{len(attempts)} attempts by {len(queue_model.tenants)} identities (review and real request each)")
    check_attempts(ev, attempts, "isolation matrix: who tried what, expected, got")
    ev.verdict()


def check_attempts(ev: Evidence, attempts: list[iso.Attempt], table: str, label: str = "") -> None:
    """The attempts as a table and a check; a positive control refused makes the setup broken (ERROR)."""
    ev.tables[table] = [a.row() for a in attempts]
    broken = iso.control_failures(attempts)
    if broken:
        raise HarnessError("tenant identities cannot do what they must with their own work, so isolation "
                           "cannot be judged: " + "; ".join(f"{a.who}: {a.action} -> {a.answer or a.review}"
                                                          for a in broken))
    allowed = iso.cross_tenant_allowed(attempts)
    for a in allowed:
        ev.note(f"ALLOWED: {a.who}: {a.action} (review {a.review}, real request {a.request}: {a.answer})")
    ev.expect("max_cross_tenant_allowed", len(allowed), label=label)


def test_queue_isolation(target: Target, backend: Backend, workloads: JobSystem, queue_model: Profile,
                         evidence: Callable[[str], Evidence]) -> None:
    """A job naming another tenant's queue, submitted by a tenant in its own namespace, must never start."""
    require(target, backend, QUEUE_QUOTA)
    ev = evidence(CRITERION.id)
    if len(queue_model.tenants) < 2:
        pytest.skip("the profile has one tenant: there is no other tenant's queue")
    me, other = queue_model.tenants[0], queue_model.tenants[1]
    theirs = other.queues.get(backend.queue_system)
    if not theirs:
        pytest.skip(f"tenant {other.name} has no {backend.name} queue in the profile")
    attempts = workloads.cross_tenant_attempts(me, other)  # a job system's own users (Slurm); None on Kubernetes
    if attempts is not None:
        check_attempts(ev, attempts, f"{backend.name}: who tried what on the other tenant's jobs, expected, got",
                       "jobs")
    mine_naming_theirs = Tenant(me.name, me.namespace, me.identity, me.weight, me.quota_gpus,
                                {**me.queues, backend.queue_system: theirs}, me.context, me.limit_gpus)
    intruder = workloads.gang("other-queue", mine_naming_theirs, 1, 1, run_for_s=60)
    window = queue_model.threshold(CRITERION.id, "held_for_s") + HOLD_PAST_S
    submitted = time.time()
    try:
        workloads.submit(intruder)
    except (client.ApiException, Refused) as exc:
        if isinstance(exc, client.ApiException) and exc.status not in (iso.HTTP_FORBIDDEN, 400, 422):
            raise
        ev.note(f"{me.name} naming {other.name}'s {backend.name} queue {theirs!r}: refused at creation ("
                + (f"HTTP {exc.status})" if isinstance(exc, client.ApiException) else f"{exc})"))
        ev.expect("max_cross_tenant_allowed", 0, label="queue")
        ev.expect("held_for_s", exact(window))  # refused: held for good
        ev.verdict()
        return
    started_at = started_within(workloads, [intruder], f"{intruder.name} stays held", window)
    ended = time.time()
    reason = held_reason(target.api, workloads, intruder)
    ev.note(f"{me.name} submitted a job in {me.namespace} naming {other.name}'s {backend.name} queue {theirs!r}: "
            + (f"it started {started_at - submitted:.1f}s later — nothing ties the queue to its tenant"
               if started_at is not None else f"held through the window ({reason or 'no reason given'})"))
    ev.expect("max_cross_tenant_allowed", 0 if started_at is None else 1, label="queue")
    ev.expect("held_for_s", round((started_at or ended) - submitted, 3))
    ev.verdict()

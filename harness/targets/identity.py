"""The runner's own identity on the sim: a ServiceAccount bound to exactly the role `gpupoc rbac` generates for
the profile, as on a staging cluster, so a request outside it is refused by the API server when it is made.

The sim admin (its client certificate) applies the role and asks the TokenRequest API for the ServiceAccount's
token; the runner's client then carries only that token and the sim's CA. The admin keeps what belongs to the sim
itself: its queue model, its nodes, the join of its worker sims, release swaps (Target.admin_api).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from kubernetes import client

from harness.cluster import rbac
from harness.config.profile import Profile
from harness.core.errors import SimError

RUNNER_ACCOUNT = "gpupoc/gpupoc-runner"
TOKEN_SECONDS = 12 * 3600  # longer than any run; the sim's API server issues it as asked
ROLE_SETTLED_S = 15.0  # the API server's RBAC informer sees a new binding within a few seconds
# A sensitivity of the test suite: "VERB GROUP/RESOURCE" pairs left out of the runner's role (e.g. "watch batch/jobs")
ROLE_DROP_ENV = "GPUPOC_RUNNER_ROLE_DROP"


def without(docs: list[dict[str, Any]], dropped: Sequence[str]) -> list[dict[str, Any]]:
    """Pure: the role with each "VERB GROUP/RESOURCE" of `dropped` taken out of every rule that grants it."""
    pairs = [(d.split()[0], *d.split()[1].split("/", 1)) for d in dropped if len(d.split()) == 2 and "/" in d]
    if not pairs:
        return docs
    return [{**doc, "rules": [r for r in (_less(rule, pairs) for rule in doc["rules"]) if r["verbs"]]}
            if "rules" in doc else doc for doc in docs]


def _less(rule: dict[str, Any], pairs: list[tuple[str, ...]]) -> dict[str, Any]:
    """Pure: the rule without the verbs `pairs` (verb, group, resource; group "core" for "") take from it."""
    gone = {verb for verb, group, resource in pairs
            if group.replace("core", "") in (rule.get("apiGroups") or []) and resource in (rule.get("resources") or [])}
    return {**rule, "verbs": [v for v in rule.get("verbs") or [] if v not in gone]}


def runner_client(admin: client.ApiClient, profile: Profile, lock: tuple[str, str] | None,
                  dropped: Sequence[str] = (), account: str = RUNNER_ACCOUNT,
                  make_namespaces: bool = True) -> client.ApiClient:
    """The runner's client on the sim: its role applied, its token. `make_namespaces`: the tenants' namespaces are
    made where missing (the reference queue model would make them next); else a namespace the profile names but the
    cluster lacks gets no Role here and is the preflight's to name (--queue-model keep)."""
    core = client.CoreV1Api(admin)
    existing = {n.metadata.name for n in core.list_namespace().items}
    wanted = {ns for t in profile.tenants for ns in (t.namespace, t.inference_namespace)}
    for namespace in sorted(wanted - existing) if make_namespaces else []:
        core.create_namespace({"metadata": {"name": namespace}})  # the queue model labels and fills it
        existing.add(namespace)
    # the sim allows destructive steps (it is the harness's own): the runner may lose a node, as a runner given
    # `gpupoc rbac --destructive` may on a real cluster; the sim's controllers are processes, no Deployment to scale
    docs = without(rbac.runner_manifests(profile, account, lock, destructive=()), dropped)
    rbac.apply(admin, account, [d for d in docs if d["metadata"].get("namespace") in {None, *existing}])
    namespace, name = account.split("/", 1)
    token = core.create_namespaced_service_account_token(name, namespace, client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=TOKEN_SECONDS))).status.token
    configuration = client.Configuration()
    configuration.host = admin.configuration.host
    configuration.ssl_ca_cert = admin.configuration.ssl_ca_cert
    configuration.verify_ssl = admin.configuration.verify_ssl
    configuration.api_key = {"authorization": f"Bearer {token}"}
    runner = client.ApiClient(configuration)
    _wait_bound(runner, account)
    return runner


def _wait_bound(runner: client.ApiClient, account: str) -> None:
    """Until the API server's authorizer has the new role (the first request of a run is not refused for it)."""
    deadline = time.monotonic() + ROLE_SETTLED_S
    review = client.V1SelfSubjectAccessReview(spec=client.V1SelfSubjectAccessReviewSpec(
        resource_attributes=client.V1ResourceAttributes(verb="list", resource="nodes")))
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            answer = client.AuthorizationV1Api(runner).create_self_subject_access_review(review)
            if answer.status.allowed:
                return
            last = "not allowed to list nodes yet"
        except client.ApiException as exc:
            last = f"{exc.status} {exc.reason}"
        time.sleep(0.2)
    raise SimError(f"the runner's ServiceAccount {account} was not given its role within {ROLE_SETTLED_S:g}s "
                   f"(last: {last}); is the sim's API server running with RBAC (--authorization-mode=RBAC)?")

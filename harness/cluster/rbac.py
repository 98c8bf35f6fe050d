"""The runner's least privilege: what the cluster seam asked of the API server, as RBAC requests, and the role
(manifests/rbac/) that allows exactly that.

`request_of(method, url)` turns a request the seam sent into the RBAC attributes the API server authorizes
(verb, API group, resource, subresource, namespace, name); `allowed(rules, request)` evaluates RBAC rules the way
the API server's RBAC authorizer does (verbs, apiGroups, resources incl. "res/sub", resourceNames, nonResourceURLs,
a Role's rules only in its namespace). `runner_manifests(profile, account)` renders the ClusterRole, one Role per
tenant namespace, the run lock's Role and their bindings for a ServiceAccount.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from harness.cluster.apply import dynamic_client
from harness.config.profile import Profile
from harness.core.paths import MANIFESTS_DIR

RBAC_DIR = MANIFESTS_DIR / "rbac"
CLUSTER_FILE, TENANT_FILE, LOCK_FILE = "runner-cluster.yaml", "runner-tenant.yaml", "runner-lock.yaml"
DESTRUCTIVE_FILE = "runner-destructive.yaml"
WHEN = "gpupoc.io/when"  # a template document rendered only for profiles it names (submit_as=runner)
FIELD_MANAGER = "gpupoc-rbac"
REQUESTS_FILE = "requests.json"  # beside a run's record: what its runner asked of the API server
_ANY = "*"


@dataclass(frozen=True, order=True)
class Request:
    """One request as the RBAC authorizer sees it (non-resource requests have `path` and no resource)."""

    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""

    def describe(self) -> str:
        if self.path:
            return f"{self.verb} {self.path}"
        what = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        group = f"{self.group}/" if self.group else ""
        where = f" in namespace {self.namespace}" if self.namespace else " (cluster-wide)"
        named = f" {self.name!r}" if self.name and self.verb == "impersonate" else ""
        return f"{self.verb} {group}{what}{named}{where}"

    def as_dict(self) -> dict[str, str]:
        return {k: v for k, v in self.__dict__.items() if v}


_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def request_of(method: str, url: str) -> Request:
    """Pure: the RBAC attributes of an API request (the API server's RequestInfo, for the paths clients use)."""
    parts = urlsplit(url)
    segments = [s for s in parts.path.split("/") if s]
    query = parse_qs(parts.query)
    if not segments or segments[0] not in ("api", "apis"):
        return Request(method.lower(), path=parts.path or "/")
    if segments[0] == "api":
        group, rest = "", segments[2:]
    else:
        if len(segments) < 3:
            return Request(method.lower(), path=parts.path)  # discovery: /apis, /apis/<group>
        group, rest = segments[1], segments[3:]
    if not rest:
        return Request(method.lower(), path=parts.path)  # discovery of a group version
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    elif rest[0] == "namespaces" and len(rest) == 2:  # the namespace object itself
        namespace = rest[1]
    resource, name = rest[0], rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    method = method.upper()
    if method == "GET":
        watching = query.get("watch", [""])[0] in ("true", "1")
        verb = "watch" if watching else ("get" if name else "list")
        if not name:  # a list or watch of one object by name: RBAC sees its name (RequestInfo does the same)
            selector = query.get("fieldSelector", [""])[0]
            name = selector.split("=", 1)[1] if selector.startswith("metadata.name=") and "," not in selector else ""
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = _VERBS.get(method, method.lower())
    return Request(verb, group, resource, subresource, namespace, name)


def impersonation_of(user: str) -> Request:
    """Pure: what acting as `user` asks of RBAC (a ServiceAccount's username names the object impersonated)."""
    found = re.fullmatch(r"system:serviceaccount:([^:]+):([^:]+)", user)
    if found:
        return Request("impersonate", "", "serviceaccounts", "", found.group(1), found.group(2))
    return Request("impersonate", "", "users", "", "", user)


def _matches(values: list[str], value: str) -> bool:
    return _ANY in values or value in values


def rule_allows(rule: dict[str, Any], request: Request) -> bool:
    """Pure: one PolicyRule against one request."""
    if not _matches(rule.get("verbs") or [], request.verb):
        return False
    if request.path:
        return any(u == request.path or u == _ANY or (u.endswith("*") and request.path.startswith(u[:-1]))
                   for u in rule.get("nonResourceURLs") or [])
    resource = f"{request.resource}/{request.subresource}" if request.subresource else request.resource
    names = rule.get("resourceNames") or []
    return (_matches(rule.get("apiGroups") or [], request.group)
            and (_matches(rule.get("resources") or [], resource) or f"{request.resource}/*" in (rule.get("resources") or []))
            and (not names or request.name in names))


def allowed(documents: list[dict[str, Any]], request: Request) -> bool:
    """Pure: the request is allowed by a ClusterRole (anywhere) or by a Role in the request's namespace."""
    for doc in documents:
        if doc.get("kind") == "ClusterRole" or (doc.get("kind") == "Role" and request.namespace
                                                 and doc["metadata"].get("namespace") == request.namespace):
            if any(rule_allows(rule, request) for rule in doc.get("rules") or []):
                return True
    return False


def outside(documents: list[dict[str, Any]], requests: list[Request]) -> list[Request]:
    """Pure: the requests the role does not allow, each once."""
    return sorted({r for r in requests if not allowed(documents, r)})


def _load(name: str, values: dict[str, str]) -> list[dict[str, Any]]:
    text = (RBAC_DIR / name).read_text()
    for key, value in values.items():
        text = text.replace("${" + key + "}", value)
    return [d for d in yaml.safe_load_all(text) if d]


def runner_manifests(profile: Profile, account: str, lock: tuple[str, str] | None,
                     destructive: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """The runner's role for ServiceAccount `account` (NAMESPACE/NAME): cluster-wide reads, one Role per tenant
    namespace (its runs' objects, impersonating exactly its identities, listing its Secrets to redact their
    values; creating the jobs too where the profile submits as the runner), the run lock's Lease, the bindings;
    with `destructive` (the backends' controller Deployments, none on the sim), scaling them (control-plane recovery
    on a real cluster) and tainting a node (topology placement's lost node)."""
    sa_namespace, sa_name = account.split("/", 1)
    common = {"RUNNER_NAMESPACE": sa_namespace, "RUNNER_NAME": sa_name}
    docs = _load(CLUSTER_FILE, common)
    identities: dict[str, list[str]] = {}
    for tenant in profile.tenants:
        for ns in dict.fromkeys((tenant.namespace, tenant.inference_namespace)):
            identities.setdefault(ns, [])
        identities[tenant.namespace].append(tenant.identity)
    for ns, names in identities.items():
        for doc in _load(TENANT_FILE, {**common, "TENANT_NAMESPACE": ns}):
            when = (doc["metadata"].get("annotations") or {}).pop(WHEN, None)
            if when is not None and when != f"submit_as={profile.submit_as}":
                continue
            if doc["kind"] == "Role":
                doc["rules"] = [_named(rule, names) for rule in doc.get("rules") or []
                                if names or rule.get("verbs") != ["impersonate"]]
            docs.append(doc)
    if lock is not None:
        docs += _load(LOCK_FILE, {**common, "LOCK_NAMESPACE": lock[0], "LOCK_NAME": lock[1]})
    if destructive is not None:
        deployments = sorted(set(destructive))
        for doc in _load(DESTRUCTIVE_FILE, common):
            if doc["kind"] == "ClusterRole":
                # the Deployments' rule names them; none named (the sim's controllers are processes): no such rule,
                # never one for all of them
                named = [rule for rule in doc.get("rules") or [] if "resourceNames" in rule]
                doc["rules"] = [rule for rule in doc.get("rules") or [] if rule not in named] + (
                    [{**rule, "resourceNames": deployments} for rule in named] if deployments else [])
            docs.append(doc)
    return docs


def _named(rule: dict[str, Any], identities: list[str]) -> dict[str, Any]:
    """Impersonation of exactly the namespace's tenant identities."""
    return {**rule, "resourceNames": identities} if rule.get("verbs") == ["impersonate"] else rule


def service_account(account: str) -> dict[str, Any]:
    namespace, name = account.split("/", 1)
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {
        "name": name, "namespace": namespace, "labels": {"app.kubernetes.io/managed-by": "gpupoc"}}}


def as_yaml(*parts: dict[str, Any] | list[dict[str, Any]]) -> str:
    docs = [d for p in parts for d in (p if isinstance(p, list) else [p])]
    return "---\n".join(yaml.safe_dump(d, sort_keys=False) for d in docs)


def load_requests(path: Path) -> list[Request]:
    """A run's requests.json (written beside its record) as requests."""
    return [Request(**item) for item in json.loads(path.read_text())]


def apply(api: Any, account: str, docs: list[dict[str, Any]]) -> list[str]:
    """Server-side apply of the ServiceAccount (its namespace created when missing) and the role, as an admin."""
    from kubernetes import client
    namespace = account.split("/", 1)[0]
    core = client.CoreV1Api(api)
    try:
        core.read_namespace(namespace)
    except client.ApiException as exc:
        if exc.status != 404:
            raise
        core.create_namespace({"metadata": {"name": namespace, "labels": {"app.kubernetes.io/managed-by": "gpupoc"}}})
    dynamic, done = dynamic_client(api), []
    for doc in [service_account(account), *docs]:
        resource = dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        meta = doc["metadata"]
        resource.server_side_apply(body=doc, name=meta["name"], namespace=meta.get("namespace"),
                                   field_manager=FIELD_MANAGER, force_conflicts=True)
        done.append(f"applied {doc['kind']} {meta.get('namespace', '') + '/' if meta.get('namespace') else ''}"
                    f"{meta['name']}")
    return done


def remove(api: Any, account: str, docs: list[dict[str, Any]]) -> list[str]:
    """Delete the role, its bindings and the ServiceAccount (what `apply` made; the namespace stays)."""
    from kubernetes.dynamic.exceptions import NotFoundError
    dynamic, gone = dynamic_client(api), []
    for doc in [*docs, service_account(account)]:
        meta = doc["metadata"]
        try:
            dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"]).delete(
                name=meta["name"], namespace=meta.get("namespace"))
        except NotFoundError:
            continue
        gone.append(f"deleted {doc['kind']} {meta.get('namespace', '') + '/' if meta.get('namespace') else ''}"
                    f"{meta['name']}")
    return gone

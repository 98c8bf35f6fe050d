"""The cluster seam: every request of the runner goes through one place.

`install(api, ...)` puts a `SeamTransport` between an ApiClient and its REST client. Every request
(typed client, dynamic client, watch) then carries a client-side timeout, so a frozen API server
ends in an error instead of a hang, and transient failures (connection refused or reset, timeouts,
429, 5xx) are retried within a retry budget. An outage the budget bridges is logged (`Outage`) so
the evidence can say so; one that outlasts it raises `ApiUnavailable`, an ERROR, never a FAIL.

`ClusterSeam.as_tenant(tenant)` is an ApiClient acting as the tenant's identity from the profile: its
own kubeconfig context where the profile names one (tenants[].context), else impersonation of its
ServiceAccount. Requests made as a tenant go through the same seam.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config as kube_config
from kubernetes.config.config_exception import ConfigException
from kubernetes.client import rest

from harness.core import progress
from harness.core.errors import ConfigError, HarnessError
from harness.config.profile import Tenant
from harness.cluster.rbac import Request, impersonation_of, request_of

TRANSIENT_STATUSES = (429, 500, 502, 503, 504)
HTTP_FORBIDDEN = 403
CONNECT_TIMEOUT_S = 5.0
DEFAULT_READ_TIMEOUT_S = 20.0
DEFAULT_RETRY_BUDGET_S = 30.0
COLLECTION_DELETE_READ_S = 300.0  # measured: 10,000 Jobs on the sim's saturated API server took over 40 s
# asked again while the API server ends each try at 60 s: 10,000 KAI PodGroups took over 300 s (5 tries) to go
COLLECTION_DELETE_BUDGET_S = 900.0
WATCH_READ_MARGIN_S = 15.0  # a watch may be idle for its whole timeoutSeconds; read a little longer
BACKOFF_S = (0.2, 0.5, 1.0, 2.0)
_WATCH_TIMEOUT = re.compile(r"[?&]timeoutSeconds=(\d+)")


class ApiUnavailable(HarnessError):
    """The API server did not answer within the retry budget: the environment broke (ERROR)."""


class PermissionMissing(HarnessError, rest.ApiException):  # type: ignore[misc]
    """The runner's own identity was refused (403): its role lacks a permission the suites use (ERROR, not FAIL).
    Still an ApiException with its status, for code that handles a refusal."""

    def __init__(self, response: Any, method: str, url: str) -> None:
        rest.ApiException.__init__(self, status=response.status, reason=response.reason)
        self.body = response.read()
        said = _message_of(self.body) or f"{method} {_path(url)}: {response.reason}"
        self.message = (f"the runner lacks a permission: {said} (HTTP 403); add it to the runner's role "
                        f"(`gpupoc rbac`), or run as an identity that has it")

    def __str__(self) -> str:
        return self.message


def _message_of(body: Any) -> str:
    try:
        return str(json.loads(body).get("message", ""))
    except (TypeError, ValueError, AttributeError):
        return ""


@dataclass
class Outage:
    """Transient failures of requests, from the first to the last retry, bridged or not."""

    started: float
    ended: float
    retries: int
    cause: str
    bridged: bool = True
    what: str = "API server"

    def describe(self) -> str:
        how = "bridged" if self.bridged else "NOT bridged"
        return (f"{self.what} unavailable for {self.ended - self.started:.1f}s ({self.retries} retries, "
                f"{self.cause}); {how} by the retry budget")


def merged(outages: list[Outage]) -> list[Outage]:
    """Pure: one outage per overlapping stretch of the same thing (several requests see the same outage at once);
    bridged only if every request in it was."""
    result: list[Outage] = []
    for o in sorted(outages, key=lambda o: (o.what, o.started)):
        last = result[-1] if result else None
        if last is not None and last.what == o.what and o.started <= last.ended:
            result[-1] = Outage(last.started, max(last.ended, o.ended), max(last.retries, o.retries),
                                last.cause, last.bridged and o.bridged, last.what)
        else:
            result.append(o)
    return result


@dataclass
class RetryLog:
    """Every outage the seam saw, shared by the runner's and the tenants' clients."""

    outages: list[Outage] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, outage: Outage) -> None:
        with self.lock:
            self.outages.append(outage)

    def since(self, start: float) -> list[Outage]:
        """The outages that ended after `start`, overlapping ones merged."""
        with self.lock:
            return merged([o for o in self.outages if o.ended >= start])


def transient_cause(exc: BaseException | None, status: int | None) -> str | None:
    """Pure: why a request is worth retrying (None when it is not: a TLS or URL error will not heal)."""
    if status in TRANSIENT_STATUSES:
        return f"HTTP {status}"
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        exc = exc.reason
    if isinstance(exc, urllib3.exceptions.SSLError):
        return None
    if isinstance(exc, (urllib3.exceptions.TimeoutError, urllib3.exceptions.ProtocolError,
                        urllib3.exceptions.NewConnectionError, ConnectionError, TimeoutError)):
        return type(exc).__name__
    return None


def settled_by_retry(method: str, status: int, retried: bool) -> bool:
    """Pure: after a retry, a create that finds its object (409) or a delete that finds it gone (404) already
    happened: the first attempt reached the server before its reply was lost."""
    return retried and ((method == "POST" and status == 409) or (method == "DELETE" and status == 404))


def read_timeout(url: str, default_s: float, method: str = "GET") -> float:
    """Pure: a watch's read timeout covers its server-side timeoutSeconds; deleting a collection (by selector) is
    one request however many objects it holds, and gets longer; other requests get the default."""
    found = _WATCH_TIMEOUT.search(url)
    if found and "watch=true" in url:
        return float(found.group(1)) + WATCH_READ_MARGIN_S
    if is_collection_delete(method, url):
        return max(default_s, COLLECTION_DELETE_READ_S)
    return default_s


def is_collection_delete(method: str, url: str) -> bool:
    """Pure: a DELETE of every object a selector picks (one request, however many objects)."""
    return method == "DELETE" and "labelSelector=" in url


@dataclass
class RequestsSeen:
    """What the runner's identity asked of the API server (RBAC attributes, each once): the least-privilege role is
    derived from it and checked against it. A request made acting as a tenant counts as its impersonation."""

    seen: set[Request] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # an admin's step on the sim (the reference queue model, the join of worker sims) is not the runner's: paused
    # for the thread that makes it only, so the runner's own requests meanwhile (a case's watches) still count
    _admin: threading.local = field(default_factory=threading.local)

    @property
    def paused(self) -> bool:
        return bool(getattr(self._admin, "depth", 0))

    def add(self, method: str, url: str, headers: Any) -> None:
        acting = (headers or {}).get("Impersonate-User")
        request = impersonation_of(acting) if acting else request_of(method, url)
        if self.paused:
            return
        with self.lock:
            self.seen.add(request)

    @contextlib.contextmanager
    def not_the_runners(self) -> Iterator[None]:
        self._admin.depth = getattr(self._admin, "depth", 0) + 1
        try:
            yield
        finally:
            self._admin.depth -= 1

    def sorted(self) -> list[Request]:
        with self.lock:
            return sorted(self.seen)


def pause_before_retry(retries: int) -> int:
    """The pause before retry number `retries + 1` of one request (the last of BACKOFF_S repeats until the caller's
    budget is spent): the one backoff of the API seam and the Prometheus client. Returns the retries made."""
    time.sleep(BACKOFF_S[min(retries, len(BACKOFF_S) - 1)])
    return retries + 1


class SeamTransport:
    """Wraps an ApiClient's RESTClientObject: default timeouts, retries within a budget, outages logged."""

    def __init__(self, inner: Any, log: RetryLog, read_timeout_s: float, budget_s: float,
                 seen: RequestsSeen | None = None) -> None:
        self.inner, self.log, self.seen = inner, log, seen
        self.read_timeout_s, self.budget_s = read_timeout_s, budget_s

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def request(self, method: str, url: str, headers: Any = None, body: Any = None, post_params: Any = None,
                _request_timeout: Any = None) -> Any:
        timeout = _request_timeout or (CONNECT_TIMEOUT_S, read_timeout(url, self.read_timeout_s, method))
        # the API server ends a request after 60 s, partway through a big collection: asking again deletes the rest
        collection = is_collection_delete(method, url)
        budget_s = max(self.budget_s, COLLECTION_DELETE_BUDGET_S) if collection else self.budget_s
        waiting = progress.Waiting(f"DELETE {_path(url)}", budget_s) if collection else None
        if self.seen is not None:
            self.seen.add(method, url, headers)
        started = time.monotonic()
        first_failure: float | None = None
        retries, cause = 0, ""
        while True:
            exc: BaseException | None = None
            response = None
            try:
                response = self.inner.request(method, url, headers=headers, body=body, post_params=post_params,
                                              _request_timeout=timeout)
            except (urllib3.exceptions.HTTPError, OSError) as error:
                exc = error

            status = getattr(response, "status", None)
            failure = transient_cause(exc, status)
            if failure is None and retries and status in (401, 403) and not self._ready(url, headers):
                # an API server coming back serves before its authorizer has synced: refusals until /readyz
                failure = f"HTTP {status} while the API server is not ready"
            if failure is None:
                if exc is not None:
                    raise exc
                if status == HTTP_FORBIDDEN and self.seen is not None and "Impersonate-User" not in (headers or {}):
                    raise PermissionMissing(response, method, url)  # the runner's own request, not a tenant's
                if first_failure is not None and not collection:  # a collection asked again is no outage
                    self.log.add(Outage(_wall(first_failure), time.time(), retries, cause))
                if status is not None and settled_by_retry(method, status, retries > 0):
                    return self._settled(method, url, headers, body, timeout, response)
                return response
            if response is not None:
                response.read()  # give the connection back to the pool before retrying
            first_failure = first_failure if first_failure is not None else time.monotonic()
            cause = failure
            if waiting is not None:
                waiting.tick(lambda: f"{retries + 1} tries so far, the last ended by {cause}")
            if time.monotonic() - started >= budget_s:
                self.log.add(Outage(_wall(first_failure), time.time(), retries, cause, bridged=False))
                raise ApiUnavailable(f"API server {method} {_path(url)}: {cause} for {time.monotonic() - started:.0f}s "
                                     f"(retry budget {budget_s:.0f}s, {retries} retries); "
                                     "check that the API server is running and reachable") from exc
            retries = pause_before_retry(retries)


    def _ready(self, url: str, headers: Any) -> bool:
        base = re.match(r"^https?://[^/]+", url)
        try:
            answer = self.inner.request("GET", f"{base.group(0) if base else ''}/readyz",
                                        headers={k: v for k, v in (headers or {}).items() if k == "Authorization"},
                                        _request_timeout=(CONNECT_TIMEOUT_S, self.read_timeout_s))
        except (urllib3.exceptions.HTTPError, OSError, rest.ApiException):
            return False
        answer.read()
        return bool(getattr(answer, "status", None) == 200)

    def _settled(self, method: str, url: str, headers: Any, body: Any, timeout: Any, response: Any) -> Any:
        """What the first attempt of a retried create or delete did: the created object, or success."""
        response.read()
        if method == "DELETE":
            return _status_success()
        name = ((body or {}).get("metadata") or {}).get("name") if isinstance(body, dict) else None
        if not name:
            return response
        return self.inner.request("GET", f"{url.split('?')[0]}/{name}", headers=headers, _request_timeout=timeout)


def _status_success() -> Any:
    """A 200 Status reply, as the API server gives for a delete."""
    raw = urllib3.response.HTTPResponse(body=io.BytesIO(b'{"kind":"Status","apiVersion":"v1","status":"Success"}'),
                                        status=200, headers={"content-type": "application/json"},
                                        preload_content=False)
    return rest.RESTResponse(raw)


def _wall(monotonic_at: float) -> float:
    return time.time() - (time.monotonic() - monotonic_at)


def _path(url: str) -> str:
    return re.sub(r"^https?://[^/]+", "", url).split("?")[0]


def install(api: client.ApiClient, log: RetryLog, read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
            budget_s: float = DEFAULT_RETRY_BUDGET_S, seen: RequestsSeen | None = None) -> client.ApiClient:
    """Route every request of `api` through the seam (idempotent). urllib3's own retries are turned off, so the
    seam's budget is the only one and every failed attempt is seen."""
    if not isinstance(api.rest_client, SeamTransport):
        api.configuration.retries = False
        api.rest_client = SeamTransport(rest.RESTClientObject(api.configuration), log, read_timeout_s, budget_s, seen)
    return api


def impersonating(api: client.ApiClient, user: str) -> client.ApiClient:
    """A client with `api`'s credentials acting as `user` (the API server adds a ServiceAccount's groups)."""
    acting = client.ApiClient(configuration=copy.copy(api.configuration))
    acting.set_default_header("Impersonate-User", user)
    return acting


def service_account_user(tenant: Tenant) -> str:
    return f"system:serviceaccount:{tenant.namespace}:{tenant.identity}"


class ClusterSeam:
    """The runner's client and, per tenant, a client acting as that tenant; all through the seam."""

    def __init__(self, api: client.ApiClient, read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
                 budget_s: float = DEFAULT_RETRY_BUDGET_S, kubeconfig: Path | None = None) -> None:
        self.log, self.requests = RetryLog(), RequestsSeen()
        self.kubeconfig = kubeconfig
        self.read_timeout_s, self.budget_s = read_timeout_s, budget_s
        self.api = install(api, self.log, read_timeout_s, budget_s, self.requests)
        self._tenants: dict[str, client.ApiClient] = {}

    def as_tenant(self, tenant: Tenant) -> client.ApiClient:
        if tenant.name not in self._tenants:
            own = tenant.context is not None  # its own credentials: nothing asked of the runner's role
            acting = self._own_context(tenant) if own else impersonating(self.api, service_account_user(tenant))
            self._tenants[tenant.name] = install(acting, self.log, self.read_timeout_s, self.budget_s,
                                                 None if own else self.requests)
        return self._tenants[tenant.name]

    def _own_context(self, tenant: Tenant) -> client.ApiClient:
        if self.kubeconfig is None:
            raise ConfigError(f"tenant {tenant.name} names kubeconfig context {tenant.context!r}, but the target has "
                              "no kubeconfig (--kubeconfig); drop tenants[].context to impersonate its identity")
        try:
            return kube_config.new_client_from_config(str(self.kubeconfig), context=tenant.context)
        except ConfigException as exc:
            raise ConfigError(f"tenant {tenant.name}: context {tenant.context!r} of {self.kubeconfig}: {exc}") from exc

    def outages_since(self, start: float) -> list[Outage]:
        return self.log.since(start)

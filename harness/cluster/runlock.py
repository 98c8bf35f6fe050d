"""One run at a time per cluster: a Lease in the cluster is the run lock.

A run (a pytest session that touches the cluster) creates the Lease with its identity (run id, user,
host, pid) and renews it every RENEW_S; it deletes it at the end of the session, Ctrl-C included. A
holder that dies stops renewing, and after LEASE_S the next run takes the Lease over. A second run
finds the Lease held and stops at once with EXIT_LOCKED and the holder's identity, or waits for it
with --wait-lock SECONDS. Runs started by the holder itself (its environment carries HOLDER_ENV) share
its lock, so a test session can run the suites in child processes.
"""

from __future__ import annotations

import getpass
import os
import socket
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from harness.core.errors import ConfigError, HarnessError

LEASE_S = 90  # three times the seam's default retry budget: a renewal an outage delays does not lose the lock
RENEW_S = 10.0
POLL_S = 2.0
EXIT_LOCKED = 75  # EX_TEMPFAIL: try again later
HOLDER_ENV = "GPUPOC_RUN_LOCK_HOLDER"


class LockHeld(HarnessError):
    """Another run holds the cluster's run lock."""


def identity(run_id: str) -> str:
    return f"run {run_id} by {getpass.getuser()}@{socket.gethostname()} pid {os.getpid()}"


def expired(renewed: datetime | None, duration_s: int | None, now: datetime) -> bool:
    """Pure: a lease not renewed within its duration is free to take."""
    if renewed is None:
        return True
    return (now - renewed).total_seconds() > (duration_s or LEASE_S)


def describe(lease: client.V1Lease, now: datetime) -> str:
    """Pure: who holds the lock and since when, in words."""
    spec = lease.spec
    since = spec.acquire_time.strftime("%Y-%m-%d %H:%M:%S UTC") if spec.acquire_time else "an unknown time"
    renewed = f", renewed {(now - spec.renew_time).total_seconds():.0f}s ago" if spec.renew_time else ""
    return f"{spec.holder_identity or 'an unnamed holder'}, since {since}{renewed}"


def live_holder(api: client.ApiClient, namespace: str, name: str) -> str | None:
    """Who holds the run lock now (None when nobody does, or the holder stopped renewing)."""
    try:
        lease = client.CoordinationV1Api(api).read_namespaced_lease(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    now = _now()
    if lease.spec.holder_identity == os.environ.get(HOLDER_ENV) or expired(
            lease.spec.renew_time, lease.spec.lease_duration_seconds, now):
        return None
    return describe(lease, now)


def _now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class RunLock:
    api: client.ApiClient
    namespace: str
    name: str
    holder: str
    owned: bool = False
    lost: str = ""  # why this run no longer holds the lock it took (another run took it over)
    _stop: threading.Event | None = None
    _thread: threading.Thread | None = None

    @property
    def _coordination(self) -> client.CoordinationV1Api:
        return client.CoordinationV1Api(self.api)

    def acquire(self, wait_s: float = 0.0, say: object = None) -> None:
        """Take the lock, waiting up to `wait_s` for the holder; LockHeld naming the holder when it stays held."""
        deadline = time.monotonic() + wait_s
        announced = False
        while True:
            held_by = self._try_take()
            if held_by is None:
                return
            if time.monotonic() >= deadline:
                hint = (f"waited {wait_s:.0f}s; " if wait_s else "") + "wait for it with --wait-lock SECONDS"
                raise LockHeld(f"another gpupoc run holds this cluster (Lease {self.namespace}/{self.name}): "
                               f"{held_by}; {hint}, or stop that run")
            if not announced and callable(say):
                say(f"gpupoc: waiting up to {wait_s:.0f}s for the run lock, held by {held_by}")
                announced = True
            time.sleep(POLL_S)

    def _try_take(self) -> str | None:
        """None when this run now holds (or shares) the lock; else who holds it."""
        now = _now()
        try:
            lease = self._coordination.read_namespaced_lease(self.name, self.namespace)
        except ApiException as exc:
            if exc.status in (401, 403):
                raise ConfigError(f"the run lock needs get/create/update/delete on Leases in namespace "
                                  f"{self.namespace} ({exc.status} {exc.reason}): grant it, name another with "
                                  f"--run-lock NAMESPACE/NAME, or run without one: --run-lock off") from exc
            if exc.status != 404:
                raise
            lease = None
        if lease is not None:
            spec = lease.spec
            if spec.holder_identity and spec.holder_identity == os.environ.get(HOLDER_ENV):
                return None  # started by the holder: share its lock, leave renewing and releasing to it
            if not expired(spec.renew_time, spec.lease_duration_seconds, now):
                return describe(lease, now)
        body = client.V1Lease(
            metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace,
                                         resource_version=lease.metadata.resource_version if lease else None,
                                         labels={"app.kubernetes.io/managed-by": "gpupoc"}),
            spec=client.V1LeaseSpec(holder_identity=self.holder, acquire_time=now, renew_time=now,
                                    lease_duration_seconds=LEASE_S,
                                    lease_transitions=((lease.spec.lease_transitions or 0) + 1) if lease else 0))
        try:
            if lease is None:
                self._coordination.create_namespaced_lease(self.namespace, body)
            else:  # expired: take it over, unless another run did so first (409)
                self._coordination.replace_namespaced_lease(self.name, self.namespace, body)
        except ApiException as exc:
            if exc.status == 409:
                return "another run that took it at the same moment"
            raise
        self.owned = True
        os.environ[HOLDER_ENV] = self.holder  # child runs of this one share the lock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, args=(self._stop,), name="gpupoc-run-lock", daemon=True)
        self._thread.start()
        return None

    def _renew(self, stop: threading.Event) -> None:
        while not stop.wait(RENEW_S):
            try:
                lease = self._coordination.read_namespaced_lease(self.name, self.namespace)
                if lease.spec.holder_identity != self.holder:
                    self.lost = f"taken over by {lease.spec.holder_identity}"  # this run renewed too late
                    return
                lease.spec.renew_time = _now()
                self._coordination.replace_namespaced_lease(self.name, self.namespace, lease)
            except (ApiException, HarnessError, OSError):
                continue  # an outage: the next renewal tries again, the lease lasts LEASE_S

    def release(self) -> None:
        """Delete the Lease if this run holds it (checked, and guarded by its resourceVersion)."""
        if not self.owned:
            return
        if self._stop is not None:
            self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)  # a renewal in flight would make the delete's precondition fail
        self.owned = False
        os.environ.pop(HOLDER_ENV, None)
        try:
            lease = self._coordination.read_namespaced_lease(self.name, self.namespace)
            if lease.spec.holder_identity == self.holder:
                self._coordination.delete_namespaced_lease(
                    self.name, self.namespace,
                    body=client.V1DeleteOptions(preconditions=client.V1Preconditions(
                        resource_version=lease.metadata.resource_version)))
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise

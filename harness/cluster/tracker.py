"""One watch per resource kind per test: records timelines, and answers waits from what it saw.

A Tracker owns a background watch over one kind in one namespace (narrowed by a label
selector). It keeps the latest state of every object and the transitions into a Timeline;
`wait_until` evaluates a pure predicate over all objects whenever an event arrives, with a
timeout, an early-failure predicate and a message naming what was missing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from kubernetes import client

from harness.core import progress
from harness.cluster.apply import dynamic_client
from harness.core.errors import HarnessError, WaitTimeout
from harness.core.timeline import Timeline, Transition
from harness.cluster.wait import RELIST, SYNCED, ApiSource, Source, WaitFailed, events

Objects = dict[str, dict[str, Any]]
FOREVER_S = 7 * 24 * 3600.0
STOP_TIMEOUT_S = 10.0


def describe_phase(obj: dict[str, Any]) -> str:
    return str((obj.get("status") or {}).get("phase", "?"))


class Tracker:
    def __init__(self, api: client.ApiClient | None, api_version: str, kind: str, namespace: str | None = None,
                 label_selector: str | None = None, describe: Callable[[dict[str, Any]], str] = describe_phase,
                 server_time: Callable[[dict[str, Any]], datetime | None] = lambda _: None,
                 timeline: Timeline | None = None, source: Source | None = None) -> None:
        self.kind = kind
        self._source = source or ApiSource(dynamic_client(api).resources.get(api_version=api_version, kind=kind).get,
                                           raw=True)
        self._kwargs = {k: v for k, v in (("namespace", namespace), ("label_selector", label_selector)) if v}
        self._describe, self._server_time = describe, server_time
        self.timeline = timeline if timeline is not None else Timeline()
        self.objects: Objects = {}
        self.gone: Objects = {}  # the last state of each object deleted while watched
        self.synced = False
        self.last_event_at = 0.0  # when the last change arrived (epoch s, this host's clock)
        self.error: BaseException | None = None
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"tracker-{kind}", daemon=True)
        self._listeners: list[Callable[[str, dict[str, Any]], None]] = []

    def start(self) -> Tracker:
        self._thread.start()
        return self

    def stop(self, wait: bool = True) -> None:
        """Stop the watch; it ends at its next event or chunk (WATCH_CHUNK_S). `wait=False` does not wait for that
        (teardown stops every tracker at once instead of one chunk each)."""
        self._stop.set()
        if wait:
            self._thread.join(STOP_TIMEOUT_S)

    def on_event(self, listener: Callable[[str, dict[str, Any]], None]) -> None:
        """Call `listener(event_type, object)` for every event: for checks that must hold at every moment."""
        self._listeners.append(listener)

    def snapshot(self) -> Objects:
        """The objects as they are now, copied under the tracker's lock (a reader in another thread)."""
        with self._changed:
            return dict(self.objects)

    def poke(self) -> None:
        """Re-evaluate waits now: for predicates that also read another tracker's objects."""
        with self._changed:
            self._changed.notify_all()

    def _record(self, event: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        obj["metadata"].pop("managedFields", None)  # who applied which field: most of an object's size, never read
        if event == "DELETED":
            self.objects.pop(name, None)
            self.gone[name] = obj
        else:
            self.objects[name] = obj
        self.last_event_at = time.time()
        self.timeline.add(Transition(self.kind, name, "deleted" if event == "DELETED" else self._describe(obj),
                                     self.last_event_at, event, self._server_time(obj)))

    def _run(self) -> None:
        listed: set[str] | None = None  # the names a (re)list gave, until it is complete
        try:
            for event, obj in events(self._source, time.monotonic() + FOREVER_S, self._stop, **self._kwargs):
                recorded = None
                with self._changed:
                    if event == RELIST:  # the objects stay readable while the list refills them (a watch broke)
                        listed = set()
                    elif event == SYNCED:
                        for name in set(self.objects) - (listed or set()):  # gone while the watch was broken
                            self.gone[name] = self.objects.pop(name)
                        listed, self.synced = None, True
                    else:
                        recorded = obj.to_dict()
                        self._record(event, recorded)
                        if listed is not None:
                            listed.add(recorded["metadata"]["name"])
                    self._changed.notify_all()
                if recorded is not None and self._listeners:  # outside the lock: a listener may poke another
                    for listener in self._listeners:
                        listener(event, recorded)
                    with self._changed:  # a wait or hold whose predicate reads what a listener keeps
                        self._changed.notify_all()
        except BaseException as exc:  # surfaced to the waiter: the watch itself broke
            with self._changed:
                self.error = exc
                self._changed.notify_all()

    def hold(self, seconds: float, until: Callable[[], bool] = lambda: False, recheck_s: float | None = None) -> None:
        """Let events flow for `seconds` (listeners keep checking), failing only if the watch breaks; sooner once
        `until()` (nothing left to observe: the worst that can happen has happened), asked at each event and,
        for a condition that also depends on time, every `recheck_s`."""
        deadline = time.monotonic() + seconds
        where = self._kwargs.get("namespace", "all namespaces")
        waiting = progress.Waiting(f"observing {self.kind} in {where}", seconds)
        with self._changed:
            while (remaining := deadline - time.monotonic()) > 0 and not until():
                if self.error is not None:
                    raise HarnessError(f"the watch on {self.kind} broke: {self.error}") from self.error
                waiting.tick(lambda: self._tally(self.objects))
                self._changed.wait(min(remaining, recheck_s or remaining, waiting.until_next()))

    def wait_until(self, what: str, done: Callable[[Objects], bool], timeout_s: float,
                   failed: Callable[[Objects], str | None] = lambda _: None,
                   describe: Callable[[Objects], str] | None = None) -> Objects:
        """Block until `done(objects)`; WaitFailed when `failed` says why it never will; WaitTimeout after timeout."""
        summary = describe or (lambda objs: ", ".join(f"{n}={self._describe(o)}" for n, o in sorted(objs.items()))
                               or "no objects")
        deadline = time.monotonic() + timeout_s
        waiting = progress.Waiting(what, timeout_s)
        with self._changed:
            while True:
                if self.error is not None:
                    raise HarnessError(f"{what}: the watch on {self.kind} broke: {self.error}") from self.error
                if self.synced:
                    if done(self.objects):
                        return dict(self.objects)
                    reason = failed(self.objects)
                    if reason:
                        raise WaitFailed(f"{what}: {reason}; last: {summary(self.objects)}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise WaitTimeout(f"{what}: not done after {timeout_s:.0f}s; last: {summary(self.objects)}")
                waiting.tick(lambda: self._tally(self.objects) if describe is None else summary(self.objects))
                self._changed.wait(min(remaining, waiting.until_next()))

    def _tally(self, objects: Objects) -> str:
        return progress.tally([self._describe(o) for o in objects.values()], self.kind.lower())

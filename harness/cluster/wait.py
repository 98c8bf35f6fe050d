"""One wait loop that owns the watch; callers pass pure predicates over objects.

Every wait has a timeout, an early-failure predicate and a message naming the object and
the last state it saw. A watch that expires (410 Gone) or whose stream breaks is resumed from a
fresh list; retrying the list itself is the cluster seam's job (harness/cluster/seam.py). Works
with typed list functions (`CoreV1Api.list_namespaced_pod`) and with dynamic-client
resources (`dynamic.resources.get(...).get`).
"""

from __future__ import annotations

import functools
import threading
import time
import types
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar

import urllib3.exceptions
from kubernetes import watch
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.resource import Resource, ResourceField
from harness.core.errors import HarnessError, WaitTimeout

T = TypeVar("T")
# for what has no event to watch: Prometheus scrapes on its own schedule, a controller updates a status on its own
POLL_S = 1.0
Predicate = Callable[[Any], bool]
Describe = Callable[[Any], str]
HTTP_GONE = 410
WATCH_CHUNK_S = 5  # a stoppable watch re-checks its stop flag at least this often
RELIST = "RELIST"  # a (re)list begins: forget what was seen before
LISTED = "LISTED"  # an object of the list
SYNCED = "SYNCED"  # the list is complete; watch events follow


class WaitFailed(HarnessError):
    """The early-failure predicate fired: the object can no longer reach the wanted state."""


def never(_: Any) -> bool:
    return False


def _resource_version(obj: Any) -> str:
    meta = obj.metadata
    return str(getattr(meta, "resource_version", None) or meta.resourceVersion)


def _dynamic_resource(list_func: Callable[..., Any]) -> Resource | None:
    if isinstance(list_func, functools.partial) and list_func.args and isinstance(list_func.args[0], Resource):
        return list_func.args[0]
    return None


def as_field(value: Any) -> Any:
    """An object dict as the dynamic client returns it (attribute access at every level): what a Source that is
    not the API server (slurmrestd's jobs, a replay of recorded objects) hands the tracker."""
    if isinstance(value, dict):
        return ResourceField({k: as_field(v) for k, v in value.items()})
    if isinstance(value, list):
        return [as_field(v) for v in value]
    return value


class Source(Protocol):
    """What a wait needs of the cluster: a list, then a watch from its resourceVersion (the replay fake in
    tests/fixtures/replay.py implements it from recorded objects)."""

    def list(self, **selectors: Any) -> tuple[list[Any], str]:
        ...

    def watch(self, resource_version: str, timeout_s: int, **selectors: Any) -> Iterator[tuple[str, Any]]:
        ...


class Raw:
    """A watched object as the server sent it (a dict), not wrapped by the dynamic client: wrapping it and
    unwrapping it again (`to_dict`) was most of a tracker's CPU at thousands of events a minute."""

    __slots__ = ("raw",)

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw

    def to_dict(self) -> dict[str, Any]:
        return self.raw

    @property
    def metadata(self) -> Any:
        meta = self.raw.get("metadata") or {}
        return types.SimpleNamespace(name=meta.get("name"), resourceVersion=meta.get("resourceVersion"))


class ApiSource:
    """A typed list function (`CoreV1Api.list_namespaced_pod`) or a dynamic resource's `get`, as a Source; with
    `raw`, a dynamic resource's watch events come as `Raw` (for trackers, which keep dicts)."""

    def __init__(self, list_func: Callable[..., Any], raw: bool = False) -> None:
        self.list_func, self.resource = list_func, _dynamic_resource(list_func)
        self.raw = raw and self.resource is not None

    def list(self, **selectors: Any) -> tuple[list[Any], str]:
        listing = self.list_func(**selectors)
        return list(listing.items), _resource_version(listing)

    def watch(self, resource_version: str, timeout_s: int, **selectors: Any) -> Iterator[tuple[str, Any]]:
        watcher = watch.Watch()
        try:
            if self.raw:
                for event in watcher.stream(self.list_func, resource_version=resource_version, serialize=False,
                                            timeout_seconds=timeout_s, **selectors):
                    yield event["type"], Raw(event["raw_object"])
                return
            if self.resource is not None:
                stream = self.resource.client.watch(self.resource, resource_version=resource_version,
                                                    timeout=timeout_s, watcher=watcher, **selectors)
            else:
                stream = watcher.stream(self.list_func, resource_version=resource_version, timeout_seconds=timeout_s,
                                        **selectors)
            for event in stream:
                yield event["type"], event["object"]
        finally:
            watcher.stop()


def source_of(source: Source | Callable[..., Any]) -> Source:
    return source if hasattr(source, "watch") and hasattr(source, "list") else ApiSource(source)


def stream_broke(exc: BaseException) -> bool:
    """A watch stream ended by the transport (reset, read timeout) or a transient status: re-list."""
    if isinstance(exc, ApiException):
        return exc.status in (HTTP_GONE, 429, 500, 502, 503, 504)
    return isinstance(exc, (urllib3.exceptions.ProtocolError, urllib3.exceptions.TimeoutError, ConnectionError))


def events(list_func: Source | Callable[..., Any], deadline: float, stop: threading.Event | None = None,
           **list_kwargs: Any) -> Iterator[tuple[str, Any]]:
    """RELIST, (LISTED, obj) for each object, SYNCED, then watch events until the deadline (or `stop`)."""
    source = source_of(list_func)
    while True:
        items, version = source.list(**list_kwargs)
        yield RELIST, None
        for obj in items:
            yield LISTED, obj
        yield SYNCED, None
        try:
            while (remaining := deadline - time.monotonic()) > 0 and not (stop and stop.is_set()):
                chunk = max(1, int(min(remaining, WATCH_CHUNK_S) if stop else remaining))
                for kind, obj in source.watch(version, chunk, **list_kwargs):
                    version = _resource_version(obj)
                    yield kind, obj
                    if stop and stop.is_set():
                        return
            return
        except (ApiException, urllib3.exceptions.HTTPError, ConnectionError) as exc:
            if not stream_broke(exc):
                raise


def wait_for(list_func: Source | Callable[..., Any], what: str, done: Predicate, *, timeout_s: float,
             failed: Predicate = never, describe: Describe = repr, **list_kwargs: Any) -> Any:
    """Watch objects from `list_func(**list_kwargs)` until one satisfies `done`; return it.

    `what` names the object for messages ("Job ns/train"); narrow the list with
    field_selector/label_selector so the watch carries only the objects of interest.
    """
    last = "not seen yet"
    for kind, obj in events(list_func, time.monotonic() + timeout_s, **list_kwargs):
        if kind in (RELIST, SYNCED):
            continue
        if kind == "DELETED":
            last = f"deleted ({describe(obj)})"
            continue
        last = describe(obj)
        if done(obj):
            return obj
        if failed(obj):
            raise WaitFailed(f"{what}: failed; last: {last}")
    raise WaitTimeout(f"{what}: not done after {timeout_s:.0f}s; last: {last}")


def wait_gone(list_func: Source | Callable[..., Any], what: str, *, timeout_s: float,
              describe: Describe = repr, **list_kwargs: Any) -> None:
    """Watch until the list (narrowed by selectors) holds nothing: the objects were deleted."""
    present: dict[str, str] = {}
    for kind, obj in events(list_func, time.monotonic() + timeout_s, **list_kwargs):
        if kind == RELIST:
            present.clear()
        elif kind == "DELETED":
            present.pop(obj.metadata.name, None)
        elif kind != SYNCED:
            present[obj.metadata.name] = describe(obj)
        if not present and kind not in (RELIST, LISTED):
            return
    if present:
        raise WaitTimeout(f"{what}: still present after {timeout_s:.0f}s; last: {present}")


def wait_for_set(list_func: Source | Callable[..., Any], what: str, done: Callable[[dict[str, Any]], bool], *,
                 timeout_s: float, describe: Callable[[dict[str, Any]], str] = lambda s: str(sorted(s)),
                 **list_kwargs: Any) -> dict[str, Any]:
    """Watch a set of objects (by name) until `done(objects_by_name)`; return the set.

    For conditions over many objects at once: "all 4 pods of the gang are bound".
    """
    objects: dict[str, Any] = {}
    for kind, obj in events(list_func, time.monotonic() + timeout_s, **list_kwargs):
        if kind == RELIST:
            objects.clear()
            continue
        if kind == "DELETED":
            objects.pop(obj.metadata.name, None)
        elif kind != SYNCED:
            objects[obj.metadata.name] = obj
        if kind != LISTED and done(objects):
            return objects
    raise WaitTimeout(f"{what}: not done after {timeout_s:.0f}s; last: {describe(objects)}")


def poll(read: Callable[[], T], done: Callable[[T], bool], timeout_s: float, poll_s: float = POLL_S) -> T:
    """Read until `done(reading)` or the timeout; the last reading either way (the caller says what a miss means)."""
    deadline = time.monotonic() + timeout_s
    reading = read()
    while not done(reading) and time.monotonic() < deadline:
        time.sleep(poll_s)
        reading = read()
    return reading

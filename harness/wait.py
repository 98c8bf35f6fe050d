"""One wait loop that owns the watch; callers pass pure predicates over objects.

Every wait has a timeout, an early-failure predicate and a message naming the object and
the last state it saw. A watch that expires (410 Gone) is resumed from a fresh list.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from harness.errors import HarnessError, WaitTimeout

Predicate = Callable[[Any], bool]
Describe = Callable[[Any], str]
HTTP_GONE = 410


class WaitFailed(HarnessError):
    """The early-failure predicate fired: the object can no longer reach the wanted state."""


def never(_: Any) -> bool:
    return False


def wait_for(list_func: Callable[..., Any], what: str, done: Predicate, *, timeout_s: float,
             failed: Predicate = never, describe: Describe = repr, **list_kwargs: Any) -> Any:
    """Watch objects from `list_func(**list_kwargs)` until one satisfies `done`; return it.

    `what` names the object for messages ("Job ns/train"); narrow the list with
    field_selector/label_selector so the watch carries only the objects of interest.
    """
    deadline = time.monotonic() + timeout_s
    last = "not seen yet"
    while True:
        listing = list_func(**list_kwargs)
        for obj in listing.items:
            last = describe(obj)
            if done(obj):
                return obj
            if failed(obj):
                raise WaitFailed(f"{what}: failed; last: {last}")
        resource_version = listing.metadata.resource_version
        stream = watch.Watch()
        try:
            while (remaining := deadline - time.monotonic()) > 0:
                for event in stream.stream(list_func, resource_version=resource_version,
                                           timeout_seconds=max(1, int(remaining)), **list_kwargs):
                    obj = event["object"]
                    resource_version = obj.metadata.resource_version
                    if event["type"] == "DELETED":
                        last = f"deleted ({describe(obj)})"
                        continue
                    last = describe(obj)
                    if done(obj):
                        return obj
                    if failed(obj):
                        raise WaitFailed(f"{what}: failed; last: {last}")
        except ApiException as exc:
            if exc.status != HTTP_GONE:
                raise
            continue  # the watch expired: list again and resume
        finally:
            stream.stop()
        raise WaitTimeout(f"{what}: not done after {timeout_s:.0f}s; last: {last}")


def wait_gone(list_func: Callable[..., Any], what: str, *, timeout_s: float,
              describe: Describe = repr, **list_kwargs: Any) -> None:
    """Watch until the list (narrowed by selectors) is empty: the object was deleted."""
    deadline = time.monotonic() + timeout_s
    last = "present"
    while True:
        listing = list_func(**list_kwargs)
        if not listing.items:
            return
        last = describe(listing.items[0])
        stream = watch.Watch()
        try:
            for event in stream.stream(list_func, resource_version=listing.metadata.resource_version,
                                       timeout_seconds=max(1, int(deadline - time.monotonic())), **list_kwargs):
                if event["type"] == "DELETED":
                    return
                last = describe(event["object"])
        except ApiException as exc:
            if exc.status != HTTP_GONE:
                raise
        finally:
            stream.stop()
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"{what}: still present after {timeout_s:.0f}s; last: {last}")


def wait_for_set(list_func: Callable[..., Any], what: str, done: Callable[[dict[str, Any]], bool], *,
                 timeout_s: float, describe: Callable[[dict[str, Any]], str] = lambda s: str(sorted(s)),
                 **list_kwargs: Any) -> dict[str, Any]:
    """Watch a set of objects (by name) until `done(objects_by_name)`; return the set.

    For conditions over many objects at once: "all 4 pods of the gang are bound".
    """
    deadline = time.monotonic() + timeout_s
    while True:
        listing = list_func(**list_kwargs)
        objects = {o.metadata.name: o for o in listing.items}
        if done(objects):
            return objects
        stream = watch.Watch()
        try:
            for event in stream.stream(list_func, resource_version=listing.metadata.resource_version,
                                       timeout_seconds=max(1, int(deadline - time.monotonic())), **list_kwargs):
                obj = event["object"]
                if event["type"] == "DELETED":
                    objects.pop(obj.metadata.name, None)
                else:
                    objects[obj.metadata.name] = obj
                if done(objects):
                    return objects
        except ApiException as exc:
            if exc.status != HTTP_GONE:
                raise
        finally:
            stream.stop()
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"{what}: not done after {timeout_s:.0f}s; last: {describe(objects)}")

"""Runs that share one host share its CPUs fairly for what they measure: each case of the suites holds the host
shared while it runs, and a case marked `quiet` (what it measures is the host's CPU: the workload sample's step
times, the isolation boundary) waits for the running cases of every other run on the host to end, holds new ones
back, and runs alone. A turnstile keeps a waiting quiet case from being overtaken.

Off unless GPUPOC_HOST_LOCK names a lock file: `make poc` sets it for its side-by-side parts and its real-node part
(sim/poc.sh); a single run on a cluster needs none. A run given GPUPOC_QUIET_AFTER (make poc's real-node part) has
its quiet cases wait, up to QUIET_WAIT_S, while the file it names exists (make poc's four sims run: their controllers
load the host even between cases). The project's own tests use the same locks between their xdist workers
(tests/heavy.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.core import progress
from harness.run.headstart import backend_of

HOST_LOCK_ENV = "GPUPOC_HOST_LOCK"
QUIET_AFTER_ENV = "GPUPOC_QUIET_AFTER"
QUIET_MARK = "quiet"
QUIET_WAIT_S = 1800.0  # the longest a quiet case waits for the host's other load to end; then it runs, and says so
POLL_S = 2.0


@contextlib.contextmanager
def locked(path: Path, exclusive: bool = True) -> Iterator[None]:
    """A lock file held (exclusive, or shared) for the duration."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def sharing(host: Path, quiet: bool) -> Iterator[None]:
    """The host shared (every case), or all of it (`quiet`), through `host` and its turnstile beside it: a quiet
    case keeps the turnstile while it waits for the host, so no one overtakes it."""
    with contextlib.ExitStack() as held:
        with locked(host.with_name(host.name + ".turnstile")):
            held.enter_context(locked(host, exclusive=quiet))
        yield


@contextlib.contextmanager
def case_on_the_host(item: pytest.Item) -> Iterator[None]:
    """The host for one case of the suites, as GPUPOC_HOST_LOCK says (nothing when it is unset)."""
    named = os.environ.get(HOST_LOCK_ENV)
    if not named or item.get_closest_marker("skip") is not None:  # a case skipped before it runs measures nothing
        yield
        return
    quiet = is_quiet(item)
    if waits_for_quiet(item):
        wait_while_busy(Path(os.environ[QUIET_AFTER_ENV]), item.nodeid)
    with sharing(Path(named), quiet):
        yield


def waits_for_quiet(item: pytest.Item) -> bool:
    """A quiet case of a run given GPUPOC_QUIET_AFTER (and a host lock): it waits while that file exists."""
    return bool(os.environ.get(HOST_LOCK_ENV) and os.environ.get(QUIET_AFTER_ENV) and is_quiet(item))


def is_quiet(item: pytest.Item) -> bool:
    """Marked quiet, for every backend or (`quiet(backends=(...))`) for the item's."""
    mark = item.get_closest_marker(QUIET_MARK)
    only = mark.kwargs.get("backends") if mark is not None else None
    named = (only,) if isinstance(only, str) else tuple(only or ())
    return mark is not None and (not named or backend_of(item) in named)


def wait_while_busy(busy: Path, nodeid: str, timeout_s: float = QUIET_WAIT_S) -> None:
    """Until the marker of other load on the host is gone (a quiet case measures the host's CPU)."""
    if not busy.exists():
        return
    progress.say(f"gpupoc: {nodeid} waits for a quiet host ({busy.read_text().strip() or busy})")
    deadline = time.monotonic() + timeout_s
    while busy.exists() and time.monotonic() < deadline:
        time.sleep(POLL_S)
    if busy.exists():
        progress.say(f"gpupoc: {nodeid}: the host was still busy after {timeout_s:.0f}s ({busy}); measuring anyway, "
                     "its evidence shows the load")

"""Runs that share one host share its CPUs fairly for what they measure: each case of the suites holds the host
shared while it runs, and a case marked `quiet` (what it measures is the host's CPU: the workload sample's step
times, the isolation boundary) waits for the running cases of every other run on the host to end, holds new ones
back, and runs alone. A turnstile keeps a waiting quiet case from being overtaken.

Off unless GPUPOC_HOST_LOCK names a lock file: `make poc` sets it for its side-by-side parts and its real-node part
(sim/poc.sh); a single run on a cluster needs none. The project's own tests use the same locks between their
xdist workers (tests/heavy.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

HOST_LOCK_ENV = "GPUPOC_HOST_LOCK"
QUIET_MARK = "quiet"


@contextlib.contextmanager
def sharing(host: Path, quiet: bool) -> Iterator[None]:
    """The host shared (every case), or all of it (`quiet`), through `host` and its turnstile beside it."""
    turnstile_path = host.with_name(host.name + ".turnstile")
    with turnstile_path.open("a") as turnstile, host.open("a") as held:
        fcntl.flock(turnstile, fcntl.LOCK_EX)  # a quiet case keeps it while it waits: no one overtakes it
        try:
            fcntl.flock(held, fcntl.LOCK_EX if quiet else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)


@contextlib.contextmanager
def case_on_the_host(item: pytest.Item) -> Iterator[None]:
    """The host for one case of the suites, as GPUPOC_HOST_LOCK says (nothing when it is unset)."""
    named = os.environ.get(HOST_LOCK_ENV)
    if not named:
        yield
        return
    with sharing(Path(named), item.get_closest_marker(QUIET_MARK) is not None):
        yield

"""The few tests whose measurements the other xdist worker's load moves past a threshold (the scale smoke run, the
training scenarios' fairness) and the one that loads the host most (the real nodes' own sim) never overlap: each
holds one lock file while it runs. Measured: with the real-node sim beside it, Volcano's admission p95 at smoke
size went from under 60 s to 75-80 s."""

from __future__ import annotations

import contextlib
import fcntl
import tempfile
from collections.abc import Iterator
from pathlib import Path

LOCK = Path(tempfile.gettempdir()) / "gpupoc-make-test-heavy.lock"


@contextlib.contextmanager
def alone() -> Iterator[None]:
    with LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)

"""Host load between the xdist workers of `make test`: what one test measures must not move past a threshold
because another worker's test loads the same 2 cores.

- `alone()`: the few heavy tests (the training scenarios, the real nodes' cases, the scale smoke run) never overlap
  each other: one lock file. Measured: with the real-node sim's cases beside it, Volcano's admission p95 at smoke
  size went from under 60 s to 75-80 s, and beside the real nodes' bring-up to 92 s at 4.5 jobs/s (CI, 2026-12-06).
- `quiet` (a pytest mark): the test runs with the other workers idle. Every test holds a shared lock while it runs
  (`sharing_the_host`, from tests/conftest.py); a quiet test waits for the other workers' running tests to end, holds
  its next one back, and runs alone on the host; a quiet test right after it keeps the host (tests/conftest.py). A
  turnstile keeps a waiting quiet test from being overtaken. Used where a quiet host is what the measurement assumes:
  the workload sample pinned to its own core (host processes are not pinned: under the other worker's load its 7 ms
  steps' CoV went from 0.06-0.09 to 0.83); its CPU-isolation-off sensitivity shares its core anyway, so it is not
  quiet. Waiting for the other worker's running test costs up to its length (the scale smoke run's set-up waited 89
  s), so the scale smoke run is no longer quiet: its thresholds have room for the load instead. The other workers'
  sims stay up, idle, and an idle sim still loads the host (Karpenter at 23 % of a core, each API server at 13 %: the
  sample's step p50 went from 4-6 ms to 62-66 ms, 2026-12-06), so a quiet test also has every sim's processes held on
  the CPU the real nodes reserve (harness/sim/hostcpus.py), off the core the sample is pinned to.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from harness.run import hostshare
from harness.sim import hostcpus

LOCK = Path(tempfile.gettempdir()) / "gpupoc-make-test-heavy.lock"
HOST = Path(tempfile.gettempdir()) / "gpupoc-make-test-host.lock"


@contextlib.contextmanager
def alone() -> Iterator[None]:
    with hostshare.locked(LOCK):
        yield


@contextlib.contextmanager
def sharing_the_host(quiet: bool) -> Iterator[None]:
    """Shared use of the host for a test (every test), or all of it (`quiet`): harness/run/hostshare.py's locks."""
    with hostshare.sharing(HOST, quiet), (hostcpus.sims_on_reserved_cpus() if quiet else contextlib.nullcontext()):
        yield

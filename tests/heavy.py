"""Host load between the xdist workers of `make test`: what one test measures must not move past a threshold
because another worker's test loads the same 2 cores.

- `alone()`: the few heavy tests (the training scenarios, the real nodes' cases, the scale smoke run) never overlap
  each other: one lock file. Measured: with the real-node sim's cases beside it, Volcano's admission p95 at smoke
  size went from under 60 s to 75-80 s, and beside the real nodes' bring-up to 92 s at 4.5 jobs/s (CI, 2026-12-06).
- `apart_for_inotify()`: kind's bring-up and the multi-cluster worker sims never overlap (the host's inotify
  instances).
- `on_a_cpu_of_its_own`: the test's pod has a real node's CPU to itself. While it runs, every other host process
  (the other workers' tests and sims; not the test's own, nor its real-node sim's) is held on the CPU the real nodes
  reserve
  (harness/sim/hostcpus.py), off the core the static CPU manager gives the workload sample: host processes are not
  pinned otherwise, and under the other workers' load the sample's 7 ms steps' CoV went from 0.06-0.09 to 0.83, and
  two idle sims moved its step p50 from 4-6 ms to 62-66 ms (2026-12-06). The other workers go on, on one CPU,
  instead of waiting: the quiet window used to stop them, which cost make test 183-220 s of their time
  (2026-12-06). Its CPU-isolation-off sensitivity shares its core anyway, so it is not quiet.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from harness.run import hostshare
from harness.sim import hostcpus

LOCK = Path(tempfile.gettempdir()) / "gpupoc-make-test-heavy.lock"
INOTIFY = Path(tempfile.gettempdir()) / "gpupoc-make-test-inotify.lock"
QUIET = Path(tempfile.gettempdir()) / "gpupoc-make-test-quiet.lock"


@contextlib.contextmanager
def alone() -> Iterator[None]:
    with hostshare.locked(LOCK):
        yield


@contextlib.contextmanager
def apart_for_inotify() -> Iterator[None]:
    """kind's nodes (systemd, containerd and a kubelet in each) and the multi-cluster worker sims take many of root's
    128 inotify instances (fs.inotify.max_user_instances; a sim with every scheduler takes 16) beside the workers' own
    sims: together, a worker sim's Kueue stopped with "couldn't initialize inotify: too many open files" (mt41,
    2026-12-08). One of them at a time; the host's limit is left as it is."""
    with hostshare.locked(INOTIFY):
        yield


@contextlib.contextmanager
def on_a_cpu_of_its_own(sim_home: str) -> Iterator[None]:
    """A quiet test's span: one quiet test at a time, every host process on the reserved CPU but the test's own and
    its sim's (whose home is `sim_home`)."""
    with hostshare.locked(QUIET), hostcpus.host_on_reserved_cpus(spared=sim_home):
        yield

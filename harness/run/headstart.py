"""Head starts: a case whose observation must last minutes (Slurm's fairness: four ranking periods) starts it when
the session starts, in a thread beside the cases before it, and judges it when its own turn comes. Its test module
marks it `@pytest.mark.head_start(observe, wanted)`: `wanted(backend, target)` says whether this backend's
case needs one, `observe(jobs, backend, profile)` runs in the thread on the job system the case's `workloads`
fixture will hand it, and the case takes what it returned from its `head_start` fixture.

The other cases of that backend run after every other case and after it (its teardown ends what the observation
left queued), and wait for the observation to end before they submit anything: they would share its cluster.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from harness.core import progress
from harness.backends import Backend
from harness.core.errors import HarnessError
from harness.jobs.system import JobSystem
from harness.config.profile import Profile
from harness.targets.target import Features

MARKER = "head_start"
MAX_S = 900.0  # a head start's own waits are bounded; waiting for one gives up after this much more than a case's

Observe = Callable[[JobSystem, Backend, Profile], Any]
Wanted = Callable[[Backend, Features], bool]


@dataclass
class HeadStart:
    nodeid: str
    backend: str
    jobs: JobSystem
    started: float = field(default_factory=time.time)
    _result: Any = None
    _error: BaseException | None = None
    _done: threading.Event = field(default_factory=threading.Event)

    def run(self, observe: Observe, backend: Backend, profile: Profile) -> HeadStart:
        def observing() -> None:
            progress.quiet_in_this_thread()
            try:
                self._result = observe(self.jobs, backend, profile)
            except BaseException as exc:  # the case raises it when its turn comes
                self._error = exc
            finally:
                self._done.set()
        threading.Thread(target=observing, name=f"head start {self.nodeid}", daemon=True).start()
        return self

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def outcome(self, timeout_s: float) -> Any:
        """What `observe` returned (its exception raised here), once it has ended."""
        self.wait(timeout_s, "the observation it began at the session's start")
        if self._error is not None:
            raise self._error
        return self._result

    def wait(self, timeout_s: float, what: str) -> None:
        """Until the observation has ended (`what` it is, for the progress lines)."""
        waiting = progress.Waiting(what, timeout_s)
        deadline = time.monotonic() + timeout_s
        while not self._done.wait(min(max(0.0, deadline - time.monotonic()), waiting.until_next())):
            if time.monotonic() >= deadline:
                raise HarnessError(f"the head start of {self.nodeid} did not end within {timeout_s:.0f}s "
                                   f"(started {time.time() - self.started:.0f}s ago)")
            waiting.tick(lambda: f"running for {time.time() - self.started:.0f}s")


def marked(item: pytest.Item) -> tuple[Observe, Wanted] | None:
    found = item.get_closest_marker(MARKER)
    return (found.args[0], found.args[1]) if found is not None else None


def backend_of(item: pytest.Item) -> str | None:
    params = getattr(item, "callspec", None)
    return str(params.params["backend"]) if params is not None and "backend" in params.params else None


def wanted_here(item: pytest.Item, backends: dict[str, Backend], target: Features) -> bool:
    """The item is marked and its backend's case needs the head start on this target."""
    mark, name = marked(item), backend_of(item)
    return mark is not None and name in backends and mark[1](backends[name], target)


def skipped(item: pytest.Item) -> bool:
    return item.get_closest_marker("skip") is not None or any(
        m.args and m.args[0] is True for m in item.iter_markers("skipif"))


def late_backends(items: list[pytest.Item], backends: dict[str, Backend], target: Features) -> set[str]:
    """Backends whose cases go after the others': one of their cases has a head start, and other backends' cases
    (not only those that run last, like the audit) run beside it."""
    names = {backend_of(i) for i in items if wanted_here(i, backends, target) and not skipped(i)} - {None}
    beside = [i for i in items if backend_of(i) not in names and i.get_closest_marker("gpupoc_last") is None]
    return {str(n) for n in names} if beside else set()


def order(item: pytest.Item, late: set[str], backends: dict[str, Backend], target: Features) -> tuple[bool, ...]:
    """Sort key: the cases that run last (the audit); before them the late backends' cases, the one with the head
    start first of those."""
    backend = backend_of(item)
    return (item.get_closest_marker("gpupoc_last") is not None, backend in late,
            not (backend in late and wanted_here(item, backends, target)))

"""Watching the environment while a criterion runs, so that a fault of the environment reads as ERROR, never FAIL.

The cluster seam and the Prometheus client see outages of what they call. What they do not call can
break too: a scheduler controller killed mid-test makes admissions stop, and the criterion would read
that as the scheduler failing it. `EnvironmentWatch` samples the health of the environment's parts
(on the sim: each process, running and not frozen) in a thread, keeps the intervals each part was
down, and the plugin turns a FAIL whose test saw a part down into an ERROR naming it. A test that
disrupts a part on purpose (the control-plane recovery criterion restarts the scheduler) declares it
with `expect(part)`, and that part is not held against it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

SAMPLE_S = 0.5


@dataclass(frozen=True)
class Part:
    """One part of the environment and how to ask it: None when it is fine, else what is wrong."""

    name: str
    problem: Callable[[], str | None]


@dataclass
class Down:
    part: str
    problem: str
    started: float
    ended: float | None = None  # None while still down
    injected: bool = False      # a fault injected on purpose (the sim's log), not one that was sampled

    def describe(self, now: float) -> str:
        until = "still down at the end of the test" if self.ended is None else \
            f"for {self.ended - self.started:.1f}s"
        return f"{self.part}: {self.problem} {until}"


def faults_between(downs: list[Down], start: float, end: float, expected: set[str]) -> list[Down]:
    """Pure: the intervals of parts down that overlap [start, end], except parts a test disrupted on purpose."""
    return [d for d in downs if d.part not in expected and d.started <= end and (d.ended is None or d.ended >= start)]


def without_sampled_twice(sampled: list[Down], logged: list[Down]) -> list[Down]:
    """Pure: the logged downs, and the sampled ones not already covered by a logged down of the same part."""
    def covered(d: Down) -> bool:
        return any(l.part == d.part and l.started <= (d.ended or float("inf")) and
                   (l.ended is None or l.ended >= d.started) for l in logged)
    return logged + [d for d in sampled if not covered(d)]


@dataclass
class EnvironmentWatch:
    """Samples `parts`; `logged` (optional) gives the faults the environment itself logged (the sim's
    `gpupoc sim stop|freeze`), exact even when shorter than a sample."""

    parts: list[Part]
    logged: Callable[[], list[Down]] | None = None
    sample_s: float = SAMPLE_S
    downs: list[Down] = field(default_factory=list)
    _open: dict[str, Down] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> "EnvironmentWatch":
        if self.parts and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="gpupoc-environment", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def sample(self) -> None:
        now = time.time()
        for part in self.parts:
            problem = part.problem()
            with self._lock:
                current = self._open.get(part.name)
                if problem and current is None:
                    self._open[part.name] = Down(part.name, problem, now)
                    self.downs.append(self._open[part.name])
                elif not problem and current is not None:
                    current.ended = now
                    del self._open[part.name]

    def _run(self) -> None:
        while not self._stop.wait(self.sample_s):
            self.sample()

    def faults(self, start: float, end: float, expected: set[str]) -> list[Down]:
        """What was down during [start, end] (wall clock); sampled once more first."""
        self.sample()
        with self._lock:
            downs = without_sampled_twice(list(self.downs), self.logged() if self.logged else [])
        return faults_between(downs, start, end, expected)


def judged(downs: list[Down], own: set[str], schedulers: set[str]) -> tuple[list[Down], list[Down]]:
    """Pure: (environment faults, the backend's own crashes) among what was down during a test of a backend.

    `own`: the parts of the backend under test; `schedulers`: the parts of every backend. Infrastructure (the
    rest: control plane, kwok, Prometheus) down is an environment fault; another backend's parts are irrelevant;
    the backend's own parts are an environment fault when the fault was injected, and otherwise the scheduler
    itself crashing: evidence against it, not an excuse."""
    faults: list[Down] = []
    crashes: list[Down] = []
    for d in downs:
        if d.part in own:
            (faults if d.injected else crashes).append(d)
        elif d.part not in schedulers:
            faults.append(d)
    return faults, crashes

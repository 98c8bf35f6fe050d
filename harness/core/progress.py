"""Progress a person can follow: each case as it starts, and what a long wait is waiting for and what it last saw,
every EVERY_S while it lasts ("  … gang of train-a-1 admitted: 4 pods: 4 Pending (20s of 300s)"). Off (quiet,
for CI) with --progress off or GPUPOC_PROGRESS=off; the lines go to the terminal, never into the record.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable

EVERY_S = 10.0
LINE_LIMIT = 200
_say: Callable[[str], None] | None = None
_thread = threading.local()


def enable(say: Callable[[str], None] | None) -> None:
    global _say
    _say = say


def quiet_in_this_thread() -> None:
    """This thread's waits say nothing (a case's head start, running beside the cases whose lines these are)."""
    _thread.quiet = True


def _saying() -> bool:
    return _say is not None and not getattr(_thread, "quiet", False)


def say(line: str) -> None:
    if _say is not None:
        _say(line)


def case_started(criterion: str, backend: str, nodeid: str) -> None:
    say(f"▶ {criterion} [{backend}]  ({nodeid})")


def tally(states: list[str], noun: str = "object") -> str:
    """Pure: "4 pods: 3 Pending, 1 Running" (a few named states as they are)."""
    if not states:
        return f"no {noun}s yet"
    counts = Counter(states)
    return f"{len(states)} {noun}{'s' if len(states) != 1 else ''}: " + ", ".join(
        f"{n} {state}" for state, n in counts.most_common())


class Waiting:
    """One wait's progress: `tick(last)` says what it waits for and what it last saw, at most every EVERY_S."""

    def __init__(self, what: str, timeout_s: float) -> None:
        self.what, self.timeout_s = what, timeout_s
        self.started = time.monotonic()
        self.next_at = self.started + EVERY_S

    def until_next(self) -> float:
        return max(0.05, self.next_at - time.monotonic()) if _saying() else float("inf")

    def tick(self, last: Callable[[], str]) -> None:
        now = time.monotonic()
        if not _saying() or now < self.next_at:
            return
        self.next_at = now + EVERY_S
        line = f"  … {self.what}: {last()} ({now - self.started:.0f}s of {self.timeout_s:.0f}s)"
        say(line if len(line) <= LINE_LIMIT else line[:LINE_LIMIT - 1] + "…")

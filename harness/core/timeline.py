"""Timelines: every transition of every tracked object, as the harness saw it and as the server stamped it.

Pure data and pure functions; the raw material of every measurement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class Transition:
    kind: str
    name: str
    state: str                          # what `describe` said of the object at this event
    seen_at: float                      # epoch seconds when the harness received the event
    event: str = "MODIFIED"             # LISTED, ADDED, MODIFIED, DELETED
    server_time: datetime | None = None  # the server's own timestamp for this state, where it has one


@dataclass
class Timeline:
    transitions: list[Transition] = field(default_factory=list)

    def add(self, transition: Transition) -> None:
        """Record a transition when the object's state changed (repeated states are not transitions)."""
        last = self.last(transition.kind, transition.name)
        if last is None or last.state != transition.state or transition.event == "DELETED":
            self.transitions.append(transition)

    def of(self, kind: str, name: str) -> list[Transition]:
        return [t for t in self.transitions if t.kind == kind and t.name == name]

    def last(self, kind: str, name: str) -> Transition | None:
        found = self.of(kind, name)
        return found[-1] if found else None

    def first(self, kind: str, name: str, state: str) -> Transition | None:
        return next((t for t in self.of(kind, name) if t.state == state), None)

    def as_rows(self) -> list[dict[str, object]]:
        return [{"kind": t.kind, "name": t.name, "state": t.state, "event": t.event, "seen_at": t.seen_at,
                 "server_time": t.server_time.isoformat() if t.server_time else None} for t in self.transitions]


def seconds_between(start: Transition | None, end: Transition | None, prefer_server: bool = True) -> float | None:
    """Duration from one transition to another: server timestamps when both have them, else harness times."""
    if start is None or end is None:
        return None
    if prefer_server and start.server_time and end.server_time:
        return (end.server_time - start.server_time).total_seconds()
    return end.seen_at - start.seen_at


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]; the same definition everywhere in gpupoc."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def pods_over_time(rows: list[dict[str, object]]) -> dict[str, list[tuple[float, float]]]:
    """Pods bound or running, and running, over time, from the Pod rows of a timeline (with "t" seconds)."""
    current: dict[str, str] = {}
    series: dict[str, list[tuple[float, float]]] = {"bound or running": [], "running": []}
    for row in sorted((r for r in rows if r.get("kind") == "Pod"), key=lambda r: float(str(r.get("t", 0)))):
        current[str(row["name"])] = str(row["state"])
        t = float(str(row.get("t", 0)))
        series["bound or running"].append((t, sum(1 for s in current.values() if s in ("bound", "running"))))
        series["running"].append((t, sum(1 for s in current.values() if s == "running")))
    return series if series["running"] else {}


MEMBER_KIND = "Pod"  # the timeline's kind of member transitions (a Pod; a node allocation of a Slurm job)


def running_intervals(timeline: Timeline, now: float) -> list[tuple[str, float, float]]:
    """(pod, running since, running until) from the pod transitions; still running ends at `now`. A member back to
    pending after running (a Slurm job requeued) stopped holding its GPUs then."""
    return state_intervals(timeline, MEMBER_KIND, ("running",), now, ends=("pending", "succeeded", "failed", "deleted"))


def state_intervals(timeline: Timeline, kind: str, states: tuple[str, ...], now: float,
                    ends: tuple[str, ...] | None = None) -> list[tuple[str, float, float]]:
    """(object, since, until) of each stretch an object of `kind` spent in `states`, from its transitions: it ends at
    a state in `ends` (None: any other state) or the object's deletion; one not ended ends at `now`."""
    result = []
    for name in sorted({t.name for t in timeline.transitions if t.kind == kind}):
        start = None
        for t in timeline.of(kind, name):
            gone = t.event == "DELETED" or (t.state in ends if ends is not None else t.state not in states)
            if t.state in states and not gone and start is None:
                start = t.seen_at
            elif gone and start is not None:
                result.append((name, start, t.seen_at))
                start = None
        if start is not None:
            result.append((name, start, now))
    return result

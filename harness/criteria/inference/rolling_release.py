"""Inference 3a — rolling release: a steady probe through the Service during a rollout; success rate per second
and overall, and the ready endpoints never below desired - maxUnavailable."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Protocol

from harness.criteria import AT_LEAST, AT_MOST, Chart, Criterion, Threshold, register

CRITERION = register(Criterion(
    "inference.rolling_release",
    "During a rolling update, a steady probe through the Service succeeds at least the threshold rate overall, and "
    "the ready endpoints never drop below desired - maxUnavailable.",
    (Threshold("min_success_rate", "share of probe requests answered 2xx during the rollout", AT_LEAST),
     Threshold("max_seconds_below_floor", "seconds with fewer ready endpoints than desired - maxUnavailable",
               AT_MOST, " s")),
    (Chart("availability", "probe success per second during the rollout", "share"),)))


class Answer(Protocol):
    """A probe's answer (harness.traffic.Sample): when it was sent, and whether it succeeded."""

    @property
    def t(self) -> float: ...

    @property
    def ok(self) -> bool: ...


def success_rate(samples: Sequence[Answer]) -> float | None:
    return sum(1 for s in samples if s.ok) / len(samples) if samples else None


def per_second(samples: Sequence[Answer], start: float) -> list[tuple[float, float]]:
    """(second since `start`, success share in it): the availability chart."""
    buckets: dict[int, list[bool]] = defaultdict(list)
    for sample in samples:
        buckets[int(sample.t - start)].append(sample.ok)
    return [(float(second), sum(oks) / len(oks)) for second, oks in sorted(buckets.items())]


def seconds_below(points: Sequence[tuple[float, int]], floor: int, end: float) -> float:
    """Time spent with fewer ready endpoints than `floor`, from (time, ready endpoints) changes in order."""
    below = 0.0
    for (t, ready), (t_next, _) in zip(points, [*points[1:], (end, 0)]):
        if ready < floor:
            below += max(0.0, t_next - t)
    return below


def below_note(points: Sequence[tuple[float, int]], floor: int, start: float) -> str:
    """Where the ready endpoints went below `floor`, in seconds since `start` (the rollout), for the record."""
    dips = [f"{ready} at {t - start:+.2f} s" for t, ready in points if ready < floor]
    return f"; below the floor: {', '.join(dips[:6])}{' ...' if len(dips) > 6 else ''}" if dips else ""

"""Batch training — packing: a burst of gangs of mixed sizes, more than the cluster holds, submitted at once. While
work waits, the GPUs are kept busy (occupancy); no gang holds part of its pods bound for long (a partial gang keeps
GPUs no one can use); the largest gang is not starved by smaller ones passing it. knavigator's gang-scheduling
benchmark is the model: it separates the packing policies (bin-packing against spreading, strict order against
backfill) that choosing a scheduler decides."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.core import estimate as est
from harness.criteria import AT_LEAST, AT_MOST, Chart, Criterion, Threshold, register

CRITERION = register(Criterion(
    "training.packing",
    "Under a burst of gangs of 1 pod to the whole cluster, more than it holds, the GPUs stay busy while work waits, no "
    "gang holds part of its pods bound, and the largest gang is not starved by smaller ones passing it.",
    (Threshold("min_occupancy", "share of the cluster's GPUs held by running pods while work waited", AT_LEAST, ""),
     Threshold("max_partial_held_s", "the longest a gang held some but not all of its pods bound", AT_MOST, " s"),
     Threshold("largest_gang_starved_s", "seconds the largest gang still waited after a gang submitted after it "
               "started", AT_MOST, " s")),
    (Chart("pods", "pods over time", "pods"),)))


@dataclass
class Gang:
    """One gang of the burst, as its pods' events show it."""

    size: int
    submitted_at: float
    bound: set[str] = field(default_factory=set)
    started_at: float | None = None  # every pod bound (first time)
    partial_since: float | None = None
    max_partial_s: float = 0.0

    def observe(self, event: str, pod: dict[str, Any], seen_at: float) -> None:
        name = pod["metadata"]["name"]
        if event != "DELETED" and (pod.get("spec") or {}).get("nodeName"):
            self.bound.add(name)
        else:
            self.bound.discard(name)
        if self.started_at is not None:
            return
        if len(self.bound) >= self.size:
            self.started_at = seen_at
            self._end_partial(seen_at)
        elif self.bound:
            self.partial_since = self.partial_since if self.partial_since is not None else seen_at
        else:
            self._end_partial(seen_at)

    def _end_partial(self, now: float) -> None:
        if self.partial_since is not None:
            self.max_partial_s = max(self.max_partial_s, now - self.partial_since)
            self.partial_since = None

    def partial_s(self, now: float) -> float:
        """The longest partial hold, one still going counted to `now`."""
        going = now - self.partial_since if self.partial_since is not None and self.started_at is None else 0.0
        return max(self.max_partial_s, going)


def starved_s(gangs: dict[str, Gang], largest: str, now: float) -> float:
    """Pure: from the first start of a gang submitted after `largest` (while it waited) to its own start (`now` if it
    has not started): 0 where none passed it."""
    big = gangs[largest]
    until = big.started_at if big.started_at is not None else now
    passed = [g.started_at for name, g in gangs.items() if name != largest and g.submitted_at > big.submitted_at
              and g.started_at is not None and g.started_at < until]
    return max(0.0, until - min(passed)) if passed else 0.0


def occupancy(held: list[tuple[float, float, int]], capacity: int, start: float, end: float,
              lag_s: float) -> est.Estimate:
    """Pure: GPU-seconds of `held` (start, end, GPUs) inside [start, end] over the capacity's; each start and end
    seen up to `lag_s` late, the window's ends too."""
    window = max(end - start, 1e-9)
    used = sum(max(0.0, min(e, end) - max(s, start)) * gpus for s, e, gpus in held)
    spread = est.quadrature([gpus * lag_s for _, _, gpus in held], ends=2)
    numerator = est.Estimate(used, max(0.0, used - spread), used + spread, kind="quotient")
    denominator = est.Estimate(window * capacity, max(1e-9, (window - lag_s) * capacity), (window + lag_s) * capacity)
    return est.quotient(numerator, denominator, f"GPU-seconds held over the window's, each pod's start and end and "
                        f"the window's seen up to {lag_s:.3g} s late")


def burst(nodes: int, per_node: int) -> list[tuple[int, int]]:
    """Pure: the burst, in submission order, as (pods, GPUs per pod): single-GPU jobs and half-node pairs, then the
    largest gang (a pod of one GPU on every GPU of the cluster), then as many small jobs again, a gang of every node
    whole and quarter-node gangs: four times the cluster's GPUs. Whole-node pods after single-GPU ones tell
    bin-packing from spreading; the largest gang in the middle tells strict order from backfill."""
    half, quarter = max(1, per_node // 2), max(1, per_node // 4)
    small = [(1, 1)] * per_node + [(2, half)] * 2
    return [*small, (nodes * per_node, 1), *small, (nodes, per_node), *[(4, quarter)] * 2]

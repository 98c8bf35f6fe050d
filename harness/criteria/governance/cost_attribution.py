"""Governance 6 — cost attribution: GPU-hours per tenant and per queue over the whole run, from the API
timelines the harness watched (every job of every suite), from kube-state-metrics in Prometheus, and from
each scheduler's per-queue usage metric; the three must agree within the threshold."""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass

from harness.core.estimate import Estimate
from harness.criteria import AT_MOST, Chart, Criterion, Threshold, register

CRITERION = register(Criterion(
    "governance.cost_attribution",
    "GPU-hours per tenant over the run's jobs (every suite) from the API timelines, from kube-state-metrics in "
    "Prometheus and, per queue, from the scheduler's usage metric agree within the threshold.",
    (Threshold("max_tenant_disagreement", "largest |kube-state-metrics - API| / API of a tenant's GPU-hours, "
               "beyond what the scrape interval can explain", AT_MOST),
     Threshold("max_queue_disagreement", "largest |scheduler metric - API| / API of a queue's GPU-hours, beyond "
               "what the scrape interval can explain", AT_MOST)),
    (Chart("gpus", "GPUs held per tenant over the run (API timelines)", "GPUs"),)))


@dataclass(frozen=True)
class Held:
    """A pod of the run holding GPUs from `start` to `end` (harness clock, from watch events)."""

    namespace: str
    pod: str
    backend: str
    queue: str  # the queue the scheduler charged its job to (Backend.charged_queue; '' none)
    gpus: int
    start: float
    end: float
    node: str = ""  # the node it ran on ('' unknown: Slurm's members): its GPU model, for the hours per model

    @property
    def gpu_seconds(self) -> float:
        return self.gpus * max(0.0, self.end - self.start)


def charged_queues(own: dict[str, str], tenant_of: dict[str, str], held: list[Held]) -> dict[str, str]:
    """Pure: queue -> tenant, each tenant's `own` queue first, then every other queue a pod in `held` was charged to
    (a tenant's queue of one GPU model, a queue tenants share) with the tenants (`tenant_of` namespace) it held."""
    queues = dict(own)
    for h in held:
        if h.queue and h.queue not in queues:
            queues[h.queue] = ", ".join(sorted({tenant_of.get(x.namespace, x.namespace) for x in held
                                                if x.queue == h.queue}))
    return queues


def summed_hours(held: list[Held], key_of: Callable[[Held], str | None]) -> dict[str, float]:
    """Pure: GPU-hours summed by `key_of` each pod (None: left out)."""
    totals: dict[str, float] = {}
    for h in held:
        if (key := key_of(h)) is not None:
            totals[key] = totals.get(key, 0.0) + h.gpu_seconds / 3600
    return totals


def gpu_hours_by(held: list[Held], key: dict[str, str]) -> dict[str, float]:
    """GPU-hours summed by `key[namespace]` (namespaces not in `key` are left out)."""
    return summed_hours(held, lambda h: key.get(h.namespace))


UNKNOWN_MODEL = "model unknown"


def gpu_hours_by_model(held: list[Held], model_of_node: dict[str, str]) -> dict[str, float]:
    """Pure: GPU-hours by the GPU model of the node each pod ran on (node -> model, as the inventory reads them); a
    node the inventory no longer has (removed, or none known) counts under UNKNOWN_MODEL."""
    return dict(sorted(summed_hours(held, lambda h: model_of_node.get(h.node, UNKNOWN_MODEL)).items()))


@dataclass(frozen=True)
class PodSeries:
    """What kube-state-metrics said of one pod over the window (newest values; None: never reported)."""

    gpus: float
    start: float | None          # kube_pod_container_state_started (else kube_pod_start_time)
    completed: float | None      # kube_pod_completion_time
    last_running: float | None   # the last scrape that saw it Running
    # (not kube_pod_deletion_timestamp: a graceful deletion sets it to the request time plus the grace period)


def pod_gpu_seconds(pod: PodSeries, window: tuple[float, float], scrape_s: float) -> tuple[float, float]:
    """Pure: (GPU-seconds of a pod inside the window, the width of the range they lie in). From its container's
    start to its completion where kube-state-metrics reported one (exact); else it ended between the last scrape
    that saw it Running and the next scrape: counted to the middle of that scrape interval, off by up to half of it
    either way (counted to the last scrape, every such pod would be short by half a scrape on average, and a sum
    of many would be biased beyond its resolution)."""
    if pod.start is None or pod.last_running is None:
        return 0.0, 0.0  # never started, or never seen running
    ends = [pod.completed] if pod.completed is not None else []
    end = min(ends) if ends else pod.last_running + scrape_s / 2
    lo, hi = max(pod.start, window[0]), min(max(end, pod.start), window[1])
    if hi <= lo:
        return 0.0, 0.0
    return pod.gpus * (hi - lo), (0.0 if ends else pod.gpus * scrape_s)


def unseen_resolution(held: list[Held], seen: set[str], scrape_s: float, scrapes: list[float] | None = None) -> float:
    """Pure: GPU-seconds of the pods a scrape-based source may have missed: those it never saw Running that fewer
    than two of its successful scrapes fell within (`scrapes`, their times, where known: on a loaded host scrapes
    come late or fail; else every `scrape_s`, so those that ran for less than two intervals)."""
    def missable(h: Held) -> bool:
        if scrapes is None:
            return h.end - h.start < 2 * scrape_s
        return bisect.bisect_right(scrapes, h.end) - bisect.bisect_left(scrapes, h.start) < 2
    return sum(h.gpu_seconds for h in held if h.pod not in seen and missable(h))


def beyond_resolution(measured: float, reference: float, resolution: float) -> float:
    """Pure: the disagreement the measurement's resolution cannot explain, relative to the reference."""
    excess = max(0.0, abs(measured - reference) - resolution)
    if reference == 0:
        return 0.0 if excess == 0 else 1.0
    return excess / reference


def disagreement(measured: float, reference: float, resolution: float) -> Estimate:
    """Pure: the relative disagreement of two sources, with the interval their resolution leaves it: from what the
    resolution cannot explain (beyond_resolution) to the difference plus the whole resolution."""
    if reference == 0:
        low = beyond_resolution(measured, reference, resolution)
        return Estimate(low, low, 1.0 if measured or resolution else 0.0, "no reference GPU-hours", "exact")
    off = abs(measured - reference)
    return Estimate(off / reference, max(0.0, off - resolution) / reference, (off + resolution) / reference,
                    f"within the sources' resolution {resolution:.4g} GPU-h", "exact").rounded(4)


def too_coarse(found: Estimate, threshold: float) -> str:
    """Pure: why the sources' resolution cannot show agreement within `threshold` ('' where it can): the interval
    straddles the threshold and is wider than the threshold itself, so at this resolution the measurement cannot
    tell agreement from a disagreement of the whole threshold."""
    resolution = (found.high - found.low) / 2
    if found.low <= threshold < found.high and found.high - found.low > threshold:
        return (f"the sources' resolution (±{resolution:.0%} of the GPU-hours) is wider than the {threshold:.0%} "
                f"allowed: measured {found.value:.1%} [{found.low:.1%}, {found.high:.1%}]; a finer scrape interval "
                "or longer jobs make it checkable")
    return ""


def worst(found: list[Estimate]) -> Estimate | None:
    """Pure: the largest of several disagreements: each end the largest of theirs."""
    if not found:
        return None
    return Estimate(max(e.value for e in found), max(e.low for e in found), max(e.high for e in found),
                    found[0].how, "exact")

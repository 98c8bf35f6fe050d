"""Scale — scheduler throughput with a big fleet and a deep queue: admissions per second (sustained and peak),
admission latency percentiles overall and against the queue depth a job met at submission, time to drain, and
Jain's index of the tenants' shares of what was admitted while every tenant still had work waiting (pure: from
what was watched). `harness/scenarios/scale.py` runs the scenario; `suites/scale/` and `bench/scale.py` feed it."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

from harness.criteria import AT_LEAST, AT_MOST, Chart, Criterion, Threshold, register
from harness.criteria.training.queue_fairness import jain_index

CRITERION = register(Criterion(
    "scale.throughput",
    "With N GPU nodes and M whole-node jobs submitted at a fixed rate across the tenants, the scheduler admits "
    "jobs fast enough, admission latency stays bounded as the queue deepens, the queue drains within the cap, "
    "the tenants' shares stay fair, and the harness keeps up (its own memory bounded).",
    (Threshold("min_sustained_jobs_per_s", "jobs admitted per second while some job waited", AT_LEAST, "/s"),
     Threshold("admission_p95_s", "95th percentile submission-to-admission seconds", AT_MOST, " s"),
     Threshold("drain_within_s", "first submission to last admission, every job admitted", AT_MOST, " s"),
     Threshold("min_jain_index", "Jain's index of the tenants' admitted GPUs against their weights while all "
               "waited", AT_LEAST),
     Threshold("max_harness_rss_mib", "the harness's peak resident memory", AT_MOST, " MiB")),
    (Chart("admissions", "jobs submitted and admitted over time", "jobs"),
     Chart("latency_by_depth", "admission latency p95 against the queue depth met at submission", "seconds",
           xlabel="queue depth at submission"))))

PEAK_WINDOW_S = 5.0
DEPTH_BUCKETS = (0, 100, 500, 1000, 2500, 5000, 10000)


@dataclass(frozen=True)
class Admission:
    """One job: when it was submitted and admitted (epoch seconds; None: never), its tenant and GPUs."""

    tenant: str
    submitted: float
    admitted: float | None
    gpus: int


@dataclass(frozen=True)
class Figures:
    jobs: int
    admitted: int
    sustained_per_s: float
    peak_per_s: float
    latency_s: dict[str, float]                      # p50, p95, p99
    latency_by_depth: list[tuple[str, int, float]]   # (depth bucket, jobs, p95)
    drain_s: float | None                            # first submission to last admission, when all were
    jain: float | None

    def lines(self) -> list[str]:
        latency = ", ".join(f"{k} {v:.2f} s" for k, v in self.latency_s.items())
        depth = "; ".join(f"depth {b}: {n} jobs, p95 {p:.2f} s" for b, n, p in self.latency_by_depth)
        return [f"admitted {self.admitted} of {self.jobs} jobs; {self.sustained_per_s:.1f} jobs/s sustained (over the "
                f"time some job waited), {self.peak_per_s:.1f} jobs/s peak ({PEAK_WINDOW_S:g} s windows)",
                f"admission latency: {latency or 'none'}",
                f"latency against queue depth at submission: {depth or 'none'}",
                f"drained in {self.drain_s:.1f} s" if self.drain_s is not None else "not drained",
                f"Jain's index of the tenants' shares while all waited: "
                + (f"{self.jain:.3f}" if self.jain is not None else "not measured")]


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def depth_at_submission(jobs: Sequence[Admission]) -> list[int]:
    """For each job (in the given order), how many submitted earlier were still not admitted when it came."""
    admitted = sorted(j.admitted for j in jobs if j.admitted is not None)
    submitted = sorted(j.submitted for j in jobs)
    return [bisect.bisect_left(submitted, j.submitted) - bisect.bisect_right(admitted, j.submitted) for j in jobs]


def bucket_of(depth: int) -> str:
    lower = max(b for b in DEPTH_BUCKETS if b <= depth)
    upper = next((b for b in DEPTH_BUCKETS if b > depth), None)
    return f"{lower}-{upper - 1}" if upper is not None else f"{lower}+"


def peak_rate(times: Sequence[float], window_s: float = PEAK_WINDOW_S) -> float:
    """The most admissions in any window of `window_s` seconds, per second."""
    ordered, best, start = sorted(times), 0, 0
    for end, t in enumerate(ordered):
        while t - ordered[start] > window_s:
            start += 1
        best = max(best, end - start + 1)
    return best / window_s if ordered else 0.0


def contended_shares(jobs: Sequence[Admission], weights: dict[str, float]) -> float | None:
    """Jain's index of each tenant's GPUs admitted against its weight, over the admissions made while every
    tenant still had a job waiting (after that, the last tenant with work takes the rest: not unfairness)."""
    last_wait = {t: max((j.admitted or math.inf) for j in jobs if j.tenant == t) for t in weights}
    until = min(last_wait.values())
    measured = {t: float(sum(j.gpus for j in jobs if j.tenant == t and j.admitted is not None
                             and j.admitted < until)) for t in weights}
    total, weight = sum(measured.values()), sum(weights.values())
    if not total or len(weights) < 2:
        return None
    return jain_index({t: v / total for t, v in measured.items()}, {t: w / weight for t, w in weights.items()})


def over_time(jobs: Sequence[Admission], resolution_s: float = 1.0) -> dict[str, list[tuple[float, float]]]:
    """Cumulative jobs submitted and admitted, one point per `resolution_s` (a chart of 10,000 jobs stays small)."""
    if not jobs:
        return {}
    start = min(j.submitted for j in jobs)

    def cumulative(times: list[float]) -> list[tuple[float, float]]:
        points: dict[float, float] = {}
        for count, t in enumerate(sorted(times), 1):
            points[math.ceil((t - start) / resolution_s) * resolution_s] = count
        return sorted(points.items())
    return {"submitted": cumulative([j.submitted for j in jobs]),
            "admitted": cumulative([j.admitted for j in jobs if j.admitted is not None])}


def depth_points(result: Figures) -> list[tuple[float, float]]:
    """(lower bound of each depth bucket, its p95): the latency-against-depth chart."""
    return [(float(bucket.split("-")[0].rstrip("+")), p95) for bucket, _, p95 in result.latency_by_depth]


def busy_s(jobs: Sequence[Admission], until: float) -> float:
    """Seconds during which some job was waiting (submitted, not yet admitted; a job never admitted waits until
    `until`): the time the scheduler had work, over which its rate is taken."""
    intervals = sorted((j.submitted, j.admitted if j.admitted is not None else until) for j in jobs)
    total, reach = 0.0, -math.inf
    for start, end in intervals:
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def figures(jobs: Sequence[Admission], weights: dict[str, float], until: float | None = None) -> Figures:
    """`until`: when observation ended (default: the last admission)."""
    done = [j for j in jobs if j.admitted is not None]
    times = [j.admitted for j in done if j.admitted is not None]
    waits = [j.admitted - j.submitted for j in done if j.admitted is not None]
    busy = busy_s(jobs, until if until is not None else max(times, default=0.0)) if jobs else 0.0
    by_bucket: dict[str, list[float]] = {}
    for job, depth in zip(jobs, depth_at_submission(jobs)):
        if job.admitted is not None:
            by_bucket.setdefault(bucket_of(depth), []).append(job.admitted - job.submitted)
    order = {bucket_of(b): i for i, b in enumerate(DEPTH_BUCKETS)}
    return Figures(
        jobs=len(jobs), admitted=len(done),
        sustained_per_s=len(times) / busy if busy > 0 else 0.0,
        peak_per_s=peak_rate(times),
        latency_s={f"p{q}": percentile(waits, q) for q in (50, 95, 99)} if waits else {},
        latency_by_depth=[(b, len(v), percentile(v, 95)) for b, v in sorted(by_bucket.items(),
                                                                            key=lambda kv: order[kv[0]])],
        drain_s=(max(times) - min(j.submitted for j in jobs)) if jobs and len(done) == len(jobs) else None,
        jain=contended_shares(jobs, weights))

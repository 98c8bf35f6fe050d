"""A deciding value with its uncertainty, and the one place that turns it and a threshold into a verdict.

An `Estimate` is a point and an interval [low, high] that the true value lies in with the stated confidence, made
from what was measured: samples (percentiles, means), counts (shares and rates), timestamps (one-shot durations:
their resolution and the harness's own observation lag) or windows (fairness indices). It keeps what it was made
from, so the samples of repeated runs of a case can be pooled and the interval computed again (`pool`).

    decide(estimate, threshold, "<=")  ->  PASS    the whole interval meets the threshold
                                           FAIL    the whole interval misses it
                                           INCONCLUSIVE  the interval straddles it

An exact count (pods bound before admission, jobs lost) is an Estimate of zero width: it decides at once.
Pure: no cluster, no clock.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

PASS, FAIL, INCONCLUSIVE = "PASS", "FAIL", "INCONCLUSIVE"
CONFIDENCE = 0.95
Z = {0.95: 1.959964, 0.99: 2.575829}
BOOTSTRAP_DRAWS = 2000
BOOTSTRAP_WORK = 1_000_000  # resampled values per interval at most: thousands of samples get fewer draws


def draws_for(n: int) -> int:
    """Bootstrap draws for n samples: BOOTSTRAP_DRAWS, fewer (not under 200) where n is large."""
    return max(200, min(BOOTSTRAP_DRAWS, BOOTSTRAP_WORK // max(1, n)))

BOOTSTRAP_SEED = 20261205  # the same samples give the same interval, run after run
TIMESTAMP_RESOLUTION_S = 1.0  # metadata.creationTimestamp and conditions' lastTransitionTime: RFC 3339, whole s


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float
    high: float
    how: str = "exact"                    # how the interval was made, in words for the record
    # exact (not pooled) | percentile | binomial | difference | duration | ratio | quotient | of:<statistic> |
    # groups:<statistic>
    kind: str = "exact"
    samples: tuple[float, ...] = field(default=(), repr=False)  # what it was made from, for pooling
    q: float = 0.0         # the percentile (percentile); trials (binomial); samples before (ratio)
    spread: float = 0.0                   # resolution + lag of one duration (duration)
    runs: int = 1

    @property
    def width(self) -> float:
        return self.high - self.low

    def describe(self, unit: str = "") -> str:
        if self.width == 0:
            return f"{self.value:g}{unit}"
        return f"{self.value:g}{unit} [{self.low:g}, {self.high:g}]"

    def rounded(self, digits: int) -> Estimate:
        return replace(self, value=round(self.value, digits), low=round(self.low, digits),
                       high=round(self.high, digits))


def exact(value: float) -> Estimate:
    return Estimate(float(value), float(value), float(value))


def decide(estimate: Estimate, threshold: float, comparison: str) -> str:
    """Pure: PASS when the whole interval meets the threshold, FAIL when the whole interval misses it."""
    if comparison == "<=":
        return PASS if estimate.high <= threshold else FAIL if estimate.low > threshold else INCONCLUSIVE
    if comparison == ">=":
        return PASS if estimate.low >= threshold else FAIL if estimate.high < threshold else INCONCLUSIVE
    raise ValueError(f"unknown comparison {comparison!r}")


def percentile(samples: Sequence[float], q: float, confidence: float = CONFIDENCE) -> Estimate:
    if not 0 < q < 1:
        raise ValueError(f"a percentile's q lies between 0 and 1, not {q}")
    return _percentile(samples, q, confidence)


def _percentile(samples: Sequence[float], q: float, confidence: float) -> Estimate:
    """The q-quantile (0 < q < 1) of samples, with a distribution-free order-statistic interval: the ranks between
    which the true quantile lies with at least `confidence` (binomial(n, q)); an end beyond the samples is the
    extreme sample, which then bounds the interval only as far as the samples go."""
    data = sorted(float(s) for s in samples)
    n = len(data)
    if n == 0:
        raise ValueError("a percentile of no samples")
    point = _quantile(data, q)
    lo_rank, hi_rank = _order_ranks(n, q, confidence)
    if hi_rank < n:
        return Estimate(point, min(point, data[lo_rank]), max(point, data[hi_rank]),
                        f"p{q * 100:g} of {n} samples, {confidence:.0%} order-statistic interval", "percentile",
                        tuple(data), q)
    # too few samples for order statistics to bound it above (p95 needs 59, p99 299): a bootstrap's interval, whose
    # upper end is at most the largest sample
    low, high = bootstrap(data, lambda d: _quantile(sorted(d), q), confidence)
    return Estimate(point, min(point, low), max(point, high),
                    f"p{q * 100:g} of {n} samples, {confidence:.0%} bootstrap interval (too few samples for order "
                    "statistics to bound it above)", "percentile", tuple(data), q)


def _quantile(data: list[float], q: float) -> float:
    position = q * (len(data) - 1)
    below = int(math.floor(position))
    above = min(below + 1, len(data) - 1)
    return data[below] + (data[above] - data[below]) * (position - below)


def _order_ranks(n: int, q: float, confidence: float) -> tuple[int, int]:
    """0-based ranks (l, u) with P(X(l) <= quantile <= X(u)) >= confidence, as narrow as the tails allow."""
    tail = (1 - confidence) / 2
    cdf, cumulative = [], 0.0
    log_q, log_p = math.log(q), math.log1p(-q)  # in logs: comb(n, k) overflows a float for thousands of samples
    for k in range(n + 1):
        cumulative += math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                               + k * log_q + (n - k) * log_p)
        cdf.append(cumulative)
    lower = max([k for k in range(n + 1) if cdf[k] <= tail] or [0])  # P(Bin <= lower) <= tail -> X(lower+1)
    upper = min([k for k in range(n + 1) if cdf[k] >= 1 - tail] or [n])
    return max(0, min(n - 1, lower)), upper  # upper == n: no sample bounds it


def mean(samples: Sequence[float], confidence: float = CONFIDENCE) -> Estimate:
    """The mean of samples with a percentile-bootstrap interval (seeded: the same samples, the same interval)."""
    return of_samples(samples, "mean", confidence)


def bootstrap(data: Sequence[float], statistic: Callable[[Sequence[float]], float],
              confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Pure: the percentile-bootstrap interval of `statistic` over `data` (a fixed seed)."""
    if len(data) < 2:
        return float(data[0]), float(data[0])
    draw = random.Random(BOOTSTRAP_SEED)
    values = sorted(statistic(draw.choices(data, k=len(data))) for _ in range(draws_for(len(data))))
    tail = (1 - confidence) / 2
    return values[int(tail * (len(values) - 1))], values[int(math.ceil((1 - tail) * (len(values) - 1)))]


def _cov(data: Sequence[float]) -> float:
    centre = statistics.fmean(data)
    return statistics.pstdev(data) / centre if centre else 0.0


def _tail_ratio(data: Sequence[float]) -> float:
    ordered = sorted(data)
    middle = _quantile(ordered, 0.5)
    return _quantile(ordered, 0.95) / middle if middle else 0.0


STATISTICS: dict[str, Callable[[Sequence[float]], float]] = {"mean": statistics.fmean, "cov": _cov,
                                                             "p95/p50": _tail_ratio}


def of_samples(samples: Sequence[float], statistic: str, confidence: float = CONFIDENCE) -> Estimate:
    """A statistic of samples (STATISTICS: "cov", "p95/p50", "mean") with its percentile-bootstrap interval."""
    data = tuple(float(s) for s in samples)
    if not data:
        raise ValueError(f"a {statistic} of no samples")
    compute = STATISTICS[statistic]
    point = compute(data)
    low, high = bootstrap(data, compute, confidence)
    return Estimate(point, min(low, point), max(high, point),
                    f"{statistic} of {len(data)} samples, {confidence:.0%} bootstrap interval", f"of:{statistic}", data)


def ratio_of_medians(before: Sequence[float], after: Sequence[float], confidence: float = CONFIDENCE) -> Estimate:
    """median(after) / median(before) of two independent sets of samples (a slowdown), with the interval of a
    bootstrap that resamples each set on its own."""
    first, second = tuple(float(s) for s in before), tuple(float(s) for s in after)
    if not first or not second:
        raise ValueError("a ratio of medians needs samples on both sides")
    point = statistics.median(second) / statistics.median(first)
    draw = random.Random(BOOTSTRAP_SEED)
    ratios = sorted(statistics.median(draw.choices(second, k=len(second)))
                    / statistics.median(draw.choices(first, k=len(first)))
                    for _ in range(draws_for(len(first) + len(second))))
    tail = (1 - confidence) / 2
    low, high = ratios[int(tail * (len(ratios) - 1))], ratios[int(math.ceil((1 - tail) * (len(ratios) - 1)))]
    return Estimate(point, min(low, point), max(high, point),
                    f"median of {len(second)} over median of {len(first)} samples, {confidence:.0%} bootstrap "
                    "interval", "ratio", first + second, float(len(first)))


def wilson(successes: int, trials: int, confidence: float = CONFIDENCE) -> Estimate:
    """A share or rate (successes of trials) with its Wilson score interval; no trials: [0, 1]."""
    if trials <= 0:
        return Estimate(0.0, 0.0, 1.0, "no trials", "binomial", (), 0)
    low, high = wilson_bounds(successes / trials, trials, Z[confidence])
    share = successes / trials
    return Estimate(share, min(low, share), max(high, share),
                    f"{successes} of {trials}, {confidence:.0%} Wilson interval", "binomial", (float(successes),),
                    float(trials))


def share_difference(successes_a: int, trials_a: int, successes_b: int, trials_b: int,
                     confidence: float = CONFIDENCE) -> Estimate:
    """Share a minus share b (successes of trials each), with Newcombe's interval from the two Wilson intervals."""
    a, b = wilson(successes_a, trials_a, confidence), wilson(successes_b, trials_b, confidence)
    value = a.value - b.value
    low = value - math.hypot(a.value - a.low, b.high - b.value)
    high = value + math.hypot(a.high - a.value, b.value - b.low)
    return Estimate(value, low, high, f"{successes_a} of {trials_a} less {successes_b} of {trials_b}, "
                    f"{confidence:.0%} Newcombe interval", "difference",
                    (float(successes_a), float(trials_a), float(successes_b), float(trials_b)))


def wilson_bounds(p: float, n: int, z: float) -> tuple[float, float]:
    """Pure: the Wilson score interval of share `p` over `n` trials at normal quantile `z`."""
    if n <= 0:
        return 0.0, 1.0
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def quadrature(ranges: Sequence[float], sigmas: float = 3.0, ends: int = 1) -> float:
    """The resolution of a sum of terms, each known only to a range of its own width (uniform over it; `ends`
    such ends per term): independent errors add in quadrature, and the sum is allowed `sigmas` standard
    deviations."""
    return float(sigmas * (sum(u * u for u in ranges) * ends / 12) ** 0.5)


def duration(seconds: float, resolution_s: float = TIMESTAMP_RESOLUTION_S, lag_s: float = 0.0) -> Estimate:
    """A one-shot duration between two timestamps of `resolution_s` each (whole seconds on the API server) as
    seen by a harness that observes `lag_s` late: it may have been up to a resolution shorter or longer, and
    shorter by the lag."""
    spread = resolution_s + lag_s
    clock = f"timestamps of {resolution_s:g} s" if resolution_s else "the harness's clock"
    return Estimate(seconds, max(0.0, seconds - spread), seconds + resolution_s,
                    f"one measurement, {clock}, observation lag {lag_s:.3g} s", "duration", (float(seconds),),
                    spread=spread)


def quotient(numerator: Estimate, denominator: Estimate, how: str) -> Estimate:
    """numerator / denominator (both positive), its interval from the two intervals' ends. Repeated runs pool as the
    median run, with the widest half-width of one."""
    if denominator.low <= 0:
        raise ValueError(f"a quotient by an interval that reaches zero ({denominator.describe()})")
    value = numerator.value / denominator.value
    low, high = numerator.low / denominator.high, numerator.high / denominator.low
    return Estimate(value, min(low, value), max(high, value), how, "quotient", (value,),
                    spread=max(value - low, high - value))


# Statistics of groups' totals against the groups' weights (a fairness index of tenants' GPU-seconds against their
# configured shares), by name: registered by the criteria that use them, so a pooled estimate can be made again
GROUPED: dict[str, Callable[[dict[str, float], dict[str, float]], float]] = {}


def grouped(statistic: str, groups: dict[str, list[float]], weights: dict[str, float], how: str,
            confidence: float = CONFIDENCE) -> Estimate:
    """GROUPED[statistic] of the groups' totals (each tenant's GPU-seconds, summed over its jobs) against their
    weights, with the interval of a stratified bootstrap: each group's items resampled within it. It keeps the items,
    so a later run's join their groups (`pool`: the statistic over both runs' windows)."""
    function, names = GROUPED[statistic], list(weights)
    items = [list(groups.get(name, [])) for name in names]
    whole = function({n: sum(v) for n, v in zip(names, items)}, weights)
    draw = random.Random(BOOTSTRAP_SEED)
    values = sorted(function({n: sum(draw.choices(v, k=len(v))) if v else 0.0 for n, v in zip(names, items)}, weights)
                    for _ in range(draws_for(sum(len(v) for v in items))))
    tail = (1 - confidence) / 2
    low, high = values[int(tail * (len(values) - 1))], values[int(math.ceil((1 - tail) * (len(values) - 1)))]
    kept_items = tuple(x for name, v in zip(names, items) for x in (weights[name], float(len(v)), *v))
    return Estimate(whole, min(low, whole), max(high, whole), how, f"groups:{statistic}", kept_items)


def groups_of(samples: Sequence[float]) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Pure: a grouped estimate's kept items back as (groups, weights), the groups named by their order."""
    groups: dict[str, list[float]] = {}
    weights: dict[str, float] = {}
    at = 0
    while at + 1 < len(samples):
        name, count = str(len(groups)), int(samples[at + 1])
        weights[name], groups[name] = samples[at], list(samples[at + 2:at + 2 + count])
        at += 2 + count
    return groups, weights


def pool(before: Estimate, now: Estimate) -> Estimate:
    """The estimate of two runs of a case together: samples, counts and windows pooled and the interval made again;
    one-shot durations as the median of the runs with the interval their order statistics and spread allow."""
    runs = before.runs + now.runs
    if before.kind != now.kind or now.kind == "exact":
        return replace(now, runs=runs)
    if now.kind == "percentile":
        pooled = percentile(before.samples + now.samples, now.q)
    elif now.kind.startswith("of:"):
        pooled = of_samples(before.samples + now.samples, now.kind[3:])
    elif now.kind == "ratio":
        split_before, split_now = int(before.q), int(now.q)
        pooled = ratio_of_medians(before.samples[:split_before] + now.samples[:split_now],
                                  before.samples[split_before:] + now.samples[split_now:])
    elif now.kind.startswith("groups:") and now.kind[7:] in GROUPED:
        (before_groups, weights), (now_groups, now_weights) = groups_of(before.samples), groups_of(now.samples)
        if weights != now_weights:
            return replace(now, runs=runs)
        joined = {g: before_groups[g] + now_groups[g] for g in weights}
        pooled = grouped(now.kind[7:], joined, weights, f"{now.kind[7:]} over the runs' windows, 95 % bootstrap over "
                         f"the jobs of each group ({', '.join(str(len(v)) for v in joined.values())})")
    elif now.kind == "difference" and len(before.samples) == len(now.samples) == 4:
        pooled = share_difference(*(int(x + y) for x, y in zip(before.samples, now.samples)))
    elif now.kind == "binomial":
        pooled = wilson(int(before.samples[0] + now.samples[0]) if before.samples and now.samples else 0,
                        int(before.q + now.q))
    else:  # one-shot values (duration, quotient): the median run, with the widest spread of one
        values = sorted(before.samples + now.samples)
        middle = values[(len(values) - 1) // 2]  # a measured run (the lower middle of an even count)
        spread = max(before.spread, now.spread)
        listed = ", ".join(f"{v:g}" for v in values)
        if now.kind == "quotient":
            pooled = Estimate(middle, max(0.0, middle - spread), middle + spread,
                              f"median of {len(values)} runs ({listed}), each +- {spread:.3g}", "quotient",
                              tuple(values), spread=spread)
        else:  # a duration is at most a timestamp's resolution longer than measured
            pooled = Estimate(middle, max(0.0, middle - spread), middle + min(spread, TIMESTAMP_RESOLUTION_S),
                              f"median of {len(values)} runs ({listed} s), timestamps and lag {spread:.3g} s",
                              "duration", tuple(values), spread=spread)
    return replace(pooled, runs=runs, how=f"{pooled.how}; {runs} runs pooled")


MAX_KEPT_SAMPLES = 2000  # what a record keeps of an estimate's samples, so repeated runs can be pooled later


def kept(estimate: Estimate) -> dict[str, object] | None:
    """What a record keeps of an estimate to pool it with other runs' (None: exact, or too many samples)."""
    if estimate.kind == "exact" or len(estimate.samples) > MAX_KEPT_SAMPLES:
        return None
    return {"kind": estimate.kind, "q": estimate.q, "spread": estimate.spread,
            "samples": [float(f"{v:.6g}") for v in estimate.samples]}


def from_record(check: dict[str, Any]) -> Estimate | None:
    """A recorded check's estimate (with what `kept` kept), None where it cannot be pooled."""
    found = check.get("pool")
    value, low, high = check.get("measured"), check.get("low"), check.get("high")
    if not isinstance(found, dict) or value is None or low is None or high is None:
        return None
    return Estimate(float(value), float(low), float(high), str(check.get("how", "")), str(found["kind"]),
                    tuple(float(v) for v in found.get("samples") or ()), float(found.get("q") or 0.0),
                    float(found.get("spread") or 0.0), int(check.get("runs") or 1))

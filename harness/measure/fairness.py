"""Queue fairness: GPU-seconds per tenant over the contended window, Jain's index, largest deviation."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Interval:
    tenant: str
    start: float
    end: float
    gpus: int


def gpu_seconds(intervals: list[Interval], window: tuple[float, float]) -> dict[str, float]:
    """GPU-seconds each tenant held inside `window`."""
    lo, hi = window
    totals: dict[str, float] = {}
    for iv in intervals:
        overlap = max(0.0, min(iv.end, hi) - max(iv.start, lo))
        totals[iv.tenant] = totals.get(iv.tenant, 0.0) + overlap * iv.gpus
    return totals


def shares(totals: dict[str, float], tenants: list[str]) -> dict[str, float]:
    whole = sum(totals.get(t, 0.0) for t in tenants)
    return {t: (totals.get(t, 0.0) / whole if whole else 0.0) for t in tenants}


def jain_index(measured: dict[str, float], expected: dict[str, float]) -> float:
    """Jain's index of the tenants' measured/expected ratios: 1.0 when every tenant got its share."""
    ratios = [measured[t] / expected[t] for t in expected if expected[t] > 0]
    if not ratios or not any(ratios):
        return 0.0
    return sum(ratios) ** 2 / (len(ratios) * sum(r * r for r in ratios))


def max_deviation(measured: dict[str, float], expected: dict[str, float]) -> float:
    return max(abs(measured.get(t, 0.0) - expected[t]) for t in expected)


def contended_window(pending_since: dict[str, float], drained_at: dict[str, float]) -> tuple[float, float]:
    """From when every tenant had work waiting to when the first tenant ran out of waiting work."""
    return max(pending_since.values()), min(drained_at.values())


def share_series(intervals: list[Interval], window: tuple[float, float], tenants: list[str],
                 step_s: float) -> dict[str, list[tuple[float, float]]]:
    """Each tenant's share of GPUs in use, sampled every `step_s` over the window (for the chart)."""
    series: dict[str, list[tuple[float, float]]] = {t: [] for t in tenants}
    t = window[0]
    while t <= window[1]:
        in_use = {x: sum(iv.gpus for iv in intervals if iv.tenant == x and iv.start <= t < iv.end) for x in tenants}
        whole = sum(in_use.values())
        for x in tenants:
            series[x].append((t - window[0], in_use[x] / whole if whole else 0.0))
        t += step_s
    return series

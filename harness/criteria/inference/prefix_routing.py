"""Inference 7 — prefix routing: shared-prefix traffic through the plain Service (kube-proxy picks a replica per
connection, blind to the prompt) against a prefix-aware route (each prompt to the replica that holds its prefix),
the same prompts in the same order, each on fresh replicas.

Decided by the hit-rate gain: the prefix-aware route's share of prompt tokens found in the model servers' prefix
caches (vLLM's `prefix_cache_hits` over `prefix_cache_queries`, summed over the replicas) less the plain Service's,
with Newcombe's interval; each request one trial (its prefix is found or not as a whole). What the gain wins is
measured both ways and shown, not decided: TTFT p99 per stage, and the capacity at the SLO (capacity's knee).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.core import estimate as est
from harness.criteria import AT_LEAST, Chart, Criterion, Threshold, register
from harness.criteria.inference.capacity import Stage, knee

CRITERION = register(Criterion(
    "inference.prefix_routing",
    "Shared-prefix traffic through a prefix-aware route finds more of its prompts in the model servers' prefix "
    "caches than through the plain Service; TTFT p99 and capacity at the SLO are measured both ways.",
    (Threshold("min_hit_rate_gain", "the prefix-aware route's prefix-cache hit rate less the plain Service's "
               "(shares of prompt tokens)", AT_LEAST, ""),),
    (Chart("prefix_routing", "TTFT p99 against the offered rate, per route", "seconds",
           "requests/s offered (Poisson)", "points"),)))


@dataclass(frozen=True)
class Route:
    """One way to the replicas and what it measured: the servers' prefix-cache counters over the sweep (tokens) and
    the requests they served, and the sweep's stages."""

    name: str
    hits: float
    queries: float
    requests: int
    stages: tuple[Stage, ...]

    @property
    def hit_rate(self) -> float:
        return self.hits / self.queries if self.queries else 0.0

    def trials(self) -> tuple[int, int]:
        """(requests whose prefix was found, requests): the token share carried onto the requests."""
        return round(self.hit_rate * self.requests), self.requests

    def describe(self, limits: dict[str, float]) -> dict[str, object]:
        """Its row in the record's table."""
        found, served = self.trials()
        rate = est.wilson(found, served).rounded(3)
        answered = [s for s in self.stages if s.report.samples.get("ttft")]
        ttft = est.percentile([t for s in answered for t in s.report.samples["ttft"]], 0.99).rounded(3) \
            if answered else None
        return {"route": self.name, "prefix-cache hit rate": rate.describe(), "requests served": served,
                "TTFT p99 over the stages (s)": ttft.describe() if ttft else "none answered",
                "capacity at the SLO (req/s)": knee(self.stages, limits).rounded(2).describe()}


def hit_rate_gain(aware: Route, plain: Route) -> est.Estimate:
    """Pure: the prefix-aware route's hit rate less the plain Service's, with its interval."""
    return est.share_difference(*aware.trials(), *plain.trials())

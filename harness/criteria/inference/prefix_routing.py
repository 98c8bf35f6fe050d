"""Inference 7 — prefix routing: shared-prefix traffic through the plain Service (kube-proxy picks a replica per
connection, blind to the prompt) against a prefix-aware route (each prompt to the replica that holds its prefix),
the same prompts in the same order, each on fresh replicas.

Decided by the hit-rate gain: the prefix-aware route's share of prompt tokens found in the model servers' prefix
caches (vLLM's `prefix_cache_hits` over `prefix_cache_queries`, summed over the replicas) less the plain Service's,
over a run that sends every prompt once. Its interval is Newcombe's, with the token share carried onto the requests
served as if they were independent trials (an approximation: a request's prefix is found or not as a whole, and the
requests of one prefix depend on each other). What the gain wins is measured both ways and shown, not decided:
TTFT p99 in that run, and per stage of a sweep the capacity at the SLO (capacity's knee).
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
    """One way to the replicas and what it measured: over the run that sends every prompt once (`once`), the servers'
    prefix-cache counters (tokens) and the requests they served; then the sweep's stages."""

    name: str
    hits: float
    queries: float
    requests: int
    once: Stage
    stages: tuple[Stage, ...] = ()

    @property
    def hit_rate(self) -> float:
        return self.hits / self.queries if self.queries else 0.0

    def trials(self) -> tuple[int, int]:
        """(requests, requests served): the token share carried onto the requests served."""
        return round(self.hit_rate * self.requests), self.requests

    def describe(self, limits: dict[str, float]) -> dict[str, object]:
        """Its row in the record's table."""
        found, served = self.trials()
        return {"route": self.name, "prefix-cache hit rate": est.wilson(found, served).rounded(3).describe(),
                "requests served": served, f"TTFT p99 at {self.once.rate:g} req/s (s)":
                    self.once.p99("ttft").rounded(3).describe(),
                "capacity at the SLO (req/s)": knee(self.stages, limits).rounded(2).describe() if self.stages
                else "not swept"}


def hit_rate_gain(aware: Route, plain: Route) -> est.Estimate:
    """Pure: the prefix-aware route's hit rate less the plain Service's, with its interval."""
    return est.share_difference(*aware.trials(), *plain.trials())

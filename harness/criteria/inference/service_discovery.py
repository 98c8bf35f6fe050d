"""Inference 4 — service discovery: after every pod transition the Service's EndpointSlices converge to exactly
the Ready, non-terminating pods (addresses, targetRef UID, ports, conditions); the worst convergence time."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.criteria import AT_MOST, Chart, Criterion, Threshold, register

CRITERION = register(Criterion(
    "inference.service_discovery",
    "After every pod transition, the Service's EndpointSlices converge to exactly the Ready, non-terminating pods "
    "(address, targetRef UID, port, ready/serving/terminating); the worst convergence time is within the threshold.",
    (Threshold("converge_within_s", "worst seconds from a pod transition to the EndpointSlices matching", AT_MOST,
               " s"),
     Threshold("max_mismatched_at_end", "endpoints still wrong when the pods settle", AT_MOST, " endpoints")),
    (Chart("ready_endpoints", "ready endpoints vs Ready pods", "count"),)))

Endpoint = tuple[str, str, bool, bool, bool]  # (address, targetRef UID, ready, serving, terminating)


def _is_ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def expected(pods: list[dict[str, Any]]) -> set[Endpoint]:
    """What the EndpointSlices must say: each Ready, non-terminating pod with an IP, ready and serving. Pods that are
    not Ready publish not-ready (or nothing); terminating pods are not counted as ready."""
    return {((p.get("status") or {}).get("podIP", ""), p["metadata"]["uid"], True, True, False)
            for p in pods if _is_ready(p) and not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("podIP")}


def published(slices: list[dict[str, Any]], port: int | str) -> set[Endpoint]:
    """What the EndpointSlices say is ready to receive traffic on `port` (a number, or the Service port's name: the
    number behind it is the profile's model server's) (the ready endpoints)."""
    found: set[Endpoint] = set()
    for endpoint_slice in slices:
        if port not in {p.get("name" if isinstance(port, str) else "port") for p in endpoint_slice.get("ports") or []}:
            continue
        for endpoint in endpoint_slice.get("endpoints") or []:
            conditions = endpoint.get("conditions") or {}
            if not conditions.get("ready"):
                continue
            for address in endpoint.get("addresses") or []:
                found.add((address, (endpoint.get("targetRef") or {}).get("uid", ""), True,
                           bool(conditions.get("serving", True)), bool(conditions.get("terminating", False))))
    return found


@dataclass
class Convergence:
    """Fed (time, expected, published) at every pod or slice event; keeps how long each divergence lasted."""

    diverged_since: float | None = None
    worst_s: float = 0.0
    episodes: int = 0
    last_difference: set[Endpoint] = field(default_factory=set)
    points: dict[str, list[tuple[float, float]]] = field(
        default_factory=lambda: {"Ready pods": [], "ready endpoints": []})

    def observe(self, t: float, want: set[Endpoint], have: set[Endpoint]) -> None:
        difference = want ^ have
        self.points["Ready pods"].append((t, len(want)))
        self.points["ready endpoints"].append((t, len(have)))
        if difference and self.diverged_since is None:
            self.diverged_since, self.episodes = t, self.episodes + 1
        elif not difference and self.diverged_since is not None:
            self.worst_s = max(self.worst_s, t - self.diverged_since)
            self.diverged_since = None
        self.last_difference = difference

    def worst(self, now: float) -> float:
        """The worst convergence time, counting a divergence still open at `now`."""
        open_s = now - self.diverged_since if self.diverged_since is not None else 0.0
        return max(self.worst_s, open_s)

"""Large-scale training — topology placement: a gang that asks to stay within one domain of the profile's gang
level (a leaf switch, an NVLink domain) has its pods in one domain at every moment; while no domain can hold it
whole, none of its pods is bound (the cluster's free GPUs would hold it, split); once a domain frees, it lands whole
inside it within the threshold. A gang that only prefers one domain, on a prefilled cluster, uses no more domains than
the fewest its free nodes allow. A placed gang that loses a node gets no straggler outside its domain: its
replacement waits for room there, or the whole gang is requeued; once the node is back, the gang is whole again within
the threshold. A stream of small jobs, worth one domain's GPUs, leaves the other domains whole for the next gang: it
touches no more domains than the fewest that hold it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.criteria import AT_MOST, Chart, Criterion, Threshold, register

CRITERION = register(Criterion(
    "training.topology_placement",
    "A gang that requires one topology domain has all its pods in one domain at every moment; while no domain can "
    "hold it, none of its pods is bound; when a domain frees, it lands whole inside it within the threshold.",
    (Threshold("max_domains_spanned", "domains of the gang level its bound pods spanned at one moment (1)", AT_MOST,
               " domains"),
     Threshold("max_pods_bound_while_no_domain_fits", "pods bound while no domain could hold the whole gang (0)",
               AT_MOST, " pods"),
     Threshold("placed_within_s", "seconds from a domain freeing to all pods bound inside it", AT_MOST, " s"),
     Threshold("max_extra_domains", "domains a gang preferring one used beyond the fewest its free nodes allowed (0)",
               AT_MOST, " domains"),
     Threshold("max_pods_outside_domain_after_node_loss", "pods of a placed gang bound outside its domain after one of "
               "its nodes was lost (0: the replacement waits in the domain, or the gang is requeued whole)", AT_MOST,
               " pods"),
     Threshold("rejoined_within_s", "seconds from the lost node's return to the gang whole again", AT_MOST, " s"),
     Threshold("max_extra_domains_fragmented", "domains a stream of small jobs touched beyond the fewest that hold "
               "their GPUs (0: the other domains stay whole for a gang)", AT_MOST, " domains")),
    (Chart("pods", "pods over time", "pods"),)))

@dataclass
class PlacementWatch:
    """Fed every pod event of the gang (from the watch): where its bound pods are, and the worst moment."""

    size: int
    domain_of: dict[str, str]  # node -> its domain at the gang level
    nodes: dict[str, str] = field(default_factory=dict)  # bound pod -> its node
    max_spanned: int = 0
    spans: list[tuple[float, tuple[str, ...]]] = field(default_factory=list)  # each change: when, the domains used
    bound_while_blocked: int = 0
    blocked: bool = True  # until the case frees a domain
    all_bound_at: float | None = None
    home: str | None = None  # the domain a placed gang is in (after a lost node: its pods outside it are stragglers)
    placed_before: frozenset[tuple[str, str]] = frozenset()  # (pod, node) bound when the node was lost: not stragglers
    max_outside: int = 0

    def observe(self, event: str, pod: dict[str, Any], seen_at: float) -> None:
        name, node = pod["metadata"]["name"], (pod.get("spec") or {}).get("nodeName")
        if event != "DELETED" and node:
            self.nodes[name] = node
        else:
            self.nodes.pop(name, None)
        used = self.domains()
        if not self.spans or self.spans[-1][1] != used:
            self.spans.append((seen_at, used))
        self.max_spanned = max(self.max_spanned, len(used))
        if self.blocked:
            self.bound_while_blocked = max(self.bound_while_blocked, len(self.nodes))
        if self.home is not None:
            self.max_outside = max(self.max_outside, sum(
                1 for pod, n in self.nodes.items()
                if self.domain_of.get(n) != self.home and (pod, n) not in self.placed_before))
        if len(self.nodes) >= self.size and self.all_bound_at is None:
            self.all_bound_at = seen_at

    def domains(self) -> tuple[str, ...]:
        """The domains its bound pods are in now (a node without the level's label counts as a domain of its own)."""
        return tuple(sorted({self.domain_of.get(node, f"(unlabelled: {node})") for node in self.nodes.values()}))

    def free_a_domain(self) -> None:
        self.blocked = False


def domains_of(nodes: list[dict[str, Any]], level: str) -> dict[str, str]:
    """Pure: node name -> its value of the level's label (nodes without it left out)."""
    found = {}
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") or {}
        if level in labels:
            found[node["metadata"]["name"]] = labels[level]
    return found


def fewest_domains(free_nodes: dict[str, int], size: int) -> int:
    """Pure: the fewest domains whose free nodes hold `size` pods of a whole node each (the fullest first); as well,
    the fewest whose free GPUs hold `size` GPUs."""
    held, used = 0, 0
    for free in sorted(free_nodes.values(), reverse=True):
        if held >= size:
            break
        held, used = held + free, used + 1
    return used


def members(domain_of: dict[str, str]) -> dict[str, list[str]]:
    """Pure: domain -> its nodes, sorted."""
    found: dict[str, list[str]] = {}
    for node, domain in sorted(domain_of.items()):
        found.setdefault(domain, []).append(node)
    return found


@dataclass(frozen=True)
class Fragmentation:
    """Where a stream of small jobs left the cluster: the domains they touched, the domains still wholly free, and
    the largest gang of whole nodes one domain can still take."""

    touched: tuple[str, ...]
    wholly_free: tuple[str, ...]
    largest_gang_nodes: int
    fewest: int  # the fewest domains that hold the stream's GPUs

    @property
    def extra_domains(self) -> int:
        return max(0, len(self.touched) - self.fewest)


def fragmentation(used_gpus: dict[str, int], domains: dict[str, list[str]], per_node: int) -> Fragmentation:
    """Pure: `used_gpus` node -> GPUs the small jobs hold there; `domains` domain -> its nodes."""
    busy = {node for node, gpus in used_gpus.items() if gpus > 0}
    touched = tuple(sorted(d for d, nodes in domains.items() if busy & set(nodes)))
    return Fragmentation(
        touched, tuple(sorted(d for d in domains if d not in touched)),
        max((sum(1 for n in nodes if n not in busy) for nodes in domains.values()), default=0),
        fewest_domains({d: len(nodes) * per_node for d, nodes in domains.items()}, sum(used_gpus.values())))

"""Gang admission: while a gang cannot fit, how many of its pods were bound at once; then time to all bound."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class GangWatch:
    """Fed every pod event of the gang (from the watch, not one instant); keeps the worst partial binding."""

    size: int
    bound: set[str] = field(default_factory=set)
    max_partial: int = 0            # most pods bound at one time while fewer than `size` were
    all_bound_at: float | None = None

    def observe(self, event: str, pod: dict[str, Any], seen_at: float) -> None:
        name = pod["metadata"]["name"]
        is_bound = event != "DELETED" and bool((pod.get("spec") or {}).get("nodeName"))
        if is_bound:
            self.bound.add(name)
        else:
            self.bound.discard(name)
        if len(self.bound) < self.size:
            self.max_partial = max(self.max_partial, len(self.bound))
        elif self.all_bound_at is None:
            self.all_bound_at = seen_at

    def partial_while_blocked(self) -> int:
        return self.max_partial

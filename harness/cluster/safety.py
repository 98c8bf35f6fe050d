"""Destructive steps run only where allowed, and only on objects gpupoc created and labelled."""

from __future__ import annotations

from typing import Any

from harness.core.errors import HarnessError
from harness.cluster.manifests import is_ours


class NotAllowed(HarnessError):
    """A destructive step was refused: the reason says how to allow it."""


def destructive_refusal(harness_made: bool, context: str, allowed: tuple[str, ...], step: str) -> str | None:
    """None when `step` may run on this target (one the harness made and runs, or a context allowed); else why not
    (a SKIP reason)."""
    if harness_made or context in allowed:
        return None
    return (f"{step} is destructive and context {context} is not allowed: "
            f"pass --allow-destructive {context} to run it there")


def require_ours(obj: dict[str, Any], step: str) -> None:
    """Refuse to change an object gpupoc did not create and label."""
    if not is_ours(obj):
        meta = obj.get("metadata") or {}
        raise NotAllowed(f"{step}: {obj.get('kind', 'object')} {meta.get('namespace', '')}/{meta.get('name')} "
                         "was not created by gpupoc (no gpupoc labels); refusing to change it")

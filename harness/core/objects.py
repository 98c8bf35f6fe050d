"""Pure readers of Kubernetes objects as dicts: conditions and the server's timestamps."""

from __future__ import annotations

from datetime import datetime
from typing import Any


def parse_time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == kind), None)


def condition_true(obj: dict[str, Any], kind: str) -> bool:
    found = condition(obj, kind)
    return found is not None and found.get("status") == "True"


def condition_time(obj: dict[str, Any], kind: str) -> datetime | None:
    found = condition(obj, kind)
    return parse_time(found.get("lastTransitionTime")) if found and found.get("status") == "True" else None


def created_at(obj: dict[str, Any]) -> datetime | None:
    return parse_time((obj.get("metadata") or {}).get("creationTimestamp"))

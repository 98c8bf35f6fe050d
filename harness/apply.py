"""Server-side apply of plain objects through the dynamic client."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kubernetes import client
from kubernetes.dynamic import DynamicClient

FIELD_MANAGER = "gpupoc"


def apply_objects(api: client.ApiClient, objects: Iterable[dict[str, Any]],
                  field_manager: str = FIELD_MANAGER) -> list[Any]:
    """Apply each object server-side (taking ownership of conflicting fields); return each as the server stored it."""
    dynamic = DynamicClient(api)
    applied = []
    for obj in objects:
        meta = obj["metadata"]
        resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        applied.append(dynamic.server_side_apply(resource, body=obj, name=meta["name"], namespace=meta.get("namespace"),
                                                 field_manager=field_manager, force_conflicts=True))
    return applied

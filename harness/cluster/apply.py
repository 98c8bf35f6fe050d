"""Server-side apply of plain objects through the dynamic client."""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Iterable
from typing import Any

from kubernetes import client
from kubernetes.dynamic import DynamicClient

FIELD_MANAGER = "gpupoc"
_DYNAMIC: weakref.WeakKeyDictionary[client.ApiClient, DynamicClient] = weakref.WeakKeyDictionary()
_DYNAMIC_LOCK = threading.Lock()
_DISCOVERED: set[str] = set()  # the API servers whose discovery this process has read afresh


def dynamic_client(api: client.ApiClient) -> DynamicClient:
    """One dynamic client per API client: making one reads the discovery cache again (about 5 ms of CPU), which
    at 50 submissions per second is a quarter of a core. The client library keeps that cache in a file per API
    server address, across processes: once per process and server it is read afresh, so a cluster upgraded since
    (v1.36's scheduling.k8s.io/v1alpha2 gone in v1.37, its PodGroup at v1beta1) is not asked for what it no longer
    serves (a 404, 2026-12-06)."""
    with _DYNAMIC_LOCK:
        found = _DYNAMIC.get(api)
        if found is None:
            found = _DYNAMIC[api] = DynamicClient(api)
            if api.configuration.host not in _DISCOVERED:
                found.resources.invalidate_cache()
                _DISCOVERED.add(api.configuration.host)
        return found


def apply_objects(api: client.ApiClient, objects: Iterable[dict[str, Any]],
                  field_manager: str = FIELD_MANAGER) -> list[Any]:
    """Apply each object server-side (taking ownership of conflicting fields); return each as the server stored it."""
    dynamic = dynamic_client(api)
    applied = []
    for obj in objects:
        meta = obj["metadata"]
        resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        applied.append(dynamic.server_side_apply(resource, body=obj, name=meta["name"], namespace=meta.get("namespace"),
                                                 field_manager=field_manager, force_conflicts=True))
    return applied


def served_crds(api: client.ApiClient, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Those of the CRDs `names` the API server has, by name (as plain JSON: their typed models are slow)."""
    extensions = client.ApiextensionsV1Api(api)
    served = {}
    for name in names:
        try:
            answer = extensions.read_custom_resource_definition(name, _preload_content=False)
        except client.ApiException as exc:
            if exc.status == 404:
                continue
            raise
        served[name] = json.loads(answer.read())
    return served

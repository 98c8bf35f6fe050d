"""Namespaces that enforce Pod Security's `restricted` level for a while (a common real-cluster setting)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from kubernetes import client

ENFORCE = "pod-security.kubernetes.io/enforce"


@contextlib.contextmanager
def restricted(core: client.CoreV1Api, namespaces: list[str]) -> Iterator[None]:
    for name in namespaces:
        core.patch_namespace(name, {"metadata": {"labels": {ENFORCE: "restricted"}}})
    try:
        yield
    finally:
        for name in namespaces:
            with contextlib.suppress(client.ApiException):
                core.patch_namespace(name, {"metadata": {"labels": {ENFORCE: None}}})

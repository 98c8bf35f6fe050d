"""Another cluster, as the harness and this cluster's controllers reach it (a MultiKueue worker, say)."""

from __future__ import annotations

from dataclasses import dataclass

from kubernetes import client


@dataclass(frozen=True)
class OtherCluster:
    name: str
    api: client.ApiClient  # the harness's own access (an admin's): to set it up and read it
    server: str  # its API server's URL, as this cluster's controllers reach it
    ca_pem: bytes  # its API server's CA
    ca_path: str = ""  # the same CA as a file, where there is one

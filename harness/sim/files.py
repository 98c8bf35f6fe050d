"""Files the sim's processes read: tokens, kubeconfigs, Prometheus config. Pure rendering."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.sim.config import Ports

# Identities of the sim: name -> groups. The admin is what users and suites act as.
IDENTITIES: dict[str, tuple[str, ...]] = {
    "gpupoc-admin": ("system:masters",),
    "system:kube-controller-manager": ("system:masters",),
    "system:kube-scheduler": ("system:masters",),
    "gpupoc-kwok": ("system:masters",),
    "gpupoc-prometheus": ("system:monitoring",),
    "gpupoc-kueue": ("system:masters",),
    "gpupoc-volcano": ("system:masters",),
    "gpupoc-kuberay": ("system:masters",),
    "gpupoc-kube-state-metrics": ("system:masters",),
    "gpupoc-kai-scheduler": ("system:masters",),
    "gpupoc-karpenter": ("system:masters",),
    "system:kube-proxy": (),  # bound to system:node-proxier by the API server's default RBAC
    "gpupoc-dataplane": ("system:masters",),
    "gpupoc-metrics-adapter": ("system:masters",),
}
SCRAPE_INTERVAL = "5s"
LARGE_SCRAPE_INTERVAL, LARGE_SIM_NODES = "15s", 200


@dataclass(frozen=True)
class Token:
    user: str
    value: str


def new_tokens() -> dict[str, Token]:
    return {user: Token(user, secrets.token_hex(24)) for user in IDENTITIES}


def token_file(tokens: dict[str, Token]) -> str:
    """The API server's --token-auth-file: token,user,uid,"group1,group2"."""
    return "".join(f'{t.value},{t.user},{t.user},"{",".join(IDENTITIES[t.user])}"\n' for t in tokens.values())


def kubeconfig(server: str, ca_file: Path, token: Token, context: str = "gpupoc-sim") -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": context, "cluster": {"server": server, "certificate-authority": str(ca_file)}}],
        "users": [{"name": token.user, "user": {"token": token.value}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": token.user}}],
    }


def write_private(path: Path, text: str) -> Path:
    """Write a file only this user can read: it holds a credential."""
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_text(text)
    return path


def write_kubeconfig(path: Path, config: dict[str, Any]) -> Path:
    return write_private(path, yaml.safe_dump(config, sort_keys=False))


def https_job(job: str, port: int, token_path: Path) -> dict[str, Any]:
    return {"job_name": job, "scheme": "https", "bearer_token_file": str(token_path),
            "tls_config": {"insecure_skip_verify": True},  # loopback, the sim's own serving certificates
            "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}


def http_job(job: str, port: int) -> dict[str, Any]:
    return {"job_name": job, "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}


def scrape_interval(nodes: int) -> str:
    """Every 5 s; a sim of hundreds of nodes (the scale suite's) every 15 s, as a large cluster's Prometheus."""
    return LARGE_SCRAPE_INTERVAL if nodes >= LARGE_SIM_NODES else SCRAPE_INTERVAL


def prometheus_config(ports: Ports, token_path: Path, extra_jobs: list[dict[str, Any]] | None = None,
                      nodes: int = 0) -> dict[str, Any]:
    """Static 127.0.0.1 targets only: nothing scrapes a simulated pod or Service IP."""
    interval = scrape_interval(nodes)
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "scrape_configs": [
            https_job("kube-apiserver", ports.apiserver, token_path),
            https_job("kube-controller-manager", ports.controller_manager, token_path),
            https_job("kube-scheduler", ports.scheduler, token_path),
            http_job("etcd", ports.etcd),
            http_job("kwok", ports.kwok),
            http_job("prometheus", ports.prometheus),
            *(extra_jobs or []),
        ],
    }

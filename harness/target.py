"""The cluster under test: the sim (default), a kubeconfig context (kind, staging), or in-cluster config."""

from __future__ import annotations

from dataclasses import dataclass

import urllib3
from kubernetes import client, config as kube_config
from kubernetes.config.config_exception import ConfigException

from harness.config import RunConfig, in_cluster, kubeconfig_contexts
from harness.errors import ConfigError, HarnessError
from harness.seam import ClusterSeam
from harness.sim import cluster
from harness.sim.config import SimConfig

API_PROBE_TIMEOUT_S = 10


@dataclass(frozen=True)
class Target:
    kind: str           # sim | kubeconfig | in-cluster
    context: str
    api: client.ApiClient
    prometheus_url: str | None
    kubernetes_version: str
    seam: ClusterSeam
    started_sim: bool = False  # this process started the sim, so it stops it at the end

    @property
    def host(self) -> str:
        return str(self.api.configuration.host)


def _api_for(cfg: RunConfig) -> tuple[str, str, client.ApiClient, bool]:
    if cfg.kubeconfig is not None:
        context = cfg.context or kubeconfig_contexts(cfg.kubeconfig)[1]  # resolve() checked it is there
        try:
            api = kube_config.new_client_from_config(str(cfg.kubeconfig), context=context)
            return "kubeconfig", str(context), api, False
        except ConfigException as exc:
            raise ConfigError(f"kubeconfig {cfg.kubeconfig}, context {context}: {exc}") from exc
    if in_cluster():
        kube_config.load_incluster_config()
        return "in-cluster", "in-cluster", client.ApiClient(), False
    started = not cluster.is_up()
    if started:
        cluster.up(SimConfig(), recover=False)  # never tear down a broken sim another run may be looking at
    return "sim", "gpupoc-sim", cluster.api_client(), started


def connect(cfg: RunConfig) -> Target:
    """Connect and check the API server answers; a clear error when it does not."""
    kind, context, api, started = _api_for(cfg)
    try:
        version = client.VersionApi(api).get_code(_request_timeout=API_PROBE_TIMEOUT_S).git_version
    except (urllib3.exceptions.HTTPError, OSError, client.ApiException) as exc:
        raise HarnessError(f"API server {api.configuration.host} (context {context}) is unreachable: "
                           f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}; "
                           "check that the cluster is running and the kubeconfig points at it") from exc
    timeouts = cfg.profile.timeouts  # the probe above fails fast; from here on every request goes through the seam
    seam = ClusterSeam(api, timeouts.request, timeouts.retry_budget, cfg.kubeconfig)
    prometheus = cfg.prometheus_url or cfg.profile.prometheus_url or (cluster.prometheus_url() if kind == "sim" else None)
    return Target(kind, context, seam.api, prometheus, str(version), seam, started)

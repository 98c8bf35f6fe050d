"""The cluster under test: the sim (default), a kubeconfig context (kind, staging), or in-cluster config."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config as kube_config
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.incluster_config import InClusterConfigLoader

from harness.config import options as config
from harness.config.options import IN_CLUSTER_CONTEXT, SIM_CONTEXT, RunConfig, in_cluster, kubeconfig_contexts
from harness.core.errors import ConfigError, HarnessError
from harness.cluster.inventory import gpu_inventory
from harness.cluster.seam import ClusterSeam
from harness.jobs.slurm.system import SlurmSite
from harness.targets import sim
from harness.targets.identity import ROLE_DROP_ENV, runner_client

API_PROBE_TIMEOUT_S = 10
HTTP_UNAUTHORIZED, HTTP_FORBIDDEN = 401, 403


@dataclass(frozen=True)
class Features:
    """What a target offers the harness: asked instead of its kind (the sim, a kubeconfig cluster, in-cluster)."""

    simulated_gpus: bool     # its GPUs are simulated: no driver to ask, no DCGM exporter, and the record says so
    own_processes: bool      # the harness runs its control plane and schedulers as processes it can watch and stop
    adds_nodes: bool         # nodes can be added for a scenario and removed after it
    audit_log_file: bool     # the API server's audit log is a file the harness reads
    runner_is_admin: bool    # the runner set the cluster up: its permissions are not reviewed, destructive steps run
    creates_queue_model: bool  # the reference queue model may be created (a cluster of its own otherwise keeps its own)
    runs_sim_workloads: bool = False  # its nodes run the sim's images and read its annotations (kwok, the data plane)


SIM_FEATURES = Features(simulated_gpus=True, own_processes=True, adds_nodes=True, audit_log_file=True,
                        runner_is_admin=True, creates_queue_model=True, runs_sim_workloads=True)


def features_of(kind: str, context: str, on_sim: bool = False) -> Features:
    """`on_sim`: the API server is the sim's, reached through a kubeconfig or from a pod (as the runner's role is
    tested): its nodes run the sim's workloads, though the runner is not the one who made it."""
    if kind == "sim":
        return SIM_FEATURES
    return Features(simulated_gpus=False, own_processes=False, adds_nodes=False, audit_log_file=False,
                    runner_is_admin=False, creates_queue_model=context.startswith("kind-"), runs_sim_workloads=on_sim)


def planned_features(cfg: RunConfig) -> Features:
    """What the target a run is configured for will offer, before it is connected (collection orders its cases)."""
    return features_of("sim" if cfg.targets_sim else "kubeconfig", cfg.context or "")


@dataclass(frozen=True)
class DataPlane:
    """Where pod and Service addresses answer from: the sim's network namespace, entered by a child process before
    it runs (`enter`), and kube-proxy's metrics (when its rules for a Service are programmed)."""

    netns: str
    enter: Callable[[], None]
    proxy_metrics_url: str | None


@dataclass(frozen=True)
class Target:
    """The cluster under test and what can be done to it. Code outside harness/targets/ asks it (its features and
    operations), never its kind: what differs between the sim and a cluster is decided here."""

    kind: str           # sim | kubeconfig | in-cluster
    context: str
    api: client.ApiClient
    prometheus_url: str | None
    kubernetes_version: str
    seam: ClusterSeam
    started_sim: bool = False  # this process started the sim, so it stops it at the end
    admin: client.ApiClient | None = None  # the sim admin's, where the runner runs as its own ServiceAccount
    on_sim: bool = False  # its API server is this user's sim, however reached (also another identity's kubeconfig)
    gpus_simulated: bool = False  # every GPU node is labelled simulated (kind/up.sh's and kind/here.sh's)

    @property
    def features(self) -> Features:
        features = features_of(self.kind, self.context, self.on_sim)
        return replace(features, simulated_gpus=True) if self.gpus_simulated else features

    @property
    def admin_api(self) -> client.ApiClient:
        """The client of set-up that belongs to the target itself, never to a case's measurement: the sim's queue
        model, its nodes, the join of its worker sims. The sim admin's where the runner has an identity of its
        own; elsewhere the runner's (on a real cluster such set-up is an admin's step, or not the harness's)."""
        return self.admin or self.api

    def as_admin(self) -> Target:
        """This target with the admin's client (admin_api) for code that takes a Target."""
        return replace(self, api=self.admin) if self.admin is not None else self

    @property
    def host(self) -> str:
        return str(self.api.configuration.host)

    # What the sim does by its processes; a cluster's answers come through its API (or it has none: None, []).
    def controllers_down(self, names: tuple[str, ...]) -> list[str]:
        """Those of the sim's processes `names` that are not running; [] on a cluster (its controllers are
        Deployments, asked through the API by whoever needs them)."""
        return sim.controllers_down(names) if self.on_sim else []

    def audit_log(self) -> tuple[Path, list[str]] | None:
        """The API server's audit log file and the arguments it was started with, where the harness runs it."""
        if not self.features.audit_log_file:
            return None
        return sim.audit_log(), sim.component_argv("kube-apiserver")

    def add_gpu_nodes(self, count: int, gpus_per_node: int, timeout_s: float) -> list[str]:
        """`count` simulated GPU nodes, Ready (as the admin: the sim's own nodes); their names."""
        if not self.features.adds_nodes:
            raise HarnessError(f"{self.context}: nodes are not added here; the cluster runs on the nodes it has")
        added: list[str] = sim.add_nodes(client.CoreV1Api(self.admin_api), count, sim.GpuSpec(count=gpus_per_node),
                                         dra_devices=False)
        sim.wait_nodes_ready(client.CoreV1Api(self.api), added, timeout_s=timeout_s)
        return added

    def remove_nodes(self, names: list[str]) -> None:
        sim.remove_nodes(client.CoreV1Api(self.admin_api), names)

    def data_plane(self) -> DataPlane | None:
        """The sim's data plane, when it runs one (`gpupoc sim up --no-serving` does not); None on a cluster, whose
        Services are reached through the profile's inference URL."""
        name = sim.data_plane_netns() if self.on_sim else None
        if not name or not sim.netns_exists(name):
            return None
        port = sim.kube_proxy_metrics_port()
        return DataPlane(name, lambda: sim.enter_netns_for_exec(name),
                         f"http://127.0.0.1:{port}/metrics" if port else None)

    def slurm_site(self) -> SlurmSite | None:
        """The sim's Slurm, when the sim runs one and is this target."""
        return sim.slurm_site(self.host) if self.on_sim else None

    @contextmanager
    def worker_clusters(self, count: int, gpus_per_node: int) -> Iterator[Any]:
        """`count` clusters beside this one for the multicluster case: worker sims, made and removed here."""
        if not self.features.own_processes:
            raise HarnessError(f"{self.context}: worker clusters are made only beside the sim")
        with sim.worker_sims(count, gpus_per_node) as sims:
            yield sims

    def component_versions(self) -> list[tuple[str, str]]:
        """(name, version) of the sim's components; [] elsewhere (a cluster's are read from its Deployments)."""
        return sim.versions() if self.features.own_processes else []

    def component_checks(self) -> list[tuple[str, Callable[[], str | None]]]:
        """(name, its problem now or None) of each of the sim's processes; [] elsewhere."""
        if not self.features.own_processes:
            return []
        return [(name, functools.partial(sim.component_problem, name)) for name in sim.component_names()]

    def faults_injected(self) -> list[dict[str, Any]]:
        return list(sim.faults_injected()) if self.features.own_processes else []

    def stop_if_started(self) -> None:
        """The sim this process started, brought down at the end of the run."""
        if self.started_sim:
            sim.down(say=lambda _: None)


def _api_for(cfg: RunConfig) -> tuple[str, str, client.ApiClient, bool]:
    if cfg.kubeconfig is not None:
        context = cfg.context or kubeconfig_contexts(cfg.kubeconfig)[1]  # resolve() checked it is there
        try:
            api = kube_config.new_client_from_config(str(cfg.kubeconfig), context=context)
            return "kubeconfig", str(context), api, False
        except ConfigException as exc:
            raise ConfigError(f"kubeconfig {cfg.kubeconfig}, context {context}: {exc}") from exc
    if in_cluster():
        return "in-cluster", IN_CLUSTER_CONTEXT, in_cluster_client(), False
    started = not sim.is_up()
    if started:
        sim.up(sim.SimConfig(), recover=False)  # never tear down a broken sim another run may be looking at
    return "sim", SIM_CONTEXT, sim.api_client(), started


def in_cluster_client(directory: Path | None = None) -> client.ApiClient:
    """The pod's own identity: its ServiceAccount token (re-read as the kubelet rotates it) and the cluster's CA."""
    where = directory or config.SERVICE_ACCOUNT_DIR
    configuration = client.Configuration()
    try:
        InClusterConfigLoader(token_filename=str(where / "token"), cert_filename=str(where / "ca.crt"),
                              try_refresh_token=True).load_and_set(configuration)
    except ConfigException as exc:
        raise ConfigError(f"in-cluster: {exc}; the pod needs its ServiceAccount token mounted "
                          "(automountServiceAccountToken) and KUBERNETES_SERVICE_HOST/PORT") from None
    return client.ApiClient(configuration)


def connect(cfg: RunConfig) -> Target:
    """Connect and check the API server answers; a clear error when it does not."""
    kind, context, api, started = _api_for(cfg)
    try:
        version = client.VersionApi(api).get_code(_request_timeout=API_PROBE_TIMEOUT_S).git_version
    except client.ApiException as exc:
        if exc.status in (HTTP_UNAUTHORIZED, HTTP_FORBIDDEN):
            raise ConfigError(f"API server {api.configuration.host} (context {context}) refuses the credentials: "
                              f"{exc.status} {exc.reason}; the token or client certificate is wrong or expired: "
                              "refresh the kubeconfig (or the ServiceAccount's token)") from None
        raise HarnessError(f"API server {api.configuration.host} (context {context}) answered {exc.status} "
                           f"{exc.reason} to GET /version; check that the kubeconfig points at a Kubernetes API "
                           "server") from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise HarnessError(f"API server {api.configuration.host} (context {context}) is unreachable: "
                           f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}; "
                           "check that the cluster is running and the kubeconfig points at it") from exc
    timeouts = cfg.profile.timeouts  # the probe above fails fast; from here on every request goes through the seam
    admin = None
    if kind == "sim" and cfg.as_runner:
        admin, api = api, runner_client(api, cfg.profile, cfg.run_lock, _csv_env(ROLE_DROP_ENV),
                                        make_namespaces=cfg.apply_queue_model)
    seam = ClusterSeam(api, timeouts.request, timeouts.retry_budget, cfg.kubeconfig)
    prometheus = cfg.prometheus_url or cfg.profile.prometheus_url or (sim.prometheus_url() if features_of(kind, context).own_processes else None)
    return Target(kind, context, seam.api, prometheus, str(version), seam, started, admin,
                  on_sim=kind == "sim" or sim.is_the_sim(api), gpus_simulated=kind != "sim" and gpus_simulated(api))


def gpus_simulated(api: client.ApiClient) -> bool:
    """The cluster's GPU nodes all say their GPUs are simulated (gpupoc.io/simulated=true: kind with capacity
    patched in): then no driver is asked for and no DCGM exporter, as on the sim. False when nodes cannot be read."""
    try:
        response = client.CoreV1Api(api).list_node(_preload_content=False, _request_timeout=API_PROBE_TIMEOUT_S)
    except (client.ApiException, urllib3.exceptions.HTTPError, OSError):
        return False
    inventory = gpu_inventory(json.loads(response.data).get("items", []))
    return bool(inventory) and all(node.simulated for node in inventory)


def _csv_env(name: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in os.environ.get(name, "").split(",") if v.strip())

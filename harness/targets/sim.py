"""The sim as a target: the one door through which the rest of the harness reaches `harness/sim/`.

Everything outside `harness/sim/` that needs the simulated cluster (bringing it up, its processes, its nodes,
its network namespace, its Slurm) asks here, so what the sim is made of can change behind this surface. Code
that only needs to know whether the run is on the sim asks its `Target`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kubernetes import client

from harness.jobs.slurm.system import SlurmSite
from harness.sim import netns as _netns
from harness.sim.build import build
from harness.sim.cluster import (api_client, component_argv, component_names, component_problem, data_plane_netns, down,
                                 faults_injected, freeze_component, is_up, layout, prometheus_url, recorded_state,
                                 real_node_cpu_isolation, restart_component, running_components, start_component,
                                 started_with_extra_args,
                                 status, stop_component, up, versions)
from harness.sim.config import (DEFAULT_CUDA_VERSION, DEFAULT_DRIVER_VERSION, DEFAULT_GPU_PRODUCT,
                                DEFAULT_GPUS_PER_NODE, DEFAULT_NODES, PORT_BASE_ENV, SCHEDULERS_ENV, GpuSpec, SimConfig,
                                parse_schedulers, ports_from_env, schedulers_from_env)
from harness.sim.nodes import add_nodes, remove_nodes, simulated_node_names, wait_nodes_ready
from harness.sim.slurm import daemons as _slurm
from harness.sim import releases as _releases
from harness.sim import standin as _standin
from harness.sim.worker_sims import worker_sims
from harness.config.versions import Pins, load_pins

__all__ = ["DEFAULT_CUDA_VERSION", "DEFAULT_DRIVER_VERSION", "DEFAULT_GPU_PRODUCT", "DEFAULT_GPUS_PER_NODE",
           "DEFAULT_NODES", "GpuSpec", "Pins", "PORT_BASE_ENV", "SCHEDULERS_ENV", "SimConfig", "add_nodes",
           "api_client", "audit_log",
           "build", "component_argv", "component_names", "component_problem", "controllers_down", "data_plane_netns",
           "down", "enter_netns_for_exec", "install_release", "apply_release_crds", "releases_of", "running_release",
           "start_release", "stop_release", "faults_injected", "freeze_component", "is_the_sim", "is_up",
           "kube_proxy_metrics_port", "load_pins", "netns_exists", "parse_schedulers", "schedulers_from_env",
           "prometheus_url", "real_node_cpu_isolation", "remove_nodes", "restart_component", "simulated_node_names",
           "serve_model_server_standin", "standin_arguments", "slurm_apply_reference_model", "slurm_ranking_from_zero",
           "slurm_site", "start_component", "started_with_extra_args", "status", "stop_component", "up", "versions",
           "wait_nodes_ready", "worker_sims"]


def is_the_sim(api: client.ApiClient) -> bool:
    """Whether `api` talks to this user's running sim."""
    if not layout().kubeconfig.exists():
        return False
    return bool(api.configuration.host == api_client().configuration.host)


def controllers_down(names: tuple[str, ...]) -> list[str]:
    """Those of the sim's processes `names` that are not running."""
    running = running_components(layout())
    return [name for name in names if not running.get(name)]


def audit_log() -> Path:
    return layout().audit_log


def kube_proxy_metrics_port() -> int:
    return ports_from_env().kube_proxy_metrics


def netns_exists(name: str) -> bool:
    return _netns.exists(name)


def enter_netns_for_exec(name: str) -> None:
    _netns.enter_for_exec(name)


def slurm_site(api_host: str) -> SlurmSite | None:
    """The sim's Slurm, when the sim runs one and is the target (its API server is at `api_host`)."""
    lay = layout()
    state = recorded_state(lay)
    components, ports_of = state.get("components", {}), state.get("ports", {})
    if "slurmrestd" not in components or api_host != f"https://127.0.0.1:{ports_of.get('kube-apiserver')}":
        return None
    slurm_lay = _slurm.SlurmLayout(lay)
    ports = _slurm.SlurmPorts(ports_from_env().base)
    return SlurmSite(f"http://127.0.0.1:{ports.slurmrestd}", lambda user: _slurm.token(slurm_lay, user),
                     _slurm.PARTITION, gpu_type=_gpu_type_of(slurm_lay.conf),
                     fail_node=lambda node, reason: _slurm.fail_node(slurm_lay, node, reason),
                     end_jobs=_slurm.end_jobs, usage_from_zero=slurm_ranking_from_zero,
                     apply_model=slurm_apply_reference_model, topology=lambda: _slurm.topology_conf_of(slurm_lay))


def slurm_ranking_from_zero(accounts: list[str]) -> float:
    """The sim's Slurm accounts with no recorded usage (RawUsage=0), once slurmctld has ranked them on it; gives
    how often it ranks them (seconds)."""
    lay = _slurm.SlurmLayout(layout())
    _slurm.usage_from_zero(lay, accounts)
    return _slurm.ranking_period_s(lay)


def slurm_apply_reference_model(rows: list[dict[str, Any]], cluster_gpus: int) -> None:
    """The sim's Slurm accounts, users and QOS (sacctmgr, as the sim's Slurm administrator)."""
    _slurm.apply_reference_model(_slurm.SlurmLayout(layout()), rows, cluster_gpus)


def _gpu_type_of(conf: Path) -> str:
    for line in conf.read_text().splitlines():
        if line.startswith("NodeName=") and "Gres=gpu:" in line:
            return line.split("Gres=gpu:", 1)[1].split(":", 1)[0]
    return ""



standin_arguments = _standin.arguments
# A scheduler's releases on the sim (operations.upgrade): the one before the pinned one, and the pinned one.
releases_of = _releases.releases
running_release = _releases.running
install_release = _releases.install
stop_release = _releases.stop
apply_release_crds = _releases.apply_crds
start_release = _releases.start


def serve_model_server_standin(args: Any) -> None:
    """The sim's vLLM stand-in as this process's one server (`gpupoc standin`, in a container of its own) until
    SIGTERM or SIGINT; a bad setting raises ValueError naming it."""
    asyncio.run(_standin.serve(_standin.spec_from_arguments(args)))

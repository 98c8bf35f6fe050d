"""`gpupoc sim up | down | status`: run the sim's processes and its simulated GPU nodes."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from dataclasses import dataclass
from typing import Any

from kubernetes import client, config as kube_config

from harness.errors import SimError
from harness.sim import files, nodes, pki, procs, stack
from harness.sim.components import Component, Layout, control_plane
from harness.sim.config import SimConfig, ports_from_env
from harness.sim.paths import state_dir

START_TIMEOUT_S = 90.0
Say = Callable[[str], None]


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    pid: int
    running: bool
    healthy: bool
    version: str


def layout() -> Layout:
    return Layout(state_dir())


def _read_state(lay: Layout) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads(lay.state.read_text())
        return data
    except (OSError, ValueError):
        return None


def _write_state(lay: Layout, state: dict[str, Any]) -> None:
    lay.state.write_text(json.dumps(state, indent=2))


def api_client(lay: Layout | None = None) -> client.ApiClient:
    return kube_config.new_client_from_config(config_file=str((lay or layout()).kubeconfig))


def prometheus_url() -> str:
    return f"http://127.0.0.1:{ports_from_env().prometheus}"


def running_components(lay: Layout) -> dict[str, bool]:
    state = _read_state(lay) or {}
    return {name: procs.is_running(c["pid"], c["binary"]) for name, c in state.get("components", {}).items()}


def component_pid(name: str, lay: Layout | None = None) -> int | None:
    """The pid of a running component of the sim (for tests that freeze it), or None."""
    comp = ((_read_state(lay or layout()) or {}).get("components") or {}).get(name)
    return int(comp["pid"]) if comp and procs.is_running(comp["pid"], comp["binary"]) else None


def component_running(name: str, lay: Layout | None = None) -> bool:
    return bool(running_components(lay or layout()).get(name))


def is_up(lay: Layout | None = None) -> bool:
    alive = running_components(lay or layout())
    return bool(alive) and all(alive.values())


def _prepare_files(lay: Layout, cfg: SimConfig) -> None:
    """Fresh certificates, tokens, kubeconfigs and data directories for a new cluster."""
    for sub in (lay.data, lay.pki, lay.logs):
        shutil.rmtree(sub, ignore_errors=True)
        sub.mkdir(parents=True)
    ca = pki.make_ca(lay.pki)
    pki.make_serving_cert(ca, lay.pki, "kube-apiserver", dns=("localhost", "kubernetes", "kubernetes.default"))
    pki.make_signing_key(lay.pki / "service-account.key")
    tokens = files.new_tokens()
    files.write_private(lay.root / "tokens.csv", files.token_file(tokens))
    files.write_private(lay.root / "admin.token", tokens["gpupoc-admin"].value)
    files.write_private(lay.root / "prometheus.token", tokens["gpupoc-prometheus"].value)
    server = f"https://127.0.0.1:{cfg.ports.apiserver}"
    files.write_kubeconfig(lay.kubeconfig, files.kubeconfig(server, ca.cert, tokens["gpupoc-admin"]))
    for name, user in (("kube-controller-manager", "system:kube-controller-manager"),
                       ("kube-scheduler", "system:kube-scheduler"), ("kwok-controller", "gpupoc-kwok"),
                       ("kueue", "gpupoc-kueue"), ("volcano", "gpupoc-volcano"), ("kuberay", "gpupoc-kuberay"),
                       ("kube-state-metrics", "gpupoc-kube-state-metrics"), ("kai-scheduler", "gpupoc-kai-scheduler")):
        files.write_kubeconfig(lay.component_kubeconfig(name), files.kubeconfig(server, ca.cert, tokens[user]))
    token = lay.root / "prometheus.token"
    prom = files.prometheus_config(cfg.ports, token, stack.scrape_jobs(cfg.ports, cfg.schedulers, token))
    (lay.root / "prometheus.yml").write_text(json.dumps(prom, indent=2))
    stack.write_configs(lay, cfg.ports, cfg.schedulers)


def _check_ports(components: list[Component], extra: dict[str, int]) -> None:
    wanted = {c.name: c.port for c in components} | extra
    for name, port in wanted.items():
        if not procs.port_is_free(port):
            raise SimError(f"port {port} (for {name}) is in use by {procs.port_owner(port)}: stop it, "
                           f"or choose other ports with GPUPOC_SIM_PORT_BASE=<base>")


def wait_healthy(component: Component, pid: int, lay: Layout, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not procs.is_running(pid, component.binary):
            raise SimError(f"{component.name} exited during start-up (status {procs.exit_status(pid)}); last lines of "
                           f"{lay.log(component.name)}:\n{procs.log_tail(lay.log(component.name))}")
        if component.healthy():
            return
        time.sleep(0.2)
    raise SimError(f"{component.name} not healthy after {timeout_s:.0f}s ({component.health_url}); "
                   f"last lines of {lay.log(component.name)}:\n{procs.log_tail(lay.log(component.name))}")


CONTROL_PLANE_IN_ORDER = 2  # etcd and kube-apiserver start one after the other; the rest of the control plane together


def up(cfg: SimConfig, say: Say = print, start_timeout_s: float = START_TIMEOUT_S) -> bool:
    """Start the sim; False (and nothing changed) when it is already up."""
    lay = layout()
    alive = running_components(lay)
    if alive and all(alive.values()):
        say(f"sim is already up (kubeconfig: {lay.kubeconfig}); nothing changed")
        return False
    if any(alive.values()):
        dead = ", ".join(n for n, ok in alive.items() if not ok)
        raise SimError(f"sim is partly up ({dead} not running): run `gpupoc sim down`, then `gpupoc sim up`")
    lay.root.mkdir(parents=True, exist_ok=True)
    components = control_plane(lay, cfg.ports)
    scheduler_components = stack.components(lay, cfg.ports, cfg.schedulers)
    extra_ports = {"etcd peer": cfg.ports.etcd_peer} | stack.extra_ports(cfg.ports, cfg.schedulers)
    _check_ports(components + scheduler_components, extra_ports)
    started = time.monotonic()
    _prepare_files(lay, cfg)
    state: dict[str, Any] = {"components": {}, "ports": {c.name: c.port for c in components},
                             "kubeconfig": str(lay.kubeconfig), "prometheus_url": f"http://127.0.0.1:{cfg.ports.prometheus}",
                             "schedulers": list(cfg.schedulers), "started_at": time.time()}

    def launch(component: Component) -> int:
        pid = procs.start(list(component.argv), lay.log(component.name),
                          env={**os.environ, **dict(component.env)} if component.env else None)
        state["components"][component.name] = {
            "pid": pid, "binary": component.binary, "port": component.port, "health_url": component.health_url,
            "health_token": str(component.bearer_token_file) if component.bearer_token_file else None,
            "version": component.version()}
        state["ports"][component.name] = component.port
        _write_state(lay, state)
        return pid

    def start_together(group: list[Component]) -> None:
        """Start components that do not need each other at once, then wait for each to be healthy."""
        pids = [launch(component) for component in group]
        for component, pid in zip(group, pids):
            wait_healthy(component, pid, lay, start_timeout_s)
            say(f"  {component.name:<28} pid {pid:<7} healthy after {time.monotonic() - started:5.1f}s")

    try:
        for component in components[:CONTROL_PLANE_IN_ORDER]:  # etcd, then the API server that needs it
            start_together([component])
        start_together(components[CONTROL_PLANE_IN_ORDER:])  # the rest only need the API server
        api = api_client(lay)
        core = client.CoreV1Api(api)
        names = nodes.add_nodes(core, cfg.nodes, cfg.gpu)
        if cfg.schedulers:
            stack.install_crds(api, cfg.schedulers)
            if "kai" in cfg.schedulers:
                stack.create_kai_defaults(api)
            start_together(scheduler_components)  # independent controllers, each with its own port
            if "kueue" in cfg.schedulers:
                stack.register_kueue_webhooks(api, lay, cfg.ports)
        nodes.wait_nodes_ready(core, names)
    except BaseException:
        say("start-up failed: stopping what was started")
        down(say=lambda _: None)
        raise
    say(f"sim up in {time.monotonic() - started:.1f}s with {cfg.nodes} node(s) x {cfg.gpu.count} "
        f"{cfg.gpu.product}; schedulers: {', '.join(cfg.schedulers) or 'kube-scheduler only'}")
    say(f"kubeconfig: {lay.kubeconfig}")
    say(f"prometheus: {state['prometheus_url']}")
    return True


def down(say: Say = print) -> list[str]:
    """Stop exactly the processes `up` started, newest first; return what refused to stop."""
    lay = layout()
    state = _read_state(lay)
    if state is None:
        say("sim is not up; nothing to stop")
        return []
    refused = []
    for name, comp in reversed(list(state["components"].items())):
        if procs.stop(comp["pid"], comp["binary"]):
            say(f"  stopped {name} (pid {comp['pid']})")
        else:
            refused.append(f"{name} (pid {comp['pid']})")
    if refused:
        raise SimError(f"could not stop: {', '.join(refused)}; kill them by hand")
    lay.state.unlink(missing_ok=True)
    shutil.rmtree(lay.data, ignore_errors=True)
    return refused


def status(lay: Layout | None = None) -> list[ComponentStatus]:
    lay = lay or layout()
    state = _read_state(lay)
    if state is None:
        return []
    result = []
    for name, comp in state["components"].items():
        token = comp.get("health_token")
        component = Component(name, (comp["binary"],), comp["health_url"], comp["port"],
                              bearer_token_file=Path(token) if token else None)
        running = procs.is_running(comp["pid"], comp["binary"])
        result.append(ComponentStatus(name, comp["pid"], running, running and component.healthy(),
                                      comp.get("version", "unknown")))
    return result

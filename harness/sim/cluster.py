"""`gpupoc sim up | down | status`: run the sim's processes and its simulated GPU nodes."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from dataclasses import dataclass
from typing import Any

from kubernetes import client, config as kube_config

from harness.core.errors import ConfigError, SimError
from harness.sim import (files, images, karpenter, nodes, pki, procs, realnode_teardown, realnodes,
                         serving_stack as serving, stack, netns)
from harness.core import paths
from harness.sim.slurm import daemons as slurm
from harness.sim.components import POD_CIDR, Component, Layout, control_plane
from harness.sim.config import SimConfig, ports_from_env
from harness.core.paths import state_dir

START_TIMEOUT_S = 90.0
Say = Callable[[str], None]


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    pid: int
    running: bool
    healthy: bool
    version: str
    frozen: bool = False
    stopped_by_user: bool = False


def layout() -> Layout:
    return Layout(state_dir())


def _read_state(lay: Layout) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads(lay.state.read_text())
        return data
    except (OSError, ValueError):
        return None


def recorded_state(lay: Layout) -> dict[str, Any]:
    """What `up` recorded of the running sim (components, ports); empty when it is down."""
    return _read_state(lay) or {}


def _write_state(lay: Layout, state: dict[str, Any]) -> None:
    """Atomically: a reader never sees a half-written state (it would think the sim is down)."""
    tmp = lay.state.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(state, indent=2))
    os.replace(tmp, lay.state)


def api_client(lay: Layout | None = None) -> client.ApiClient:
    return kube_config.new_client_from_config(config_file=str((lay or layout()).kubeconfig))


def prometheus_url() -> str:
    return f"http://127.0.0.1:{ports_from_env().prometheus}"


def _component_state(component: Component, pid: int) -> dict[str, Any]:
    """What the state file keeps of a started component: enough to probe it, stop it and start it again."""
    return {"pid": pid, "binary": component.binary, "argv": list(component.argv), "env": dict(component.env),
            "netns": component.netns, "prefix": list(component.prefix),
            "port": component.port, "health_url": component.health_url,
            "health_token": str(component.bearer_token_file) if component.bearer_token_file else None,
            "version": component.version(), "stopped_by_user": False}


def running_components(lay: Layout, include_stopped: bool = True) -> dict[str, bool]:
    """name -> running, for each component `up` started (those a user stopped on purpose left out unless asked)."""
    state = _read_state(lay) or {}
    return {name: procs.is_running(c["pid"], c["binary"]) for name, c in state.get("components", {}).items()
            if include_stopped or not c.get("stopped_by_user")}


def component_running(name: str, lay: Layout | None = None) -> bool:
    return bool(running_components(lay or layout()).get(name))


def is_up(lay: Layout | None = None) -> bool:
    """The sim is up: every component runs, except those a user stopped on purpose (`gpupoc sim stop`)."""
    alive = running_components(lay or layout(), include_stopped=False)
    return bool(alive) and all(alive.values())


def _prepare_files(lay: Layout, cfg: SimConfig, real: list[realnodes.RealNode]) -> None:
    """Fresh certificates, tokens, kubeconfigs and data directories for a new cluster."""
    for sub in (lay.data, lay.pki, lay.logs):
        shutil.rmtree(sub, ignore_errors=True)
        sub.mkdir(parents=True)
    ca = pki.make_ca(lay.pki)
    pki.make_serving_cert(ca, lay.pki, "kube-apiserver", dns=("localhost", "kubernetes", "kubernetes.default"))
    pki.make_signing_key(lay.pki / "service-account.key")
    pki.make_client_cert(ca, lay.pki, "front-proxy-client", "front-proxy-client")
    tokens = files.new_tokens()
    files.write_private(lay.root / "tokens.csv", files.token_file(tokens))
    shutil.copyfile(paths.SIM_RECIPES / "audit-policy.yaml", lay.audit_policy)
    files.write_private(lay.root / "admin.token", tokens["gpupoc-admin"].value)
    files.write_private(lay.root / "prometheus.token", tokens["gpupoc-prometheus"].value)
    server = f"https://127.0.0.1:{cfg.ports.apiserver}"
    files.write_kubeconfig(lay.kubeconfig, files.kubeconfig(server, ca.cert, tokens["gpupoc-admin"]))
    for name, user in (("kube-controller-manager", "system:kube-controller-manager"),
                       ("kube-scheduler", "system:kube-scheduler"), ("kwok-controller", "gpupoc-kwok"),
                       ("kueue", "gpupoc-kueue"), ("volcano", "gpupoc-volcano"), ("kuberay", "gpupoc-kuberay"),
                       ("kube-state-metrics", "gpupoc-kube-state-metrics"), ("kai-scheduler", "gpupoc-kai-scheduler"),
                       ("karpenter", "gpupoc-karpenter"),
                       ("kube-proxy", "system:kube-proxy"), ("dataplane", "gpupoc-dataplane"),
                       ("metrics-adapter", "gpupoc-metrics-adapter")):
        files.write_kubeconfig(lay.component_kubeconfig(name), files.kubeconfig(server, ca.cert, tokens[user]))
    token = lay.root / "prometheus.token"
    jobs = stack.scrape_jobs(cfg.ports, cfg.schedulers, token)
    if "slurm" in cfg.schedulers:
        jobs.append(slurm.scrape_job(slurm.SlurmPorts(cfg.ports.base)))
    if cfg.serving:
        jobs += serving.scrape_jobs(lay, cfg.ports)
        serving.prepare(lay, cfg.ports, realnodes.relays(real, cfg.ports, serving.netns_name(cfg.ports)),
                        realnodes.egress_socket(lay) if real else None)
    if real:
        _prepare_real_nodes(lay, cfg, real)
    prom = files.prometheus_config(cfg.ports, token, jobs, cfg.nodes)
    (lay.root / "prometheus.yml").write_text(json.dumps(prom, indent=2))
    stack.write_configs(lay, cfg.ports, cfg.schedulers)
    if "karpenter" in cfg.schedulers:
        karpenter.write_config(lay, cfg.gpu)


def _prepare_real_nodes(lay: Layout, cfg: SimConfig, real: list[realnodes.RealNode]) -> None:
    """Their files, addresses in the sim's namespace and cgroups; the API server's egress to them."""
    realnodes.prepare(lay, cfg.ports, real)
    (lay.root / "egress-selector.yaml").write_text(json.dumps(realnodes.egress_selector_config(
        realnodes.egress_socket(lay))))
    realnodes.add_addresses(serving.netns_name(cfg.ports), real)
    realnodes.make_cgroups(real)
    realnodes.make_mount_namespaces(real)
    images.node_images(paths.bin_dir() / "gpupoc-pause")


def _real_node_state(real: list[realnodes.RealNode]) -> dict[str, Any]:
    """What `down` needs to leave nothing of the real nodes behind (realnode_teardown.py)."""
    return {"nodes": [{"name": n.name, "root": str(n.root), "socket": str(n.containerd_socket),
                       "pod_logs": str(n.pod_logs)} for n in real],
            "cgroup_parent": real[0].cgroup_parent if real else None, "sysctls": realnodes.read_sysctls(),
            "dir": str(real[0].root.parent) if real else None,
            "mount_namespaces": [str(n.mount_ns) for n in real]}


def _check_ports(components: list[Component], extra: dict[str, int]) -> None:
    wanted = {c.name: c.port for c in components} | extra
    for name, port in wanted.items():
        if not procs.port_is_free(port):
            raise SimError(f"port {port} (for {name}) is in use by {procs.port_owner(port)}: stop it, "
                           f"or choose other ports with GPUPOC_SIM_PORT_BASE=<base>")


def wait_healthy(component: Component, pid: int, lay: Layout, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not procs.is_running(pid, component.binary) and procs.has_exited(pid):  # (a `nice` prefix: not yet exec'd)
            raise SimError(f"{component.name} exited during start-up (status {procs.exit_status(pid)}); last lines of "
                           f"{lay.log(component.name)}:\n{procs.log_tail(lay.log(component.name))}")
        if component.healthy():
            return
        time.sleep(0.2)
    raise SimError(f"{component.name} not healthy after {timeout_s:.0f}s ({component.health_url}); "
                   f"last lines of {lay.log(component.name)}:\n{procs.log_tail(lay.log(component.name))}")


CONTROL_PLANE_IN_ORDER = 2  # etcd and kube-apiserver start one after the other; the rest of the control plane together
# kube-controller-manager's garbage collector and quota monitors learn the API's resources when they start, then
# every 30 s (fixed in kube-controller-manager): started before the schedulers' CRDs exist, it left a deleted
# RayCluster's pods, and their GPUs, in place for up to 30 s. It starts once the CRDs are in.
AFTER_THE_CRDS = ("kube-controller-manager",)


def up(cfg: SimConfig, say: Say = print, start_timeout_s: float = START_TIMEOUT_S, recover: bool = True) -> bool:
    """Start the sim; False (and nothing changed) when it is already up. A sim left broken by a crash is
    stopped and started afresh when `recover` (`gpupoc sim up`); else (a run connecting) that is an error."""
    lay = layout()
    state_before = _read_state(lay) or {}
    alive = running_components(lay)
    stopped = [n for n, c in state_before.get("components", {}).items() if c.get("stopped_by_user")]
    if alive and all(ok for n, ok in alive.items() if n not in stopped):
        hint = f"; stopped on purpose: {', '.join(stopped)} (`gpupoc sim start NAME`)" if stopped else ""
        say(f"sim is already up (kubeconfig: {lay.kubeconfig}); nothing changed{hint}")
        return False
    if alive and not any(alive.values()):  # a reboot: the state outlived every process; nobody can be using it
        say("sim's state outlived its processes (a reboot?): clearing what is left and starting afresh")
        down(say=lambda _: None)
    elif alive:  # a crash (kill -9, a component that died): clear what is left, then start afresh
        dead = ", ".join(n for n, ok in alive.items() if not ok)
        if not recover:
            raise SimError(f"sim is partly up ({dead} not running): `gpupoc sim up` restarts it afresh, "
                           f"`gpupoc sim start NAME` starts one component")
        say(f"sim was left broken ({dead} not running): stopping what is left and starting afresh")
        down(say=lambda _: None)
    lay.root.mkdir(parents=True, exist_ok=True)
    if cfg.serving and cfg.nodes == 0:  # no pod to serve; kube-proxy would wait 30 s for a node of its own
        say("no nodes: the data plane (kube-proxy, model-server stand-ins, metrics adapter) is left out")
        cfg = dataclasses.replace(cfg, serving=False)
    real = realnodes.real_nodes(cfg.ports, cfg.real_nodes)
    if real:
        realnodes.check_host(cfg.real_nodes)
    components = control_plane(lay, cfg.ports, realnodes.apiserver_args(lay) if real else ())
    scheduler_components = stack.components(lay, cfg.ports, cfg.schedulers,
                                            serving.netns_name(cfg.ports) if cfg.serving else None)
    if cfg.serving:
        # the real nodes' pods (10.245.0.0/16) are the cluster's too: kube-proxy masquerades what comes from outside
        data_plane, *late = serving.components(lay, cfg.ports, "10.244.0.0/15" if real else POD_CIDR)
        components.append(data_plane)
        scheduler_components += late
    slurm_ports = slurm.SlurmPorts(cfg.ports.base)
    slurm_groups = slurm.components(lay, slurm_ports, cfg.nodes) if "slurm" in cfg.schedulers else []
    extra_ports = {"etcd peer": cfg.ports.etcd_peer} | stack.extra_ports(cfg.ports, cfg.schedulers)
    if cfg.serving:
        extra_ports |= serving.extra_ports(cfg.ports)
    _check_ports(components + scheduler_components + [c for group in slurm_groups for c in group], extra_ports)
    started = time.monotonic()
    _prepare_files(lay, cfg, real)
    if slurm_groups:
        slurm.prepare(slurm.SlurmLayout(lay), slurm_ports, cfg.nodes, cfg.gpu.count, cfg.gpu.product)
    state: dict[str, Any] = {"components": {}, "ports": {c.name: c.port for c in components},
                             "kubeconfig": str(lay.kubeconfig), "prometheus_url": f"http://127.0.0.1:{cfg.ports.prometheus}",
                             "schedulers": list(cfg.schedulers), "started_at": time.time(),
                             "netns": serving.netns_name(cfg.ports) if cfg.serving else None}
    if real:
        state["real_nodes"] = _real_node_state(real)

    writing = threading.Lock()  # Slurm starts on a thread of its own, beside the Kubernetes side

    def launch(component: Component) -> int:
        pid = procs.start([*component.prefix, *component.argv], lay.log(component.name),
                          env=component.environment(),
                          netns_name=component.netns)
        with writing:
            state["components"][component.name] = _component_state(component, pid)
            state["ports"][component.name] = component.port
            _write_state(lay, state)
        return pid

    def start_together(group: list[Component]) -> None:
        """Start components that do not need each other at once, then wait for each to be healthy."""
        pids = [launch(component) for component in group]
        for component, pid in zip(group, pids):
            wait_healthy(component, pid, lay, start_timeout_s)
            say(f"  {component.name:<28} pid {pid:<7} healthy after {time.monotonic() - started:5.1f}s")

    slurm_failed: list[BaseException] = []

    stopping = threading.Event()

    def start_slurm() -> None:
        try:
            slurm.init_database(slurm.SlurmLayout(lay))
            for group in slurm_groups:
                if stopping.is_set():
                    return
                if group[0].name == "slurmctld":
                    slurm.register_cluster(slurm.SlurmLayout(lay))
                start_together(group)
            slurm.wait_nodes_idle(slurm.SlurmLayout(lay), cfg.nodes, start_timeout_s)
        except BaseException as exc:  # raised on the main thread after the join
            slurm_failed.append(exc)

    slurm_thread = threading.Thread(target=start_slurm, name="sim-slurm", daemon=True)
    try:
        if slurm_groups:
            slurm_thread.start()
        for component in components[:CONTROL_PLANE_IN_ORDER]:  # etcd, then the API server that needs it
            start_together([component])
        api = api_client(lay)
        core = client.CoreV1Api(api)
        names: list[str] = []
        # the nodes and the schedulers' CRDs only need the API server: they go in while the rest of the control
        # plane starts (the CRDs' schemas take the API server seconds to establish)
        objects_failed: list[BaseException] = []

        def create_objects() -> None:
            try:
                names.extend(nodes.add_nodes(core, cfg.nodes, cfg.gpu))
                if cfg.schedulers:
                    stack.install_crds(api, cfg.schedulers)
                    if "kai" in cfg.schedulers:
                        stack.create_kai_defaults(api)
                say(f"  {'nodes and CRDs':<28} {'':<11} created after {time.monotonic() - started:5.1f}s")
            except BaseException as exc:  # raised on the main thread after the join
                objects_failed.append(exc)

        objects_thread = threading.Thread(target=create_objects, name="sim-objects", daemon=True)
        objects_thread.start()
        rest = components[CONTROL_PLANE_IN_ORDER:]
        start_together([c for c in rest if c.name not in AFTER_THE_CRDS])  # the rest only need the API server
        objects_thread.join(start_timeout_s * 2)
        if objects_failed:
            raise objects_failed[0]
        if objects_thread.is_alive():
            raise SimError(f"nodes and CRDs not created after {start_timeout_s * 2:.0f}s")
        scheduler_components = [c for c in rest if c.name in AFTER_THE_CRDS] + scheduler_components
        if real:
            realnodes.node_rbac(api)
            netns_name = serving.netns_name(cfg.ports)
            start_together([realnodes.containerd_component(n, netns_name) for n in real])
            archives = images.node_images(paths.bin_dir() / "gpupoc-pause")
            for node in real:
                images.import_into(node.containerd_socket, archives)
            say(f"  {'images imported':<28} {'':<11} after {time.monotonic() - started:5.1f}s")
            start_together([realnodes.kubelet_component(n, cfg.ports, netns_name, realnodes.node_labels(cfg.gpu))
                            for n in real])
            start_together([realnodes.device_plugin_component(n, netns_name, cfg.gpu.count) for n in real])
        start_together(scheduler_components)  # independent controllers (and kube-proxy), each with its own port
        if "kueue" in cfg.schedulers:
            stack.register_kueue_webhooks(api, lay, cfg.ports)
        if "kai" in cfg.schedulers:
            stack.register_kai_webhooks(api, lay, cfg.ports)
        if "karpenter" in cfg.schedulers:
            karpenter.create_pool(api, cfg.gpu)
        if cfg.serving:
            serving.register_adapter(api, lay, cfg.ports)
        nodes.wait_nodes_ready(core, names)
        if real:
            nodes.wait_nodes_ready(core, [n.name for n in real], label_selector=f"{realnodes.LABEL}=true",
                                   hint=f"see {lay.logs}/kubelet-{realnodes.NAME_PREFIX}*.log")
            say(f"  {'real nodes':<28} {'':<11} Ready after {time.monotonic() - started:5.1f}s")
            realnodes.wait_gpus_allocatable(core, real, cfg.gpu.count)
            say(f"  {'real nodes GPUs':<28} {'':<11} allocatable after {time.monotonic() - started:5.1f}s")
        if slurm_groups:
            slurm_thread.join(start_timeout_s * 2)
            if slurm_failed:
                raise slurm_failed[0]
            if slurm_thread.is_alive():
                raise SimError(f"Slurm not up after {start_timeout_s * 2:.0f}s; see {lay.logs}/slurm*.log")
            slurm.end_start_niceness(state["components"], [c.name for group in slurm_groups for c in group])
    except BaseException:
        stopping.set()  # Slurm's thread launches nothing more
        if slurm_thread.is_alive():
            slurm_thread.join(start_timeout_s)
        say("start-up failed: stopping what was started")
        down(say=lambda _: None)
        raise
    real_note = f" and {cfg.real_nodes} real node(s)" if real else ""
    say(f"sim up in {time.monotonic() - started:.1f}s with {cfg.nodes} node(s) x {cfg.gpu.count} "
        f"{cfg.gpu.product}{real_note}; schedulers: {', '.join(cfg.schedulers) or 'kube-scheduler only'}")
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
    ctld = state["components"].get("slurmctld")
    if ctld and procs.is_running(ctld["pid"], ctld["binary"]):
        procs.thaw(ctld["pid"], ctld["binary"])
        slurm.cancel_all(slurm.SlurmLayout(lay))  # no batch script outlives its slurmd
    left_behind: list[str] = []
    if state.get("real_nodes"):  # first, while the API server and the data plane still run
        left_behind = realnode_teardown.teardown(state["real_nodes"], state["components"], say)
    for name, comp in reversed(list(state["components"].items())):
        procs.thaw(comp["pid"], comp["binary"])  # a frozen process cannot act on SIGTERM
        if procs.stop(comp["pid"], comp["binary"]):
            say(f"  stopped {name} (pid {comp['pid']})")
        else:
            refused.append(f"{name} (pid {comp['pid']})")
    if refused:
        raise SimError(f"could not stop: {', '.join(refused)}; kill them by hand")
    if "slurmctld" in state["components"]:
        slurm.remove_runtime_files(slurm.SlurmLayout(lay))
    name = state.get("netns") or serving.netns_name(ports_from_env())
    if netns.exists(name):
        netns.delete(name)
        say(f"  removed network namespace {name}")
    lay.state.unlink(missing_ok=True)
    shutil.rmtree(lay.data, ignore_errors=True)
    if left_behind:
        raise SimError(f"the real nodes left behind: {', '.join(left_behind)}; remove them by hand")
    return refused


def _component(name: str, lay: Layout) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the state, this component's entry); a clear error when the sim is down or the name unknown."""
    state = _read_state(lay)
    if state is None:
        raise SimError("sim is not up: run `gpupoc sim up` first")
    if name not in state["components"]:
        raise ConfigError(f"no sim component {name!r}; the sim runs: {', '.join(state['components'])}")
    return state, state["components"][name]


def _as_component(name: str, comp: dict[str, Any]) -> Component:
    token = comp.get("health_token")
    return Component(name, tuple(comp.get("argv") or (comp["binary"],)), comp["health_url"], comp["port"],
                     bearer_token_file=Path(token) if token else None, known_version=comp.get("version"),
                     env=tuple((comp.get("env") or {}).items()), netns=comp.get("netns"),
                     prefix=tuple(comp.get("prefix") or ()))


def stop_component(name: str, say: Say = print) -> None:
    """Stop one component (a fault injected on purpose); `sim up` leaves it stopped, `sim start` brings it back."""
    lay = layout()
    state, comp = _component(name, lay)
    procs.thaw(comp["pid"], comp["binary"])  # a frozen process cannot act on SIGTERM
    comp["stopped_by_user"] = True  # written first: whoever looks meanwhile sees a stop on purpose, not a crash
    state.setdefault("faults", []).append({"component": name, "problem": "stopped on purpose (`gpupoc sim stop`)",
                                           "from": time.time(), "to": None})
    _write_state(lay, state)
    if not procs.stop(comp["pid"], comp["binary"]):
        raise SimError(f"{name} (pid {comp['pid']}) refused to stop; kill it by hand")
    say(f"stopped {name} (pid {comp['pid']})")


def start_component(name: str, say: Say = print, timeout_s: float = START_TIMEOUT_S,
                    argv: tuple[str, ...] | None = None, version: str | None = None) -> int:
    """Start a stopped component again with the arguments `up` gave it, or with `argv` from now on (a
    misconfiguration on purpose, until started again with its own; another release of it when its program differs,
    `version` then saying which); thaw a frozen one. Its new pid."""
    lay = layout()
    state, comp = _component(name, lay)
    if argv is not None:
        comp["argv"] = list(argv)
        if not procs.is_running(comp["pid"], comp["binary"]):
            comp["binary"] = argv[0]  # what the process runs: how a later probe knows it is ours
    if version is not None:
        comp["version"] = version
    if procs.is_running(comp["pid"], comp["binary"]):
        thawed = procs.thaw(comp["pid"], comp["binary"])
        _end_fault(lay, name)
        say(f"thawed {name} (pid {comp['pid']})" if thawed else f"{name} is already running (pid {comp['pid']})")
        return int(comp["pid"])
    if not comp.get("argv"):
        raise SimError(f"the sim was started by an older gpupoc that did not keep {name}'s arguments: "
                       "run `gpupoc sim down`, then `gpupoc sim up`")
    component = _as_component(name, comp)
    pid = procs.start([*component.prefix, *component.argv], lay.log(name), env=component.environment(),
                      netns_name=component.netns)
    comp.update(pid=pid, stopped_by_user=False)
    _write_state(lay, state)
    try:
        wait_healthy(component, pid, lay, timeout_s)
    finally:  # healthy or not, the fault injected on purpose is over; a component that stays down is sampled
        _end_fault(lay, name)
    say(f"started {name} (pid {pid})")
    return pid


@contextmanager
def started_with_extra_args(name: str, *extra: str, say: Say = print) -> Iterator[None]:
    """The component restarted with `extra` arguments for the block (a misconfiguration on purpose), then with its
    own again, whatever the block did."""
    argv = tuple(component_argv(name))
    stop_component(name, say)
    start_component(name, say, argv=(*argv, *extra))
    try:
        yield
    finally:
        stop_component(name, say)
        start_component(name, say, argv=argv)


def real_node_cpu_isolation(on: bool, say: Say = print) -> None:
    """Restart the real nodes' kubelets with their CPU isolation (the static CPU manager, CFS quota) as `up` started
    them, or without it (`on=False`: no CPU manager, no CFS quota; a misconfiguration on purpose). Their running
    containers stay; pods started from now on are placed and limited the new way."""
    nodes = ((_read_state(layout()) or {}).get("real_nodes") or {}).get("nodes") or []
    if not nodes:
        raise SimError("the sim has no real nodes: `gpupoc sim up --real-nodes N` starts some")
    for node in nodes:
        name = f"kubelet-{node['name']}"
        argv = tuple(a for a in component_argv(name) if a not in realnodes.CPU_ISOLATION_OFF)
        stop_component(name, say)
        (Path(node["root"]) / "kubelet" / realnodes.CPU_MANAGER_STATE).unlink(missing_ok=True)
        start_component(name, say, argv=argv if on else (*argv, *realnodes.CPU_ISOLATION_OFF))
    say(f"real nodes' CPU isolation {'on (static CPU manager, CFS quota)' if on else 'off (no CPU manager, no CFS quota)'}")


def restart_component(name: str, say: Say = print) -> int:
    stop_component(name, say)
    return start_component(name, say)


def freeze_component(name: str, seconds: float, say: Say = print) -> None:
    """SIGSTOP one component for `seconds` (it keeps its sockets open but answers nothing), then SIGCONT;
    thawed on Ctrl-C too."""
    if seconds <= 0:
        raise ConfigError(f"--for must be a positive number of seconds, got {seconds:g}")
    _, comp = _component(name, layout())
    if not procs.is_running(comp["pid"], comp["binary"]):
        raise SimError(f"{name} is not running: nothing to freeze (`gpupoc sim start {name}`)")
    os.kill(comp["pid"], signal.SIGSTOP)
    lay = layout()
    state = _read_state(lay) or {}
    state.setdefault("faults", []).append({"component": name, "problem": "frozen on purpose (`gpupoc sim freeze`)",
                                           "from": time.time(), "to": None})
    _write_state(lay, state)
    say(f"froze {name} (pid {comp['pid']}) for {seconds:g}s")
    try:
        time.sleep(seconds)
    finally:
        os.kill(comp["pid"], signal.SIGCONT)
        _end_fault(lay, name)
    say(f"thawed {name}")


def _end_fault(lay: Layout, name: str) -> None:
    state = _read_state(lay) or {}
    for fault in state.get("faults", []):
        if fault["component"] == name and fault["to"] is None:
            fault["to"] = time.time()
    _write_state(lay, state)


def faults_injected(lay: Layout | None = None) -> list[dict[str, Any]]:
    """Faults injected with `gpupoc sim stop|freeze` (component, problem, from, to: None while it lasts)."""
    return list((_read_state(lay or layout()) or {}).get("faults", []))


def component_problem(name: str, lay: Layout | None = None) -> str | None:
    """None while a component of the sim runs and is not frozen; else what is wrong (the environment watch)."""
    comp = ((_read_state(lay or layout()) or {}).get("components") or {}).get(name)
    if comp is None:
        return None
    if not procs.is_running(comp["pid"], comp["binary"]):
        return "stopped on purpose (`gpupoc sim stop`)" if comp.get("stopped_by_user") else "not running"
    return "frozen (SIGSTOP)" if procs.is_frozen(comp["pid"]) else None


def component_argv(name: str) -> list[str]:
    """The arguments the sim started a component with (empty when the sim or the component is not there)."""
    comp = ((_read_state(layout()) or {}).get("components") or {}).get(name) or {}
    return list(comp.get("argv") or [])


@contextmanager
def running_with(name: str, change: Callable[[tuple[str, ...]], tuple[str, ...]]) -> Iterator[None]:
    """One component restarted with its arguments changed (a misconfiguration on purpose) for the duration, then
    with its own again."""
    reference = tuple(component_argv(name))
    stop_component(name, say=lambda _: None)
    start_component(name, say=lambda _: None, argv=change(reference))
    try:
        yield
    finally:
        stop_component(name, say=lambda _: None)
        start_component(name, say=lambda _: None, argv=reference)


def data_plane_netns(lay: Layout | None = None) -> str | None:
    """The network namespace of the sim's data plane (None: the sim is down or runs without one)."""
    name = (_read_state(lay or layout()) or {}).get("netns")
    return str(name) if name else None


def component_names(lay: Layout | None = None) -> list[str]:
    return list(((_read_state(lay or layout()) or {}).get("components") or {}))


def versions(lay: Layout | None = None) -> list[tuple[str, str]]:
    """(name, version) of each component, as `sim up` recorded them (no probe)."""
    state = _read_state(lay or layout()) or {}
    return [(name, comp.get("version", "unknown")) for name, comp in (state.get("components") or {}).items()]


def status(lay: Layout | None = None) -> list[ComponentStatus]:
    lay = lay or layout()
    state = _read_state(lay)
    if state is None:
        return []
    result = []
    for name, comp in state["components"].items():
        running = procs.is_running(comp["pid"], comp["binary"])
        result.append(ComponentStatus(name, comp["pid"], running, running and _as_component(name, comp).healthy(),
                                      comp.get("version", "unknown"), procs.is_frozen(comp["pid"]),
                                      bool(comp.get("stopped_by_user"))))
    return result

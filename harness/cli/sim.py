"""`gpupoc sim ...`: the local simulated GPU cluster (build, up, down, status, stop/start/restart/freeze, nodes)."""

from __future__ import annotations

import argparse

from kubernetes import client

from harness.cli.common import OneLineParser
from harness.config.accelerators import DEFAULT, KNOWN
from harness.core.errors import ConfigError, HarnessError
from harness.targets import sim as the_sim
from harness.targets.sim import (DEFAULT_CUDA_VERSION, DEFAULT_DRIVER_VERSION, DEFAULT_GPU_PRODUCT,
                                 DEFAULT_GPUS_PER_NODE, DEFAULT_NODES, SCHEDULERS_ENV, GpuSpec, SimConfig,
                                 parse_schedulers, schedulers_from_env)


def _gpu_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gpus-per-node", type=int, default=DEFAULT_GPUS_PER_NODE)
    parser.add_argument("--gpu-product", default=DEFAULT_GPU_PRODUCT, help="GFD form, e.g. NVIDIA-H100-80GB-HBM3")
    parser.add_argument("--gpu-memory-mib", type=int, default=None)
    parser.add_argument("--driver-version", default=DEFAULT_DRIVER_VERSION)
    parser.add_argument("--cuda-version", default=DEFAULT_CUDA_VERSION)
    parser.add_argument("--accelerator", default=DEFAULT.name, choices=sorted(KNOWN),
                        help="whose device plugin and discovery labels the nodes stand in for (simulated)")


def _gpu_spec(args: argparse.Namespace) -> GpuSpec:
    return GpuSpec(count=args.gpus_per_node, product=args.gpu_product, memory_mib=args.gpu_memory_mib,
                   driver_version=args.driver_version, cuda_version=args.cuda_version, accelerator=args.accelerator)


def add_commands(commands: argparse._SubParsersAction[OneLineParser]) -> None:
    sim = commands.add_parser("sim", help="the local simulated GPU cluster")
    sim_commands = sim.add_subparsers(dest="sim_command", required=True, parser_class=OneLineParser)
    build_cmd = sim_commands.add_parser("build", help="compile the sim's components from the Go module proxy")
    build_cmd.add_argument("components", nargs="*", help="only these (default: all but the optional ones)")
    build_cmd.add_argument("--with", dest="with_optional", action="append", default=[], metavar="NAME",
                           help="also build an optional component: kai (KAI-Scheduler), karpenter, helm, actionlint, "
                           "real-nodes, upgrade, kind (the node image's kubeadm, kubectl, CoreDNS, and kind)")
    up = sim_commands.add_parser("up", help="start the sim and its GPU nodes")
    up.add_argument("--nodes", type=int, default=DEFAULT_NODES)
    up.add_argument("--schedulers", default=",".join(schedulers_from_env()) or "none",
                    help=f"comma-separated: kueue,volcano,kuberay,kai, or 'none' (default: %(default)s; "
                         f"from {SCHEDULERS_ENV} when set); kai needs `gpupoc sim build --with kai`")
    up.add_argument("--real-nodes", type=int, default=0, metavar="N",
                    help="also N nodes with a real kubelet, containerd and runc, in the sim's network namespace, "
                         "tainted gpupoc.io/real-node=true:NoSchedule (needs `gpupoc sim build --with real-nodes`)")
    up.add_argument("--no-serving", dest="serving", action="store_false",
                    help="without the data plane (kube-proxy, model-server stand-ins, HPA metrics adapter): "
                         "no Service answers, the inference suite is SKIP")
    _gpu_flags(up)
    sim_commands.add_parser("down", help="stop every process `sim up` started")
    sim_commands.add_parser("status", help="each component: pid, running, healthy, version")
    for verb, what in (("stop", "stop one component (a fault on purpose; `sim up` leaves it stopped)"),
                       ("start", "start a stopped component again (or thaw a frozen one)"),
                       ("restart", "stop and start one component")):
        sim_commands.add_parser(verb, help=what).add_argument("component", help="as `gpupoc sim status` names it")
    freeze = sim_commands.add_parser("freeze", help="SIGSTOP one component for N seconds: alive, answering nothing")
    freeze.add_argument("component", help="as `gpupoc sim status` names it")
    freeze.add_argument("--for", dest="seconds", type=float, required=True, metavar="N", help="seconds frozen")
    cpu = sim_commands.add_parser("cpu-isolation", help="restart the real nodes' kubelets with their CPU isolation "
                                  "(static CPU manager, CFS quota) on, as `up` starts them, or off (a fault on purpose)")
    cpu.add_argument("state", choices=("on", "off"))
    node_cmd = sim_commands.add_parser("nodes", help="add or remove simulated GPU nodes")
    node_ops = node_cmd.add_subparsers(dest="nodes_command", required=True, parser_class=OneLineParser)
    add = node_ops.add_parser("add")
    add.add_argument("--count", type=int, default=1)
    _gpu_flags(add)
    remove = node_ops.add_parser("remove")
    remove.add_argument("names", nargs="*")
    remove.add_argument("--count", type=int, default=0, help="remove the newest N simulated nodes")


def _core() -> client.CoreV1Api:
    if not the_sim.is_up():
        raise HarnessError("sim is not up: run `gpupoc sim up` first")
    return client.CoreV1Api(the_sim.api_client())


def _print_status() -> int:
    rows = the_sim.status()
    if not rows:
        print("sim is not up")
        return 1
    print(f"{'COMPONENT':<24} {'PID':>7} {'RUNNING':<8} {'HEALTHY':<8} VERSION")
    for r in rows:
        note = "  (frozen)" if r.frozen else "  (stopped by `gpupoc sim stop`)" if r.stopped_by_user else ""
        print(f"{r.name:<24} {r.pid:>7} {str(r.running).lower():<8} {str(r.healthy).lower():<8} {r.version}{note}")
    return 0 if all(r.running and r.healthy for r in rows) else 1


def _nodes(args: argparse.Namespace) -> int:
    core = _core()
    if args.nodes_command == "add":
        if args.count < 1:
            raise ConfigError(f"--count must be at least 1, got {args.count}")
        names = the_sim.add_nodes(core, args.count, _gpu_spec(args))
        the_sim.wait_nodes_ready(core, names)
        print(f"added and Ready: {', '.join(names)}")
        return 0
    if args.count < 0 or (not args.names and args.count == 0):
        raise ConfigError("name the nodes to remove, or give --count N (N >= 1)")
    names = args.names or the_sim.simulated_node_names(core)[-args.count:]
    print(f"removed: {', '.join(the_sim.remove_nodes(core, names)) or 'nothing'}")
    return 0


def command(args: argparse.Namespace) -> int:
    match args.sim_command:
        case "build":
            the_sim.build(args.components, with_optional=args.with_optional)
            return 0
        case "up":
            if args.accelerator != DEFAULT.name:  # its DRA driver, Karpenter pool and real nodes play NVIDIA's
                raise ConfigError(f"sim up plays {DEFAULT.vendor}'s GPUs; add {args.accelerator} nodes beside them "
                                  f"with: gpupoc sim nodes add --count N --accelerator {args.accelerator}")
            the_sim.up(SimConfig(nodes=args.nodes, gpu=_gpu_spec(args), schedulers=parse_schedulers(args.schedulers),
                                 serving=args.serving, real_nodes=args.real_nodes))
            return 0
        case "down":
            the_sim.down()
            return 0
        case "status":
            return _print_status()
        case "stop":
            the_sim.stop_component(args.component)
            return 0
        case "start":
            the_sim.start_component(args.component)
            return 0
        case "restart":
            the_sim.restart_component(args.component)
            return 0
        case "freeze":
            the_sim.freeze_component(args.component, args.seconds)
            return 0
        case "cpu-isolation":
            the_sim.real_node_cpu_isolation(args.state == "on")
            return 0
        case _:
            return _nodes(args)

"""`gpupoc inventory | setup | preflight | rbac | clean`: the cluster under test, its GPUs, its queue model, the
runner's role, and what earlier runs left behind."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kubernetes import client

from harness import backends as backend_registry
from harness.cli.common import OneLineParser, config_of, connect_to, target_flags
from harness.cluster import cleanup, rbac
from harness.cluster.gpu_probe import probe_node
from harness.cluster.inventory import NodeGpus, cross_check, dcgm_gpus, format_inventory, gpu_inventory
from harness.cluster.prometheus import Prometheus, PrometheusUnavailable
from harness.cluster.runlock import live_holder
from harness.core.errors import ConfigError, HarnessError
from harness.config import accelerators
from harness.config.workloads import WorkloadSpec
from harness.setup import preflight, queue_model
from harness.targets.target import Target, connect


def add_commands(commands: argparse._SubParsersAction[OneLineParser]) -> None:
    inventory = commands.add_parser("inventory", help="print the cluster's nodes and GPU inventory")
    target_flags(inventory)
    inventory.add_argument("--probe-namespace", default=None,
                           help="real clusters: run the driver's tool (nvidia-smi, amd-smi, npu-smi) in a one-device "
                                "probe Pod per accelerator node, in this namespace")
    setup = commands.add_parser("setup", help="apply the reference queue model (sim and kind only)")
    target_flags(setup)
    preflight_cmd = commands.add_parser("preflight", help="is the cluster ready and may the runner do what the suites "
                                        "ask? one table; exit 1 on a blocking problem")
    target_flags(preflight_cmd)
    rbac = commands.add_parser("rbac", help="the runner's least-privilege role for a ServiceAccount: print it, "
                               "apply it (as an admin), or check a run's requests.json against it")
    target_flags(rbac)
    rbac.add_argument("--service-account", default="gpupoc/gpupoc-runner", metavar="NAMESPACE/NAME",
                      help="the runner's ServiceAccount (default: %(default)s)")
    rbac.add_argument("--apply", action="store_true", help="create the ServiceAccount and apply the role (server-side)")
    rbac.add_argument("--destructive", action="store_true",
                      help="also scale the backends' controller Deployments (control-plane recovery; runs with "
                           "--allow-destructive on that context)")
    rbac.add_argument("--check", nargs="+", type=Path, metavar="REQUESTS_JSON",
                      help="the requests a run made (reports/<run>/requests.json) that the role does not allow")
    clean = commands.add_parser("clean", help="delete what gpupoc runs left behind (never the queue model)")
    target_flags(clean)


def probe_gpus(target: Target, namespace: str, inventory: list[NodeGpus], timeout_s: float,
               workloads: WorkloadSpec) -> None:
    real = [g for g in inventory if not g.simulated]
    if not real:
        print("driver probe skipped: every accelerator node is simulated (no driver to ask)")
        return
    core = client.CoreV1Api(target.api)
    for gpus in real:
        accelerator = accelerators.named(gpus.accelerator)
        for name, driver, memory in probe_node(core, namespace, gpus.node, accelerator, timeout_s, workloads):
            agree = "agrees" if driver == gpus.driver_version else f"labels say {gpus.driver_version}"
            print(f"{gpus.node}: {accelerator.probe_tool}: {name}, driver {driver} ({agree}), {memory}")


def print_inventory(target: Target, probe_namespace: str | None = None, probe_timeout_s: float = 300,
                    workloads: WorkloadSpec | None = None) -> None:
    core = client.CoreV1Api(target.api)
    raw = [target.api.sanitize_for_serialization(n) for n in core.list_node().items]
    print(f"cluster: {target.host} ({target.kind}, context {target.context}, Kubernetes "
          f"{target.kubernetes_version}), {len(raw)} node(s)")
    inventory = gpu_inventory(raw)
    print(format_inventory(inventory))
    if probe_namespace:
        probe_gpus(target, probe_namespace, inventory, probe_timeout_s, workloads or WorkloadSpec())
    if target.prometheus_url:
        try:
            series = Prometheus(target.prometheus_url).instant("DCGM_FI_DEV_GPU_UTIL")
        except PrometheusUnavailable as exc:
            print(f"DCGM cross-check skipped: {exc}")
            return
        if series:
            problems = cross_check(inventory, dcgm_gpus([s.labels for s in series]))
            print("DCGM agrees with the node labels" if not problems else "\n".join(problems))
        else:
            print("DCGM cross-check: no DCGM exporter series in Prometheus")


def target_timeout(args: argparse.Namespace) -> float:
    return config_of(args).profile.timeouts.cleanup


def command(args: argparse.Namespace) -> int:
    if args.command == "inventory":
        print_inventory(connect_to(args), args.probe_namespace,
                        workloads=config_of(args).profile.workloads)
        return 0
    if args.command == "setup":
        target = connect_to(args, admin=True)
        cfg = config_of(args)  # --backends (all by default): the queues of those only
        queue_model.apply_queue_model(target, cfg.profile, chosen=cfg.backends)
        return 0
    if args.command == "clean":
        target = connect_to(args, admin=True)
        cfg = config_of(args)
        holder = live_holder(target.api, *cfg.run_lock) if cfg.run_lock and not args.run_id else None
        if holder:
            raise HarnessError(f"a run holds this cluster ({holder}): cleaning every run would delete its objects; "
                               "give --run-id of a run that is over, or wait for it")
        leftovers = cleanup.sweep(target.api, args.run_id, target_timeout(args))
        for line in leftovers:
            print(f"left behind: {line}")
        return 1 if leftovers else 0
    if args.command == "preflight":
        cfg = config_of(args)
        checks = preflight.run_preflight(connect(cfg), cfg, say=lambda line: print(line, file=sys.stderr))
        print(preflight.table(checks))
        return 1 if preflight.blocked(checks) else 0
    if args.command == "rbac":
        return rbac_command(args)
    raise AssertionError(f"not a cluster command: {args.command}")


def rbac_command(args: argparse.Namespace) -> int:
    if "/" not in args.service_account:
        raise ConfigError(f"--service-account {args.service_account!r}: give NAMESPACE/NAME")
    cfg = config_of(args)
    docs = rbac.runner_manifests(cfg.profile, args.service_account, cfg.run_lock, 
                                 destructive=backend_registry.controller_deployments() if args.destructive else None)
    if args.check:
        problems = 0
        for path in args.check:
            seen = rbac.load_requests(path)
            beyond = rbac.outside(docs, seen)
            problems += len(beyond)
            print(f"{path}: {len(seen)} distinct requests, {len(beyond)} outside the runner's role")
            for line in dict.fromkeys(r.describe() for r in beyond):  # one line per permission, not per object
                print(f"  outside the role: {line}")
        return 1 if problems else 0
    if args.apply:
        target = connect_to(args, admin=True)
        for line in rbac.apply(target.api, args.service_account, docs):
            print(line)
        return 0
    print(rbac.as_yaml(rbac.service_account(args.service_account), docs))
    return 0

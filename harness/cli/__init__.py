"""The `gpupoc` command: sim build/up/down/status/stop/start/restart/freeze/nodes, run, compare, the inventory."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import NoReturn

from kubernetes import client
from kubernetes.dynamic.exceptions import DynamicApiError

from harness import backends as backend_registry
from harness.cluster import cleanup, rbac
from harness.run import outcomes
from harness.setup import preflight, queue_model
from harness.config.options import OPTIONS, RunConfig, resolve
from harness.core.errors import ConfigError, HarnessError
from harness.cluster.gpu_probe import probe_node
from harness.cluster.inventory import NodeGpus, cross_check, dcgm_gpus, format_inventory, gpu_inventory
from harness.cluster.prometheus import Prometheus, PrometheusUnavailable
from harness.record.compare import compare
from harness.record.trend import write_trend
from harness.setup.references import describe_missing, missing_references
from harness.cluster.runlock import live_holder
from harness.record.model import load_record
from harness.core.paths import REPO_ROOT
from harness.targets.target import Target, connect
from harness.targets import sim as the_sim
from harness.targets.sim import (DEFAULT_CUDA_VERSION, DEFAULT_DRIVER_VERSION, DEFAULT_GPU_PRODUCT,
                                 DEFAULT_GPUS_PER_NODE, DEFAULT_NODES, SCHEDULERS_ENV, GpuSpec, SimConfig,
                                 parse_schedulers, schedulers_from_env)

EXIT_USAGE = 2
PYTEST_USAGE_ERROR = 4


class OneLineParser(argparse.ArgumentParser):
    """Bad input: one line saying what is wrong, exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _gpu_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gpus-per-node", type=int, default=DEFAULT_GPUS_PER_NODE)
    parser.add_argument("--gpu-product", default=DEFAULT_GPU_PRODUCT, help="GFD form, e.g. NVIDIA-H100-80GB-HBM3")
    parser.add_argument("--gpu-memory-mib", type=int, default=None)
    parser.add_argument("--driver-version", default=DEFAULT_DRIVER_VERSION)
    parser.add_argument("--cuda-version", default=DEFAULT_CUDA_VERSION)


def _gpu_spec(args: argparse.Namespace) -> GpuSpec:
    return GpuSpec(count=args.gpus_per_node, product=args.gpu_product, memory_mib=args.gpu_memory_mib,
                   driver_version=args.driver_version, cuda_version=args.cuda_version)


def parser() -> argparse.ArgumentParser:
    top = OneLineParser(prog="gpupoc", description="GPU scheduling POC acceptance tests")
    commands = top.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    sim = commands.add_parser("sim", help="the local simulated GPU cluster")
    sim_commands = sim.add_subparsers(dest="sim_command", required=True, parser_class=OneLineParser)
    build_cmd = sim_commands.add_parser("build", help="compile the sim's components from the Go module proxy")
    build_cmd.add_argument("components", nargs="*", help="only these (default: all but the optional ones)")
    build_cmd.add_argument("--with", dest="with_optional", action="append", default=[], metavar="NAME",
                           help="also build an optional component: kai (KAI-Scheduler), helm, actionlint")
    up = sim_commands.add_parser("up", help="start the sim and its GPU nodes")
    up.add_argument("--nodes", type=int, default=DEFAULT_NODES)
    up.add_argument("--schedulers", default=",".join(schedulers_from_env()) or "none",
                    help=f"comma-separated: kueue,volcano,kuberay,kai, or 'none' (default: %(default)s; "
                         f"from {SCHEDULERS_ENV} when set); kai needs `gpupoc sim build --with kai`")
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
    node_cmd = sim_commands.add_parser("nodes", help="add or remove simulated GPU nodes")
    node_ops = node_cmd.add_subparsers(dest="nodes_command", required=True, parser_class=OneLineParser)
    add = node_ops.add_parser("add")
    add.add_argument("--count", type=int, default=1)
    _gpu_flags(add)
    remove = node_ops.add_parser("remove")
    remove.add_argument("names", nargs="*")
    remove.add_argument("--count", type=int, default=0, help="remove the newest N simulated nodes")
    inventory = commands.add_parser("inventory", help="print the cluster's nodes and GPU inventory")
    _target_flags(inventory)
    inventory.add_argument("--probe-namespace", default=None,
                           help="real clusters: run nvidia-smi in a one-GPU probe Pod per GPU node, in this namespace")
    setup = commands.add_parser("setup", help="apply the reference queue model (sim and kind only)")
    _target_flags(setup)
    preflight_cmd = commands.add_parser("preflight", help="is the cluster ready and may the runner do what the suites "
                                        "ask? one table; exit 1 on a blocking problem")
    _target_flags(preflight_cmd)
    rbac = commands.add_parser("rbac", help="the runner's least-privilege role for a ServiceAccount: print it, "
                               "apply it (as an admin), or check a run's requests.json against it")
    _target_flags(rbac)
    rbac.add_argument("--service-account", default="gpupoc/gpupoc-runner", metavar="NAMESPACE/NAME",
                      help="the runner's ServiceAccount (default: %(default)s)")
    rbac.add_argument("--apply", action="store_true", help="create the ServiceAccount and apply the role (server-side)")
    rbac.add_argument("--destructive", action="store_true",
                      help="also scale the backends' controller Deployments (control-plane recovery; runs with "
                           "--allow-destructive on that context)")
    rbac.add_argument("--check", nargs="+", type=Path, metavar="REQUESTS_JSON",
                      help="the requests a run made (reports/<run>/requests.json) that the role does not allow")
    clean = commands.add_parser("clean", help="delete what gpupoc runs left behind (never the queue model)")
    _target_flags(clean)
    run_cmd = commands.add_parser("run", help="run the suites (pytest on suites/); extra arguments go to pytest")
    _target_flags(run_cmd)
    run_cmd.add_argument("--repeat", type=int, default=1, help="run the suites K times, then compare the runs")
    run_cmd.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: passed to pytest")
    compare_cmd = commands.add_parser("compare", help="compare runs: one HTML page from several record.json")
    compare_cmd.add_argument("records", nargs="+", type=Path)
    compare_cmd.add_argument("--output", type=Path, default=REPO_ROOT / "reports" / "comparison.html")
    trend_cmd = commands.add_parser("trend", help="measured values of each criterion x backend over runs, thresholds "
                                    "drawn in, what changed between the last two: one offline HTML page")
    trend_cmd.add_argument("records", nargs="+", type=Path, help="record.json of each run (any order)")
    trend_cmd.add_argument("--output", type=Path, default=REPO_ROOT / "reports" / "trend.html")
    designed = commands.add_parser("check-designed", help="compare a run's outcomes with the reference sim's "
                                   "designed outcomes (suites/expected.yaml); exit 1 on any difference")
    designed.add_argument("record", type=Path)
    return top


def _target_flags(parser: argparse.ArgumentParser) -> None:
    for name, (env, help_text) in OPTIONS.items():
        parser.add_argument(f"--{name.replace('_', '-')}", dest=name, default=None, help=f"{help_text} [env {env}]")


def _connect(args: argparse.Namespace) -> Target:
    return connect(resolve({name: getattr(args, name) for name in OPTIONS}))


def _core() -> client.CoreV1Api:
    if not the_sim.is_up():
        raise HarnessError("sim is not up: run `gpupoc sim up` first")
    return client.CoreV1Api(the_sim.api_client())


def probe_gpus(target: Target, namespace: str, inventory: list[NodeGpus], timeout_s: float) -> None:
    real = [g for g in inventory if not g.simulated]
    if not real:
        print("nvidia-smi probe skipped: every GPU node is simulated (no driver to ask)")
        return
    core = client.CoreV1Api(target.api)
    for gpus in real:
        for name, driver, memory in probe_node(core, namespace, gpus.node, "nvidia.com/gpu", timeout_s):
            agree = "agrees" if driver == gpus.driver_version else f"labels say {gpus.driver_version}"
            print(f"{gpus.node}: nvidia-smi: {name}, driver {driver} ({agree}), {memory}")


def print_inventory(target: Target, probe_namespace: str | None = None, probe_timeout_s: float = 300) -> None:
    core = client.CoreV1Api(target.api)
    raw = [target.api.sanitize_for_serialization(n) for n in core.list_node().items]
    print(f"cluster: {target.host} ({target.kind}, context {target.context}, Kubernetes "
          f"{target.kubernetes_version}), {len(raw)} node(s)")
    inventory = gpu_inventory(raw)
    print(format_inventory(inventory))
    if probe_namespace:
        probe_gpus(target, probe_namespace, inventory, probe_timeout_s)
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
    return resolve({name: getattr(args, name) for name in OPTIONS}).profile.timeouts.cleanup


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


def run_suites(args: argparse.Namespace) -> int:
    """pytest on suites/ (K times with --repeat, each its own run id, then a comparison page)."""
    if args.repeat < 1:
        raise ConfigError(f"--repeat must be at least 1, got {args.repeat}")
    cfg = resolve({name: getattr(args, name) for name in OPTIONS})  # bad input ends here, before pytest starts
    if not (cfg.targets_sim and not the_sim.is_up()):  # else the run starts the sim: nothing to ask yet
        refuse_bad_references(args, cfg, connect(cfg))
    passthrough = [a for a in args.pytest_args if a != "--"]
    chosen = [a for a in passthrough if not a.startswith("-") and (REPO_ROOT / a.split("::")[0]).exists()]
    tests = [] if chosen else [str(REPO_ROOT / "suites")]  # `-- suites/training/x.py`: those, not every suite
    options = [f"--{name.replace('_', '-')}={getattr(args, name)}" for name in OPTIONS
               if getattr(args, name) and name != "run_id"]
    base = args.run_id or uuid.uuid4().hex[:8]
    run_ids = [base] if args.repeat == 1 else [f"{base}-{i + 1}" for i in range(args.repeat)]
    worst = 0
    for run_id in run_ids:
        code = subprocess.call([sys.executable, "-m", "pytest", *tests, f"--run-id={run_id}", *options,
                                *passthrough], cwd=REPO_ROOT)
        if code == PYTEST_USAGE_ERROR:
            return EXIT_USAGE  # pytest said what is wrong with its arguments
        worst = max(worst, code)
    if len(run_ids) > 1:
        reports = Path(args.reports_dir) if args.reports_dir else REPO_ROOT / "reports"
        write_comparison([reports / r / "record.json" for r in run_ids], reports / f"{base}-comparison.html")
    return worst


def refuse_bad_references(args: argparse.Namespace, cfg: RunConfig, target: Target) -> None:
    """What the user named must be there: the profile's namespaces and queues (a cluster's own queue model), the
    backends named in --backends, a Prometheus at --prometheus-url."""
    if not cfg.apply_queue_model:
        missing = missing_references(target.api, cfg.profile, cfg.backends)
        if missing:
            raise ConfigError(describe_missing(missing))
    backends_env, prometheus_env = OPTIONS["backends"][0], OPTIONS["prometheus_url"][0]
    if args.backends or os.environ.get(backends_env):
        for name in cfg.backends:
            reason = backend_registry.ALL[name].unavailable_reason(target.api)
            if reason:
                raise ConfigError(f"{'--backends' if args.backends else backends_env} names {name}, which this cluster "
                                  f"lacks ({reason}); install it, or drop it from the list")
    if cfg.prometheus_url and target.prometheus_url == cfg.prometheus_url:
        prometheus = Prometheus(cfg.prometheus_url, budget_s=0.0)
        reason = prometheus.reachable_reason()
        if reason:
            which = "--prometheus-url" if args.prometheus_url else prometheus_env
            raise ConfigError(f"{which} {prometheus.url} does not answer as Prometheus ({reason}); give the "
                              "URL of the cluster's Prometheus (and its credentials: GPUPOC_PROMETHEUS_TOKEN_FILE, "
                              "GPUPOC_PROMETHEUS_USER)")


def write_comparison(records: list[Path], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(compare(records))
    print(f"gpupoc: comparison of {len(records)} runs written to {out}")


def run(args: argparse.Namespace) -> int:
    if args.command == "inventory":
        print_inventory(_connect(args), args.probe_namespace)
        return 0
    if args.command == "setup":
        target = _connect(args)
        queue_model.apply_queue_model(target, resolve({n: getattr(args, n) for n in OPTIONS}).profile)
        return 0
    if args.command == "clean":
        target = _connect(args)
        cfg = resolve({n: getattr(args, n) for n in OPTIONS})
        holder = live_holder(target.api, *cfg.run_lock) if cfg.run_lock and not args.run_id else None
        if holder:
            raise HarnessError(f"a run holds this cluster ({holder}): cleaning every run would delete its objects; "
                               "give --run-id of a run that is over, or wait for it")
        leftovers = cleanup.sweep(target.api, args.run_id, target_timeout(args))
        for line in leftovers:
            print(f"left behind: {line}")
        return 1 if leftovers else 0
    if args.command == "run":
        return run_suites(args)
    if args.command == "preflight":
        cfg = resolve({n: getattr(args, n) for n in OPTIONS})
        checks = preflight.run_preflight(connect(cfg), cfg, say=lambda line: print(line, file=sys.stderr))
        print(preflight.table(checks))
        return 1 if preflight.blocked(checks) else 0
    if args.command == "rbac":
        return rbac_command(args)
    if args.command == "trend":
        print(f"gpupoc: trend of {len(args.records)} runs written to {write_trend(args.records, args.output)}")
        return 0
    if args.command == "compare":
        write_comparison(args.records, args.output)
        return 0
    if args.command == "check-designed":
        return check_designed(args.record)
    match args.sim_command:
        case "build":
            the_sim.build(args.components, with_optional=args.with_optional)
            return 0
        case "up":
            the_sim.up(SimConfig(nodes=args.nodes, gpu=_gpu_spec(args), schedulers=parse_schedulers(args.schedulers),
                                 serving=args.serving))
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
        case _:
            return _nodes(args)


def rbac_command(args: argparse.Namespace) -> int:
    if "/" not in args.service_account:
        raise ConfigError(f"--service-account {args.service_account!r}: give NAMESPACE/NAME")
    cfg = resolve({n: getattr(args, n) for n in OPTIONS})
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
        target = _connect(args)
        for line in rbac.apply(target.api, args.service_account, docs):
            print(line)
        return 0
    print(rbac.as_yaml(rbac.service_account(args.service_account), docs))
    return 0


def check_designed(path: Path) -> int:
    record = load_record(path)
    problems = outcomes.unexpected([(r.criterion, r.backend, r.outcome) for r in record.results],
                                   outcomes.load_expected())
    for line in problems:
        print(f"gpupoc: not as designed: {line}")
    if not problems:
        print(f"gpupoc: {len(record.results)} results as designed (suites/expected.yaml)")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return run(args)
    except ConfigError as exc:
        print(f"gpupoc: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (HarnessError, ValueError, OSError) as exc:
        print(f"gpupoc: {exc}", file=sys.stderr)
        return 1
    except (client.ApiException, DynamicApiError) as exc:
        print(f"gpupoc: the API server refused a request: {getattr(exc, 'status', '?')} "
              f"{getattr(exc, 'reason', exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("gpupoc: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""`gpupoc run | compare | trend | check-designed`: the suites, and what several runs say side by side."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import uuid
from pathlib import Path

from harness import backends as backend_registry
from harness.cli import side_by_side
from harness.cli.common import EXIT_USAGE, PYTEST_USAGE_ERROR, OneLineParser, config_of, target_flags
from harness.cluster.prometheus import Prometheus
from harness.config.options import OPTIONS, RunConfig
from harness.core.errors import ConfigError
from harness.core.paths import IN_CHECKOUT, REPO_ROOT, SUITES_DIR, reports_root
from harness.record.compare import compare
from harness.record.merge import repeated
from harness.record.model import load_record
from harness.record.render import page
from harness.record.trend import write_trend
from harness.run import outcomes
from harness.setup.references import describe_missing, missing_references
from harness.targets import sim as the_sim
from harness.targets.target import Target, connect


# Installed from the wheel there is no conftest.py: the plugin is named, case ids stay `suites/...` (the root is the
# folder holding suites/), and pytest writes no cache into site-packages. The run stays in the user's folder.
INSTALLED_PYTEST = () if IN_CHECKOUT else ("-p", "harness.plugin", "-p", "no:cacheprovider", f"--rootdir={REPO_ROOT}")


def add_commands(commands: argparse._SubParsersAction[OneLineParser]) -> None:
    run_cmd = commands.add_parser("run", help="run the suites (pytest on suites/); extra arguments go to pytest")
    target_flags(run_cmd)
    run_cmd.add_argument("--repeat", type=int, default=1, help="run the suites K times, then compare the runs")
    run_cmd.add_argument("--side-by-side", nargs="?", const=side_by_side.DEFAULT_PARTS, default=None, metavar="PARTS",
                         help="on the sim: groups of backends at once, each on a sim of its own, one record "
                              f"(default groups: {side_by_side.DEFAULT_PARTS})")
    run_cmd.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: passed to pytest")
    compare_cmd = commands.add_parser("compare", help="compare runs: one HTML page from several record.json")
    compare_cmd.add_argument("records", nargs="+", type=Path)
    compare_cmd.add_argument("--output", type=Path, default=reports_root() / "comparison.html")
    trend_cmd = commands.add_parser("trend", help="measured values of each criterion x backend over runs, thresholds "
                                    "drawn in, what changed between the last two: one offline HTML page")
    trend_cmd.add_argument("records", nargs="+", type=Path, help="record.json of each run (any order)")
    trend_cmd.add_argument("--output", type=Path, default=reports_root() / "trend.html")
    designed = commands.add_parser("check-designed", help="compare a run's outcomes with the reference sim's "
                                   "designed outcomes (suites/expected.yaml); exit 1 on any difference")
    designed.add_argument("record", type=Path)


def run_suites(args: argparse.Namespace) -> int:
    """pytest on suites/ (K times with --repeat, each its own run id, then a comparison page)."""
    if args.repeat < 1:
        raise ConfigError(f"--repeat must be at least 1, got {args.repeat}")
    cfg = config_of(args)  # bad input ends here, before pytest starts
    passthrough = [a if IN_CHECKOUT or a.startswith("-") or not names_a_case(a) else str(REPO_ROOT / a)
                   for a in args.pytest_args if a != "--"]  # installed: `suites/...` is the package's
    chosen = [a for a in passthrough if not a.startswith("-") and names_a_case(a)]
    tests = [] if chosen else [str(SUITES_DIR)]  # `-- suites/training/x.py`: those, not every suite
    if args.side_by_side:
        if args.repeat != 1:
            raise ConfigError("--side-by-side runs once; leave --repeat out")
        return side_by_side.run(cfg, {name: getattr(args, name) for name in OPTIONS}, args.side_by_side, passthrough,
                                tests)
    if not (cfg.targets_sim and not the_sim.is_up()):  # else the run starts the sim: nothing to ask yet
        refuse_bad_references(args, cfg, connect(cfg))
    options = [f"--{name.replace('_', '-')}={getattr(args, name)}" for name in OPTIONS
               if getattr(args, name) and name != "run_id"]
    base = args.run_id or uuid.uuid4().hex[:8]
    run_ids = [base] if args.repeat == 1 else [f"{base}-{i + 1}" for i in range(args.repeat)]
    worst = 0
    for run_id in run_ids:
        code = subprocess.call([sys.executable, "-m", "pytest", *INSTALLED_PYTEST, *tests, f"--run-id={run_id}",
                                *options, *passthrough], cwd=REPO_ROOT if IN_CHECKOUT else None)
        if code == PYTEST_USAGE_ERROR:
            return EXIT_USAGE  # pytest said what is wrong with its arguments
        worst = max(worst, code)
    if len(run_ids) > 1:
        reports = Path(args.reports_dir) if args.reports_dir else reports_root()
        write_comparison([reports / r / "record.json" for r in run_ids], reports / f"{base}-comparison.html")
        write_repeated(base, [reports / r / "record.json" for r in run_ids], reports / base)
    return worst


def names_a_case(arg: str) -> bool:
    """`suites/training/x.py[::case]`: a file of the suites, in the checkout or the installed package."""
    return (REPO_ROOT / arg.split("::")[0]).exists()


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
            reason = backend_registry.ALL[name].unavailable_reason(target)
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


def write_repeated(run_id: str, records: list[Path], folder: Path) -> None:
    """One record of the K runs: each cell's K outcomes, each value's spread, the worst deciding."""
    found = [load_record(p) for p in records if p.exists()]
    if not found:
        print(f"gpupoc: no record of the {len(records)} runs to put together")
        return
    record = repeated(run_id, found)
    folder.mkdir(parents=True, exist_ok=True)
    record.write(folder / "record.json")
    (folder / "record.html").write_text(page(record))
    print(f"gpupoc: the {len(found)} runs in one record: {folder / 'record.html'} (JSON: {folder / 'record.json'})")


def command(args: argparse.Namespace) -> int:
    if args.command == "run":
        return run_suites(args)
    if args.command == "trend":
        print(f"gpupoc: trend of {len(args.records)} runs written to {write_trend(args.records, args.output)}")
        return 0
    if args.command == "compare":
        write_comparison(args.records, args.output)
        return 0
    if args.command == "check-designed":
        return check_designed(args.record)
    raise AssertionError(f"not a run command: {args.command}")


def check_designed(path: Path) -> int:
    """Wrong outcomes (a regression) and undecided ones (INCONCLUSIVE: listed apart, as are designed FAILs that a
    known race let PASS; beyond
    outcomes.MAX_UNDECIDED_SHARE of the cells the run did not decide) each fail it."""
    record = load_record(path)
    results = [(r.criterion, r.backend, r.outcome) for r in record.results]
    problems = outcomes.unexpected(results, outcomes.load_expected())
    undecided = outcomes.undecided(results)
    for line in problems:
        print(f"gpupoc: not as designed: {line}")
    for line in outcomes.raced(results, outcomes.load_expected()):
        print(f"gpupoc: as designed, a known race: {line}")
    for line in undecided:
        print(f"gpupoc: not decided (INCONCLUSIVE): {line}")
    too_many = len(undecided) > outcomes.MAX_UNDECIDED_SHARE * max(1, len(results))
    if too_many:
        print(f"gpupoc: {len(undecided)} of {len(results)} results not decided, more than "
              f"{outcomes.MAX_UNDECIDED_SHARE:.0%}: the run did not decide")
    if not problems and not too_many:
        print(f"gpupoc: {len(results) - len(undecided)} results as designed (suites/expected.yaml)"
              + (f", {len(undecided)} not decided" if undecided else ""))
    return 1 if problems or too_many else 0

"""`gpupoc run --side-by-side`: the backends in parts at once, each part on a sim of its own, one record.

A backend's cases need only its own scheduler and GPUs, and most of their time is waiting, so groups of backends
that share nothing run at the same time: each part is an ordinary run (`pytest suites --backends GROUP`) against
its own sim (its own state directory, port range, API server, scheduler and nodes; the build shared). What the
parts share is the host's CPUs. The parts' records are merged into the run's record (harness/record/merge.py); each
part's pytest-html page, with every case's log, stays in `reports/RUN/parts/`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

from harness import backends as backend_registry
from harness.cluster.rbac import REQUESTS_FILE
from harness.cli.common import EXIT_USAGE, PYTEST_USAGE_ERROR
from harness.config.options import RunConfig
from harness.core.errors import ConfigError, SimError
from harness.core.paths import REPO_ROOT, bin_dir, build_root, gpupoc_home
from harness.record.merge import merge
from harness.record.model import load_record
from harness.record.render import page
from harness.serving import loadgen
from harness.targets.sim import PORT_BASE_ENV, SCHEDULERS_ENV

# Balanced by the parts' case time in `make poc` (2026-12-04, junit: kueue 456 s, kuberay 208 s, volcano 257 s,
# kueue-volcano 313 s, default 251 s, slurm 108 s, KAI 248 s; each part adds about 100 s of its own). KubeRay goes
# beside KAI (its part's sim runs Kueue too, which queues its RayJobs); the default backend shares a part with a
# scheduler, as a sim runs kube-state-metrics (which its monitoring case reads) only beside one. kube-scheduler's own
# gang (kube-gang: three training cases) goes beside Kueue, in the part whose name keeps the run id short.
DEFAULT_PARTS = "kueue+kube-gang,volcano+kueue-volcano,kai+kuberay,slurm+default"
# Port ranges of the parts' sims: below the default sim's (29000), the second sims of tests and bench/ (30000,
# 31000), make test's workers (32000, 28000, 27000) and Linux's ephemeral ports (32768 and up).
PART_PORT_BASES = (26000, 25000, 24000, 23000, 22000, 21000)
UP_TIMEOUT_S = 300
RUN_ID_MAX = 40
# the run options a part does not take from the command line: it has its own
OWN_OPTIONS = ("run_id", "reports_dir", "backends")
EXIT_BROKEN = 2  # as pytest's "interrupted": the run itself broke


@dataclass(frozen=True)
class Part:
    name: str
    backends: tuple[str, ...]
    port_base: int
    run_id: str
    autoscaler: tuple[str, ...] = ()  # the sim's autoscaler, beside the schedulers (the cloud row's case)

    @property
    def schedulers(self) -> str:
        wanted = [s for b in self.backends for s in backend_registry.ALL[b].sim_schedulers]
        return ",".join(dict.fromkeys([*wanted, *self.autoscaler])) or "none"

    def env(self) -> dict[str, str]:
        return {**os.environ, "GPUPOC_HOME": str(gpupoc_home() / "parts" / self.name),
                "GPUPOC_BUILD_HOME": str(build_root()), PORT_BASE_ENV: str(self.port_base),
                SCHEDULERS_ENV: self.schedulers}


def autoscaler_built() -> tuple[str, ...]:
    """The sim's autoscaler, where `gpupoc sim build --with karpenter` built it: every part's sim runs it."""
    return ("karpenter",) if (bin_dir() / "karpenter-kwok").exists() else ()


def plan(spec: str, run_id: str, autoscaler: tuple[str, ...] = ()) -> list[Part]:
    """The parts of `--side-by-side kueue+kuberay,volcano,...`: each backend in one part at most; `autoscaler`
    beside the schedulers of each."""
    groups = [tuple(b.strip() for b in group.split("+") if b.strip()) for group in spec.split(",") if group.strip()]
    named = [b for g in groups for b in g]
    unknown = sorted(set(named) - set(backend_registry.ALL))
    if unknown:
        raise ConfigError(f"--side-by-side {spec}: unknown backend(s) {', '.join(unknown)}; "
                          f"choose from {', '.join(backend_registry.ALL)}")
    twice = sorted({b for b in named if named.count(b) > 1})
    if twice:
        raise ConfigError(f"--side-by-side {spec}: {', '.join(twice)} in more than one part")
    if not 1 <= len(groups) <= len(PART_PORT_BASES):
        raise ConfigError(f"--side-by-side {spec}: 1 to {len(PART_PORT_BASES)} parts, got {len(groups)}")
    names = ["-".join(dict.fromkeys(word for b in g for word in b.split("-"))) for g in groups]  # volcano-kueue
    if len(set(names)) < len(names):
        raise ConfigError(f"--side-by-side {spec}: two parts would share the name "
                          f"{next(n for n in names if names.count(n) > 1)} (and its sim's state): group them otherwise")
    parts = [Part(name, g, base, f"{run_id}-{name}", autoscaler)
             for name, g, base in zip(names, groups, PART_PORT_BASES)]
    long = [p.run_id for p in parts if len(p.run_id) > RUN_ID_MAX]
    if long:
        raise ConfigError(f"--run-id {run_id}: a part's run id ({long[0]}) would be over {RUN_ID_MAX} characters; "
                          "give a shorter run id")
    return parts


def _say(part: Part, line: str) -> None:
    print(f"[{part.name}] {line}", flush=True)


def _cli(part: Part, *args: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], env=part.env(), cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=timeout_s)


def _down_hint(part: Part) -> str:
    return f"GPUPOC_HOME={part.env()['GPUPOC_HOME']} {PORT_BASE_ENV}={part.port_base} gpupoc sim down"


def _bring_up(part: Part, folder: Path, started: list[Part], problems: dict[str, str]) -> None:
    t0 = time.monotonic()
    state = Path(part.env()["GPUPOC_HOME"]) / "sim" / "state.json"
    if _cli(part, "sim", "status", timeout_s=60).returncode == 0:
        running = set(json.loads(state.read_text()).get("schedulers", [])) if state.exists() else set()
        lacking = sorted({s for b in part.backends for s in backend_registry.ALL[b].sim_schedulers} - running)
        if lacking:
            problems[part.name] = f"its sim is up without {', '.join(lacking)}; stop it first: {_down_hint(part)}"
        else:
            _say(part, f"its sim is up already (port base {part.port_base}): using it; {_down_hint(part)} stops it")
        return
    log = folder / "parts" / f"{part.run_id}.sim-up.log"
    try:
        result = _cli(part, "sim", "up", "--schedulers", part.schedulers, timeout_s=UP_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        log.write_text(str(exc.stdout or "") + str(exc.stderr or ""))
        started.append(part)  # whatever it left is stopped with the rest
        problems[part.name] = f"its sim was not up after {UP_TIMEOUT_S} s (output: {log})"
        return
    log.write_text(result.stdout + result.stderr)
    if result.returncode != 0:
        said = [line for line in result.stderr.splitlines() if line.startswith("gpupoc")]
        problems[part.name] = f"its sim did not start: {(said or ['no error line'])[0]} (output: {log})"
        return
    started.append(part)
    _say(part, f"sim up in {time.monotonic() - t0:.1f} s (schedulers {part.schedulers}, port base {part.port_base})")


def _bring_down(part: Part) -> None:
    try:
        result = _cli(part, "sim", "down", timeout_s=UP_TIMEOUT_S)
        if result.returncode != 0:
            _say(part, f"sim down failed: {(result.stderr.strip().splitlines() or ['no output'])[-1]}")
    except subprocess.TimeoutExpired:
        _say(part, f"sim down did not end within {UP_TIMEOUT_S} s: {_down_hint(part)}")


@contextmanager
def sims(parts: list[Part], folder: Path) -> Iterator[Callable[[Part], None]]:
    """Every part's sim up (at once) for the duration; those started here are stopped afterwards, or as soon as
    their part is done with the call it yields (an idle sim's controllers load the host the other parts measure on)."""
    started: list[Part] = []
    problems: dict[str, str] = {}
    lock = threading.Lock()

    def done(part: Part) -> None:
        with lock:
            ours = part in started
            if ours:
                started.remove(part)
        if ours:
            _bring_down(part)

    try:
        _all_at_once([partial(_bring_up, p, folder, started, problems) for p in parts])
        if problems:
            raise SimError("; ".join(f"part {name}: {why}" for name, why in problems.items()))
        yield done
    finally:
        _all_at_once([partial(_bring_down, p) for p in list(started)])


def _all_at_once(calls: list[Callable[[], object]], children: list[subprocess.Popen[str]] | None = None) -> None:
    """Each call on a thread of its own, until all end. Ctrl-C (or SIGTERM): the children are asked to end their
    runs as on Ctrl-C (their records written, their objects swept) and waited for; a second one stops waiting."""
    threads = [threading.Thread(target=call, daemon=True) for call in calls]
    for t in threads:
        t.start()
    interrupted = False
    for t in threads:
        while t.is_alive():
            try:
                t.join(0.5)
            except KeyboardInterrupt:
                if interrupted or not children:
                    raise
                interrupted = True
                print("gpupoc: interrupted: each part ends its run (record, sweep); interrupt again to stop waiting",
                      file=sys.stderr, flush=True)
                for child in children:
                    if child.poll() is None:
                        child.send_signal(signal.SIGINT)
    if interrupted:
        raise KeyboardInterrupt


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # a CI job's timeout: end as on Ctrl-C, the parts' sims stopped


def _run_part(part: Part, argv: list[str], log: Path, codes: dict[str, int],
              children: list[subprocess.Popen[str]], done: Callable[[Part], None]) -> None:
    """The part's pytest, its output to the terminal (each line named by the part) and to its log, then `done` with
    it. A run killed by a signal counts as broken (128 + the signal), never as a result."""
    t0 = time.monotonic()
    codes[part.name] = EXIT_BROKEN  # until the run says otherwise
    with log.open("w") as out, subprocess.Popen(argv, env=part.env(), cwd=REPO_ROOT, stdout=subprocess.PIPE,
                                                stderr=subprocess.STDOUT, text=True, bufsize=1) as proc:
        children.append(proc)
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            _say(part, line.rstrip("\n"))
        code = proc.wait()
    codes[part.name] = 128 - code if code < 0 else code
    _say(part, f"done in {time.monotonic() - t0:.0f} s (pytest exit {codes[part.name]})")
    done(part)


def exit_code(codes: dict[str, int], parts: list[Part]) -> int:
    """Pure: the run's exit code from its parts': pytest's usage error as the CLI's, else the worst; a part with
    no code broke the run."""
    found = [codes.get(p.name, EXIT_BROKEN) for p in parts]
    return EXIT_USAGE if PYTEST_USAGE_ERROR in found else max(found, default=EXIT_BROKEN)


def run(cfg: RunConfig, option_args: dict[str, str], spec: str, passthrough: list[str], tests: list[str]) -> int:
    """Every part at once; then the run's record, requests and page from the parts'. The worst part's exit code."""
    if not cfg.targets_sim:
        raise ConfigError("--side-by-side runs each part on a sim of its own; a cluster runs its backends one after "
                          "another (leave --side-by-side out)")
    if option_args.get("backends"):
        raise ConfigError("--side-by-side names the backends of each part; leave --backends out")
    parts = plan(spec, cfg.run_id, autoscaler_built())
    folder = cfg.reports_dir / cfg.run_id
    (folder / "parts").mkdir(parents=True, exist_ok=True)
    for part in parts:  # a record left by an earlier run of this run id is not this run's
        (folder / "parts" / part.run_id / "record.json").unlink(missing_ok=True)
    options = [f"--{name.replace('_', '-')}={value}" for name, value in option_args.items()
               if value and name not in OWN_OPTIONS]
    codes: dict[str, int] = {}
    children: list[subprocess.Popen[str]] = []
    signal.signal(signal.SIGTERM, _terminated)
    t0 = time.monotonic()
    print(f"gpupoc: {len(parts)} parts side by side: " + "; ".join(
        f"{p.name} (port base {p.port_base})" for p in parts), flush=True)
    shared_setup()
    try:
        with sims(parts, folder) as done:
            up_s = time.monotonic() - t0
            _all_at_once([partial(_run_part, p, [
                sys.executable, "-m", "pytest", *tests, f"--run-id={p.run_id}", f"--reports-dir={folder / 'parts'}",
                f"--backends={','.join(p.backends)}", *options, *passthrough],
                folder / "parts" / f"{p.run_id}.log", codes, children, done) for p in parts], children)
            print(f"gpupoc: sims up in {up_s:.0f} s; the parts' suites in {time.monotonic() - t0 - up_s:.0f} s "
                  "(wall, all at once)", flush=True)
    finally:
        if any((folder / "parts" / p.run_id / "record.json").exists() for p in parts):
            write_record(cfg.run_id, folder, parts)
    return exit_code(codes, parts)


def shared_setup() -> None:
    """What every part would otherwise make at the same moment, made once before they start: the load generator's
    environment. A failure is said here, and the cases that need it end in an ERROR naming it."""
    made = loadgen.ensure(say=lambda line: print(line, flush=True))
    if isinstance(made, str):
        print(f"gpupoc: the load generator could not be made ({made}); inference.latency will be an ERROR",
              file=sys.stderr, flush=True)


def merged_junit(reports: list[Path]) -> str:
    """One JUnit file of the parts' (<testsuites> holding each part's <testsuite>, named by its part)."""
    merged = ElementTree.Element("testsuites")
    for path in reports:
        root = ElementTree.parse(path).getroot()
        for suite in ([root] if root.tag == "testsuite" else list(root)):
            suite.set("name", path.parent.name)
            merged.append(suite)
    return ElementTree.tostring(merged, encoding="unicode")


def write_record(run_id: str, folder: Path, parts: list[Part]) -> Path:
    """record.json, record.html and requests.json of the run, from those of its parts."""
    found = [p for p in parts if (folder / "parts" / p.run_id / "record.json").exists()]
    missing = [p.name for p in parts if p not in found]
    if missing:
        print(f"gpupoc: no record from part(s) {', '.join(missing)}: see reports/{run_id}/parts/*.log",
              file=sys.stderr)
    if not found:
        raise SimError(f"no part of run {run_id} wrote a record: see reports/{run_id}/parts/*.log")
    record = merge(run_id, [(p.name, load_record(folder / "parts" / p.run_id / "record.json")) for p in found])
    if missing:  # the record says it is not whole
        record.interrupted = True
        record.target["parts_without_a_record"] = missing
    record.write(folder / "record.json")
    (folder / "record.html").write_text(page(record))
    requests = {json.dumps(r, sort_keys=True) for p in found
                for r in _requests(folder / "parts" / p.run_id / REQUESTS_FILE)}
    (folder / REQUESTS_FILE).write_text(json.dumps([json.loads(r) for r in sorted(requests)], indent=1) + "\n")
    junits = [folder / "parts" / p.run_id / "junit.xml" for p in found]
    (folder / "junit.xml").write_text(merged_junit([j for j in junits if j.exists()]))
    print(f"gpupoc: acceptance record: {folder / 'record.html'} (JSON: {folder / 'record.json'})")
    return folder / "record.json"


def _requests(path: Path) -> list[dict[str, object]]:
    return json.loads(path.read_text()) if path.exists() else []


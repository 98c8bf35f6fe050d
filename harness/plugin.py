"""gpupoc's pytest plugin: options, configuration, fixtures, outcomes.

Options are read once in pytest_configure into a RunConfig (validated before any test runs).
A HarnessError in a test is reported as ERROR, a CriterionViolation as FAIL, an absent backend
or capability as SKIP with its reason.
"""

from __future__ import annotations

import functools
import json
import signal
import threading
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from harness import backends as backend_registry, criteria
from harness.run import headstart
from harness.setup import preflight
from harness.core import progress
from harness.backends import Backend
from harness.backends.slurm import SlurmBackend
from harness.jobs.slurm.system import SlurmJobs
from harness.cluster.cleanup import delete_namespace, new_namespace, sweep
from harness.config.options import OPTIONS, RunConfig, resolve
from harness.criteria.governance.audit import Submitted
from harness.criteria.governance.cost_attribution import Held
from harness.run.environment import Down, EnvironmentWatch, Part, judged
from harness.core.errors import ConfigError, HarnessError
from harness.run.outcomes import ERROR, classify
from harness.run import collect as record
from harness.record.evidence import Evidence
from harness.core.redact import redact_text
from harness.setup.references import describe_missing, missing_references
from harness.cluster.runlock import EXIT_LOCKED, LockHeld, RunLock, identity
from harness.config.profile import Profile
from harness.cluster.prometheus import Prometheus
from harness.cluster.safety import destructive_refusal
from harness.setup.queue_model import apply_queue_model, may_create_queue_model
from harness.cluster.rbac import REQUESTS_FILE
from harness.targets import sim
from harness.targets.target import Target, connect
from harness.jobs.kubernetes import Workloads

CONFIG_KEY = pytest.StashKey[RunConfig]()
TARGET_KEY = pytest.StashKey[Target]()
WATCH_KEY = pytest.StashKey[EnvironmentWatch]()
LOCK_KEY = pytest.StashKey[RunLock]()
SETUP_START_KEY = pytest.StashKey[float]()
DISRUPTED_KEY = pytest.StashKey[set[str]]()
SUBMITTED_KEY = pytest.StashKey[list[Submitted]]()
HELD_KEY = pytest.StashKey[list[Held]]()
HEAD_STARTS_KEY = pytest.StashKey[dict[str, headstart.HeadStart]]()
LATE_KEY = pytest.StashKey[set[str]]()
SWEEP_TIMEOUT_S = 30.0


def apply_queue_model_if_allowed(target: Target, profile: Profile, slurm: bool = False) -> bool:
    if not may_create_queue_model(target):
        return False
    with target.seam.requests.not_the_runners():  # an admin's set-up, not in the runner's role
        apply_queue_model(target, profile, say=lambda _: None, slurm=slurm)
    return True


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpupoc", "GPU scheduling POC")
    for name, (env, help_text) in OPTIONS.items():
        group.addoption(f"--{name.replace('_', '-')}", dest=f"gpupoc_{name}", default=None,
                        help=f"{help_text} [env {env}]")


def _terminated(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if threading.current_thread() is threading.main_thread():
        # a CI job's timeout sends SIGTERM: end like Ctrl-C, so the record is written, the run swept, the lock freed
        signal.signal(signal.SIGTERM, _terminated)
    config.addinivalue_line("markers", "gpupoc_last: run after every other test (the audit of the whole run)")
    config.addinivalue_line("markers", "scale: the scale suite (run when asked: --scale on)")
    config.addinivalue_line("markers", "head_start(observe, wanted): the case observes from the session's start, "
                                       "beside the others (harness/run/headstart.py)")
    options = {name: config.getoption(f"gpupoc_{name}") for name in OPTIONS}
    try:
        config.stash[CONFIG_KEY] = resolve(options)
    except ConfigError as exc:
        raise pytest.UsageError(f"gpupoc: {exc}") from exc
    record.start(config, config.stash[CONFIG_KEY])
    if config.stash[CONFIG_KEY].progress:
        progress.enable(functools.partial(_say_live, config))


def _say_live(config: pytest.Config, line: str) -> None:
    """A progress line on the terminal now, not in a test's captured output."""
    capture = config.pluginmanager.getplugin("capturemanager")
    writer = config.get_terminal_writer()
    if capture is None:
        writer.line(line)
        return
    with capture.global_and_fixture_disabled():
        if writer.width_of_current_line:  # after pytest's own progress characters: a line of its own
            writer.line()
        writer.line(line)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if not item.nodeid.startswith("suites/"):
        return  # the project's own tests: pytest's own progress is enough
    params = getattr(item, "callspec", None)
    progress.case_started(record.criterion_of(item), str(params.params.get("backend", "-")) if params else "-",
                          item.nodeid)


def run_config(config: pytest.Config) -> RunConfig:
    return config.stash[CONFIG_KEY]


@pytest.fixture(scope="session")
def gpupoc_config(pytestconfig: pytest.Config) -> RunConfig:
    return run_config(pytestconfig)


@pytest.fixture(scope="session")
def target(pytestconfig: pytest.Config, gpupoc_config: RunConfig) -> Target:
    """The cluster under test, connected once per session (the sim is started when it is the target)."""
    return connected(pytestconfig)


def connected(config: pytest.Config) -> Target:
    """Connect, take the run lock, pass the preflight (or end the run with its table), once per session."""
    if TARGET_KEY not in config.stash:
        cfg = run_config(config)
        config.stash[TARGET_KEY] = found = connect(cfg)
        take_run_lock(config, found, cfg)
        preflight_or_exit(config, found, cfg)
        remember_tenant_secrets(config, found, cfg.profile)
        logged = sim_faults if found.kind == "sim" else None
        config.stash[WATCH_KEY] = EnvironmentWatch(environment_parts(found), logged).start()
    return config.stash[TARGET_KEY]


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """A run of the suites meets its cluster (and its preflight) before the first case starts; cases with a head
    start begin observing."""
    if not session.config.option.collectonly and any(i.nodeid.startswith("suites/") for i in session.items):
        try:
            target = connected(session.config)
        except HarnessError as exc:  # nothing to test against: one line, not an ERROR per case
            pytest.exit(f"gpupoc: {exc}", returncode=2)
        start_head_starts(session, target)


def start_head_starts(session: pytest.Session, target: Target) -> None:
    cfg = run_config(session.config)
    late = session.config.stash.get(LATE_KEY, set())  # as the items were ordered
    started = session.config.stash.setdefault(HEAD_STARTS_KEY, {})
    for item in session.items:
        name, mark = headstart.backend_of(item), headstart.marked(item)
        if name not in late or mark is None or headstart.skipped(item) or \
                not headstart.wanted_here(item, backend_registry.ALL, target.kind):
            continue
        backend = backend_registry.ALL[name]
        if backend_unavailable(name, target.api) or not isinstance(backend, SlurmBackend):
            continue  # SKIP when its turn comes; only a job system outside Kubernetes needs no queue model first
        try:
            jobs = backend.job_system(cfg.profile, cfg.run_id, item.nodeid, target.kind, cfg.apply_queue_model)
        except (HarnessError, ConfigError):
            continue  # the case meets it again in its turn, and says so
        started[item.nodeid] = headstart.HeadStart(item.nodeid, name, jobs).run(mark[0], backend, cfg.profile)
        progress.say(f"▶ head start: {record.criterion_of(item)} [{name}] observes from now, beside the cases "
                     f"before it ({item.nodeid})")


def preflight_or_exit(config: pytest.Config, target: Target, cfg: RunConfig) -> None:
    """The preflight's table: its warnings shown, a blocking problem ends the run before any case starts."""
    checks = preflight.run_preflight(target, cfg)
    writer = config.get_terminal_writer()
    if preflight.blocked(checks):
        pytest.exit(f"gpupoc: the cluster is not ready for this run\n{preflight.table(checks)}", returncode=2)
    for check in checks:
        if check.status != preflight.OK:
            writer.line(f"gpupoc: preflight: {check.line()}", yellow=True)


def remember_tenant_secrets(config: pytest.Config, target: Target, profile: Profile) -> None:
    """The values of the Secrets in the tenants' namespaces are redacted wherever they would appear."""
    core = client.CoreV1Api(target.api)
    for tenant in profile.tenants:
        try:
            record.remember_secrets(config, core, tenant.namespace)
        except (client.ApiException, HarnessError, OSError):
            continue  # not there yet (the queue model creates it) or not readable: nothing of it to redact


def take_run_lock(config: pytest.Config, target: Target, cfg: RunConfig) -> None:
    """One run at a time on a cluster (harness.cluster.runlock); a run that finds it held stops with EXIT_LOCKED."""
    if cfg.run_lock is None:
        return
    lock = RunLock(target.api, *cfg.run_lock, identity(cfg.run_id))
    writer = config.get_terminal_writer()
    try:
        lock.acquire(cfg.wait_lock_s, say=lambda line: writer.line(line, yellow=True))
    except LockHeld as exc:
        pytest.exit(f"gpupoc: {exc}", returncode=EXIT_LOCKED)
    config.stash[LOCK_KEY] = lock
    if lock.owned:  # this run holds the cluster: what gpupoc objects remain belong to runs that died
        stale = sweep(target.api, None, SWEEP_TIMEOUT_S, say=lambda _: None)
        if stale:
            writer.line(f"gpupoc: what earlier runs left is still there: {'; '.join(stale)}", yellow=True)


def environment_parts(target: Target) -> list[Part]:
    """What the environment watch samples: on the sim, each of its processes (running, not frozen). On other
    targets the seam and the Prometheus client see outages of what they call."""
    if target.kind != "sim":
        return []
    return [Part(name, functools.partial(sim.component_problem, name)) for name in sim.component_names()]


def sim_faults() -> list[Down]:
    return [Down(f["component"], f["problem"], f["from"], f["to"], injected=True) for f in sim.faults_injected()]


@pytest.fixture()
def disrupts(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """disrupts("kueue"): this test takes that part of the environment down on purpose; the environment watch does
    not hold it against the test."""
    return lambda part: request.node.stash.setdefault(DISRUPTED_KEY, set()).add(part)


@pytest.fixture(scope="session")
def api(target: Target) -> client.ApiClient:
    return target.api


@pytest.fixture(scope="session")
def profile(gpupoc_config: RunConfig) -> Profile:
    return gpupoc_config.profile


@pytest.fixture(scope="session")
def prometheus(target: Target) -> Prometheus:
    """Prometheus of the target; ERROR (not FAIL) for the tests that need it when it is absent or down."""
    if not target.prometheus_url:
        raise HarnessError("no Prometheus for this target: pass --prometheus-url or set prometheus.url in the profile")
    prom = Prometheus(target.prometheus_url, budget_s=target.seam.budget_s, log=target.seam.log)
    reason = prom.reachable_reason()
    if reason:
        raise HarnessError(reason)
    return prom


@pytest.fixture()
def namespace(api: client.ApiClient, gpupoc_config: RunConfig, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace labelled with the run and the test, deleted at teardown within the cleanup timeout."""
    core = client.CoreV1Api(api)
    name = new_namespace(core, gpupoc_config.run_id, request.node.nodeid)
    yield name
    record.remember_secrets(request.config, core, name)
    leftover = delete_namespace(core, name, gpupoc_config.profile.timeouts.cleanup)
    record.amend_result(request.config, request.node.nodeid, [], [leftover] if leftover else [])


_AVAILABILITY: dict[str, str | None] = {}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests taking `backend` run once per backend of --backends (skipped where absent)."""
    explicit = any("backend" in str(m.args[0]) for m in metafunc.definition.iter_markers("parametrize"))
    if "backend" in metafunc.fixturenames and not explicit:
        names = run_config(metafunc.config).backends
        metafunc.parametrize("backend", names, ids=names, indirect=True)


def backend_unavailable(name: str, api: client.ApiClient) -> str | None:
    if name not in _AVAILABILITY:
        _AVAILABILITY[name] = backend_registry.ALL[name].unavailable_reason(api)
    return _AVAILABILITY[name]


@pytest.fixture()
def backend(request: pytest.FixtureRequest, api: client.ApiClient) -> Backend:
    name: str = request.param
    reason = backend_unavailable(name, api)
    if reason:
        pytest.skip(reason)
    return backend_registry.ALL[name]


@pytest.fixture()
def head_start(request: pytest.FixtureRequest) -> headstart.HeadStart | None:
    """This case's head start (harness/run/headstart.py), if the session gave it one."""
    return request.config.stash.get(HEAD_STARTS_KEY, {}).get(request.node.nodeid)


@pytest.fixture(scope="session")
def queue_model(target: Target, gpupoc_config: RunConfig) -> Profile:
    """The tenants' queues exist: applied from manifests/setup/ on the sim and kind (unless --queue-model keep),
    the cluster's own elsewhere."""
    if gpupoc_config.apply_queue_model:
        apply_queue_model_if_allowed(target, gpupoc_config.profile, slurm="slurm" in gpupoc_config.backends)
    else:
        missing = missing_references(target.api, gpupoc_config.profile, gpupoc_config.backends)
        if missing:  # before any test creates anything
            pytest.exit(f"gpupoc: {describe_missing(missing)}", returncode=2)
    return gpupoc_config.profile


@pytest.fixture()
def workloads(api: client.ApiClient, target: Target, backend: Backend, gpupoc_config: RunConfig, queue_model: Profile,
              request: pytest.FixtureRequest) -> Iterator[Workloads | SlurmJobs]:
    """Submit jobs through this test's backend; what it created is deleted at teardown, leftovers reported."""
    head_starts = request.config.stash.get(HEAD_STARTS_KEY, {})
    for other in head_starts.values():  # it shares their cluster: its jobs go in once they have observed
        if other.backend == backend.name and other.nodeid != request.node.nodeid:
            other.wait(queue_model.timeouts.complete + headstart.MAX_S,
                       f"the head start of {other.nodeid} (its cluster is shared)")
    mine = head_starts.get(request.node.nodeid)
    if isinstance(backend, SlurmBackend):  # not Kubernetes: its jobs go through slurmrestd
        jobs = mine.jobs if mine is not None and isinstance(mine.jobs, SlurmJobs) else \
            backend.job_system(queue_model, gpupoc_config.run_id, request.node.nodeid, target.kind,
                               gpupoc_config.apply_queue_model)
        yield jobs
        head_starts.pop(request.node.nodeid, None)  # its jobs are this teardown's, taken or not
        request.config.stash.setdefault(SUBMITTED_KEY, []).extend(jobs.created)
        call = request.node.stash.get(CALL_REPORT_KEY, None)
        try:
            diagnostics = jobs.diagnostics() if call is not None and call.failed else []
        finally:  # what the test submitted is cancelled even when slurmrestd cannot be read
            leftovers = jobs.close()
        request.config.stash.setdefault(HELD_KEY, []).extend(jobs.gpus_held(time.time()))
        record.amend_result(request.config, request.node.nodeid, diagnostics, leftovers, jobs.samples.as_list())
        return
    submitter = target.seam.as_tenant if queue_model.submit_as == "tenant" else None
    tracked = Workloads(api, backend, gpupoc_config.run_id, request.node.nodeid, queue_model.timeouts.delete,
                        submitter, simulated=target.kind == "sim")
    yield tracked
    request.config.stash.setdefault(SUBMITTED_KEY, []).extend(tracked.created)
    call = request.node.stash.get(CALL_REPORT_KEY, None)
    diagnostics = tracked.diagnostics() if call is not None and call.failed else []
    leftovers = tracked.close()
    # after close: its pods' watches saw each pod go (a pod still there holds its GPUs until now)
    request.config.stash.setdefault(HELD_KEY, []).extend(tracked.gpus_held(queue_model.gpu.resource, time.time()))
    record.amend_result(request.config, request.node.nodeid, diagnostics, leftovers, tracked.samples.as_list())


@pytest.fixture()
def submitted(pytestconfig: pytest.Config) -> list[Submitted]:
    """Every object the run's tests submitted so far (for the audit criterion, which runs last)."""
    found: list[Submitted] = pytestconfig.stash.get(SUBMITTED_KEY, [])
    return list(found)


@pytest.fixture()
def gpus_held(pytestconfig: pytest.Config) -> list[Held]:
    """When each pod the run's tests submitted so far held GPUs (for cost attribution, which runs last)."""
    found: list[Held] = pytestconfig.stash.get(HELD_KEY, [])
    return list(found)


SCALE_NOT_RUN = ("not run: the scale suite runs when asked (gpupoc run --scale on, GPUPOC_SCALE=on, or name "
                 "suites/scale); the nightly runs it")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked gpupoc_last (audit: over everything the run submitted) run after all others, and before them the
    cases of a backend with a head start (harness/run/headstart.py); the scale suite's cases are SKIP "not run" unless
    asked for (a flag, or its path named)."""
    kind = "sim" if run_config(config).targets_sim else "kubeconfig"
    config.stash[LATE_KEY] = late = headstart.late_backends(items, backend_registry.ALL, kind)
    items.sort(key=lambda item: headstart.order(item, late, backend_registry.ALL, kind))
    named = any("suites/scale" in str(arg) for arg in config.args)
    if not (run_config(config).scale or named):
        for item in items:
            if item.get_closest_marker("scale") is not None:
                item.add_marker(pytest.mark.skip(reason=SCALE_NOT_RUN))


EVIDENCE_KEY = pytest.StashKey[list[Evidence]]()
CALL_REPORT_KEY = pytest.StashKey[pytest.TestReport]()


@pytest.fixture()
def evidence(request: pytest.FixtureRequest, profile: Profile) -> Callable[[str], Evidence]:
    """evidence(criterion id) -> the Evidence this test fills, with the criterion's thresholds from the profile;
    it goes into the record."""
    backend_name = getattr(getattr(request.node, "callspec", None), "params", {}).get("backend", "-")

    def start(criterion_id: str) -> Evidence:
        found = Evidence.of(criteria.get(criterion_id), str(backend_name), profile.thresholds[criterion_id])
        request.node.stash.setdefault(EVIDENCE_KEY, []).append(found)
        return found
    return start


@pytest.fixture()
def destructive(target: Target, gpupoc_config: RunConfig) -> Callable[[str], None]:
    """Call destructive("fail a pod") before a destructive step: it SKIPs where the step is not allowed."""
    def guard(step: str) -> None:
        reason = destructive_refusal(target.kind, target.context, gpupoc_config.allow_destructive, step)
        if reason:
            pytest.skip(reason)
    return guard


def is_harness_error(excinfo: pytest.ExceptionInfo[BaseException] | None) -> bool:
    """The environment or the harness broke (outcomes.classify): ERROR, not FAIL."""
    return excinfo is not None and classify(excinfo.value) == ERROR


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    if report.when == "setup":
        item.stash[SETUP_START_KEY] = report.start  # a fault during setup counts for the test too
    if report.when == "call":
        item.stash[CALL_REPORT_KEY] = report  # lets fixture teardowns know the test failed
    if report.when == "call" and report.failed and is_harness_error(call.excinfo):
        report.user_properties.append(("gpupoc_outcome", "ERROR"))
    if report.when == "call":
        note_outages(item, report)
        note_environment_faults(item, report, call)
    if report.failed:  # what the terminal, JUnit and pytest-html show of a failure: no secret in it
        redact_report(report, record.all_secrets(item.config, item.config.stash.get(TARGET_KEY, None)))
    outcome = record_outcome(report)
    if outcome:
        record.add_result(item.config, item, report, outcome, item.stash.get(EVIDENCE_KEY, []))
    return report


def redact_report(report: pytest.TestReport, secrets: tuple[str, ...]) -> None:
    report.sections = [(title, redact_text(content, secrets)) for title, content in report.sections]
    if report.longrepr is not None and not isinstance(report.longrepr, tuple):
        text = str(report.longrepr)
        clean = redact_text(text, secrets)
        if clean != text:
            report.longrepr = clean


def note_outages(item: pytest.Item, report: pytest.TestReport) -> None:
    """API and Prometheus outages during the test, bridged by the retries or not, go into its evidence; a FAIL
    measured through one is an ERROR naming it (a bridged outage still delayed what was timed)."""
    target = item.config.stash.get(TARGET_KEY, None)
    if target is None:
        return
    outages = target.seam.outages_since(item.stash.get(SETUP_START_KEY, report.start))
    for outage in outages:
        for ev in item.stash.get(EVIDENCE_KEY, []):
            ev.note(outage.describe())
    if outages and report.failed:
        mark_environment_fault(report, "; ".join(o.describe() for o in outages))


def mark_environment_fault(report: pytest.TestReport, what: str) -> None:
    cause = f"environment fault during the test: {what}"
    report.user_properties.append(("gpupoc_environment", cause))
    report.sections.append(("gpupoc environment", cause))
    if ("gpupoc_outcome", "ERROR") not in report.user_properties:
        report.user_properties.append(("gpupoc_outcome", "ERROR"))


def note_environment_faults(item: pytest.Item, report: pytest.TestReport, call: pytest.CallInfo[None]) -> None:
    """What was down during the test (from its setup on): noted in its evidence. A fault of the environment turns
    a FAIL into an ERROR naming it (the criterion was not judged); the backend's own controller crashing by
    itself stays a FAIL, with the crash in the evidence."""
    watch = item.config.stash.get(WATCH_KEY, None)
    if watch is None:
        return
    start = item.stash.get(SETUP_START_KEY, report.start)
    downs = watch.faults(start, report.stop, item.stash.get(DISRUPTED_KEY, set()))
    name = getattr(getattr(item, "callspec", None), "params", {}).get("backend")
    own, schedulers = backend_parts(str(name) if name else None)
    faults, crashes = judged(downs, own, schedulers) if name else (downs, [])
    now = time.time()
    for ev in item.stash.get(EVIDENCE_KEY, []):
        for fault in faults:
            ev.note(f"environment: {fault.describe(now)}")
        for crash in crashes:
            ev.note(f"{name}'s own controller: {crash.describe(now)} (not injected: counted against it)")
    if faults and report.failed:
        mark_environment_fault(report, "; ".join(f.describe(now) for f in faults))


def backend_parts(name: str | None) -> tuple[set[str], set[str]]:
    """(the sim processes of backend `name`, those of every backend)."""
    def parts(backend: Backend) -> set[str]:
        c = backend.controllers
        return set(c.sim + c.needs) if c else set()
    every = set().union(*(parts(b) for b in backend_registry.ALL.values()))
    return (parts(backend_registry.ALL[name]) if name in backend_registry.ALL else every), every


def record_outcome(report: pytest.TestReport) -> str | None:
    """The record's outcome of a test, from the report of the phase that decided it."""
    if report.when == "call":
        if report.passed:
            return "PASS"
        if report.skipped:
            return "SKIP"
        return "ERROR" if ("gpupoc_outcome", "ERROR") in report.user_properties else "FAIL"
    if report.when == "setup" and not report.passed:
        return "SKIP" if report.skipped else "ERROR"
    return None


def pytest_html_report_title(report: Any) -> None:
    """The page's title names the run and its target (completed with the target's context at the end)."""
    record.name_report(report)


def pytest_html_results_summary(prefix: list[str], summary: list[str], postfix: list[str],
                                session: pytest.Session) -> None:
    prefix.append(record.html_sections(session.config))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    paths = config.stash.get(record.PATHS_KEY, None)
    if paths is not None:
        terminalreporter.write_sep("-", f"gpupoc acceptance record: {paths['html']} (JSON: {paths['json']})")


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> Any:
    if report.when == "call" and ("gpupoc_outcome", "ERROR") in report.user_properties:
        return "error", "E", ("ERROR", {"red": True})
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Ctrl-C or not: complete the record, sweep whatever this run left in the cluster, say what refused to go."""
    target = session.config.stash.get(TARGET_KEY, None)
    watch = session.config.stash.get(WATCH_KEY, None)
    if watch is not None:
        watch.stop()
    if target is not None:
        remember_tenant_secrets(session.config, target, run_config(session.config).profile)
    unclaimed = session.config.stash.get(HEAD_STARTS_KEY, {})
    for nodeid, left in list(unclaimed.items()):  # whose case never ended (interrupted)
        unclaimed.pop(nodeid, None)
        try:
            lines = left.jobs.close()
        except (HarnessError, ConfigError) as exc:
            lines = [f"the jobs of {nodeid}'s head start: {exc}"]
        for line in lines:
            session.config.get_terminal_writer().line(f"gpupoc: left behind: {line}", yellow=True)
    record.finish(session, target)
    if target is None:
        return
    cfg = run_config(session.config)
    lock = session.config.stash.get(LOCK_KEY, None)
    try:
        try:
            leftovers = sweep(target.api, cfg.run_id, SWEEP_TIMEOUT_S, say=lambda _: None)
        except (client.ApiException, HarnessError, OSError) as exc:
            leftovers = [f"sweep of run {cfg.run_id} failed: {exc}; `gpupoc clean --run-id {cfg.run_id}` removes it"]
        for line in leftovers:
            session.config.get_terminal_writer().line(f"gpupoc: left behind: {line}", yellow=True)
        if lock is not None and lock.lost:
            session.config.get_terminal_writer().line(f"gpupoc: the run lock was {lock.lost} during this run: "
                                                      "another run may have shared the cluster", red=True)
    finally:
        if lock is not None:
            try:
                lock.release()
            except (client.ApiException, HarnessError, OSError) as exc:
                session.config.get_terminal_writer().line(f"gpupoc: run lock not released ({exc}); it expires by "
                                                          "itself", yellow=True)
        write_requests_seen(session.config, target)
        if target.started_sim:
            sim.down(say=lambda _: None)


def write_requests_seen(config: pytest.Config, target: Target) -> None:
    """requests.json beside the record: what the runner asked of the API server, as RBAC requests (the
    least-privilege role in manifests/rbac/ is checked against it: `gpupoc rbac --check`)."""
    paths = config.stash.get(record.PATHS_KEY, None)
    if paths is not None:
        Path(paths["json"]).with_name(REQUESTS_FILE).write_text(
            json.dumps([r.as_dict() for r in target.seam.requests.sorted()], indent=1) + "\n")


def pytest_unconfigure(config: pytest.Config) -> None:
    record.redact_files(config, config.stash.get(TARGET_KEY, None))

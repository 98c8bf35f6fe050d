"""gpupoc's pytest plugin: options, configuration, fixtures, outcomes.

Options are read once in pytest_configure into a RunConfig (validated before any test runs).
A HarnessError in a test is reported as ERROR, a CriterionViolation as FAIL, an absent backend
or capability as SKIP with its reason.
"""

from __future__ import annotations

import functools
import signal
import threading
from collections.abc import Generator
from typing import Any

import pytest

from harness import backends as backend_registry
from harness.run import headstart, collect as record
from harness.core import hostload, progress
from harness.config.options import OPTIONS, resolve
from harness.config.workloads import NO_SAMPLE
from harness.core.errors import ConfigError, CriterionViolation, HarnessError
from harness.run.keys import (CALL_REPORT_KEY, CONFIG_KEY, EVIDENCE_KEY, LATE_KEY, LOAD_KEY, SETUP_START_KEY,
                              TARGET_KEY, run_config)
from harness.run.session import _say_live, _terminated, connected, start_head_starts, end_of_run
from harness.run import repeat
from harness.targets.target import planned_features
from harness.run.outcomes import INCONCLUSIVE
from harness.run.reports import (is_harness_error, is_inconclusive, note_environment_faults, note_outages,
                                 record_outcome, redact_report)
from harness.run.fixtures import (api, backend, destructive, destructive_refused, disrupts, evidence, gpupoc_config,
                                  gpus_held, head_start, namespace, namespaces_going, profile, prometheus, queue_model,
                                  quota_reserved, submitted, target, workloads)

__all__ = [  # the fixtures: pytest finds them on the plugin
    "api", "backend", "destructive", "destructive_refused", "disrupts", "evidence", "gpupoc_config", "gpus_held",
    "head_start", "namespace", "namespaces_going", "profile", "prometheus", "queue_model", "quota_reserved",
    "submitted", "target", "workloads"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpupoc", "GPU scheduling POC")
    for name, (env, help_text) in OPTIONS.items():
        group.addoption(f"--{name.replace('_', '-')}", dest=f"gpupoc_{name}", default=None,
                        help=f"{help_text} [env {env}]")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if threading.current_thread() is threading.main_thread():
        # a CI job's timeout sends SIGTERM: end like Ctrl-C, so the record is written, the run swept, the lock freed
        signal.signal(signal.SIGTERM, _terminated)
    config.addinivalue_line("markers", "gpupoc_last: run after every other test (the audit of the whole run)")
    config.addinivalue_line("markers", "scale: the scale suite (run when asked: --scale on)")
    config.addinivalue_line("markers", "quiet(backends=()): measures the host's CPU (on every backend, or on those "
                                       "named): runs alone among the runs sharing the host (harness/run/hostshare.py)")
    config.addinivalue_line("markers", "sample: runs the workload sample (SKIP before it starts where the profile "
                                       "names no sample image)")
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


def pytest_runtest_setup(item: pytest.Item) -> None:
    if not item.nodeid.startswith("suites/"):
        return  # the project's own tests: pytest's own progress is enough
    params = getattr(item, "callspec", None)
    progress.case_started(record.criterion_of(item), str(params.params.get("backend", "-")) if params else "-",
                          item.nodeid)


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


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests taking `backend` run once per backend of --backends (skipped where absent)."""
    explicit = any("backend" in str(m.args[0]) for m in metafunc.definition.iter_markers("parametrize"))
    if "backend" in metafunc.fixturenames and not explicit:
        names = run_config(metafunc.config).backends
        metafunc.parametrize("backend", names, ids=names, indirect=True)


SCALE_NOT_RUN = ("not run: the scale suite runs when asked (gpupoc run --scale on, GPUPOC_SCALE=on, or name "
                 "suites/scale); the nightly runs it")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Cases pinned to a backend that --backends leaves out are deselected; tests marked gpupoc_last (audit: over
    everything the run submitted) run after all others, and before them the cases of a backend with a head start
    (harness/run/headstart.py); the scale suite's cases are SKIP "not run" unless asked for (a flag, or its path
    named)."""
    cfg = run_config(config)
    pinned_elsewhere = [i for i in items if i.nodeid.startswith("suites/") and getattr(
        getattr(i, "callspec", None), "params", {}).get("backend", cfg.backends[0]) not in cfg.backends]
    if pinned_elsewhere:  # a case pinned to a backend (`parametrize("backend", ["default"])`) that --backends leaves out
        config.hook.pytest_deselected(items=pinned_elsewhere)
        dropped = {i.nodeid for i in pinned_elsewhere}
        items[:] = [i for i in items if i.nodeid not in dropped]
    features = planned_features(cfg)
    config.stash[LATE_KEY] = late = headstart.late_backends(items, backend_registry.ALL, features)
    items.sort(key=lambda item: headstart.order(item, late, backend_registry.ALL, features))
    repeat.time_limits(items, config)
    if not cfg.profile.workloads.sample.image:  # skipped before their turn: a quiet case takes no host to skip
        for item in items:
            if item.get_closest_marker("sample") is not None:
                item.add_marker(pytest.mark.skip(reason=NO_SAMPLE))
    named = any("suites/scale" in str(arg) for arg in config.args)
    if not (cfg.scale or named):
        for item in items:
            if item.get_closest_marker("scale") is not None:
                item.add_marker(pytest.mark.skip(reason=SCALE_NOT_RUN))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """A case (a test that records evidence) runs again while it cannot decide (harness/run/repeat.py)."""
    return repeat.protocol(item, nextitem) if repeat.is_a_case(item) else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    if report.when == "setup":
        item.stash[SETUP_START_KEY] = report.start  # a fault during setup counts for the test too
        item.stash[LOAD_KEY] = hostload.snapshot()
    if report.when == "call":
        item.stash[CALL_REPORT_KEY] = report  # lets fixture teardowns know the test failed
        note_host_load(item)
    if report.when == "call" and report.failed and is_harness_error(call.excinfo):
        report.user_properties.append(("gpupoc_outcome", "ERROR"))
    if report.when == "call" and report.failed and is_inconclusive(call.excinfo):
        report.user_properties.append(("gpupoc_outcome", INCONCLUSIVE))
    if (report.when == "call" and record_outcome(report) == "FAIL" and repeat.is_a_case(item)
            and call.excinfo is not None and call.excinfo.errisinstance(CriterionViolation)):  # not an assert's
        not_the_cluster = repeat.measured_the_host(item.stash.get(EVIDENCE_KEY, []))
        if not_the_cluster:  # a time measured on a saturated host: run again, or say it could not decide
            report.user_properties.append(("gpupoc_outcome", INCONCLUSIVE))
            item.stash[repeat.NOT_POOLED_KEY] = not_the_cluster
            for ev in item.stash.get(EVIDENCE_KEY, []):
                ev.notes.append(not_the_cluster)
    if report.when == "call":
        note_outages(item, report)
        note_environment_faults(item, report, call)
    if report.failed:  # what the terminal, JUnit and pytest-html show of a failure: no secret in it
        redact_report(report, record.all_secrets(item.config, item.config.stash.get(TARGET_KEY, None)))
    outcome = record_outcome(report)
    if outcome and repeat.is_a_case(item) and repeat.runs_again(item, outcome):
        report.user_properties.append(("gpupoc_repeat", True))  # not the record's: the case runs again
    elif outcome:
        record.add_result(item.config, item, report, outcome, item.stash.get(EVIDENCE_KEY, []))
    return report


def note_host_load(item: pytest.Item) -> None:
    """The host's CPU load over the case (its set-up to the end of its call) beside its evidence."""
    first = item.stash.get(LOAD_KEY, None)
    if first is None:
        return
    load = hostload.between(first, hostload.snapshot())
    for ev in item.stash.get(EVIDENCE_KEY, []):
        ev.host.update(load)


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
    if report.when == "call" and ("gpupoc_outcome", INCONCLUSIVE) in report.user_properties:
        return "failed", "I", ("INCONCLUSIVE", {"blue": True})
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Ctrl-C or not: complete the record, sweep whatever this run left in the cluster, say what refused to go."""
    end_of_run(session)


def pytest_unconfigure(config: pytest.Config) -> None:
    record.redact_files(config, config.stash.get(TARGET_KEY, None))

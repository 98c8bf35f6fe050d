"""A test's report: its outcome for the record (PASS, FAIL, ERROR, SKIP), outages and environment faults that
turn a FAIL into an ERROR, and no secret in what is shown."""

from __future__ import annotations

import time

import pytest

from harness import backends as backend_registry
from harness.backends import Backend
from harness.run.environment import judged
from harness.run.outcomes import ERROR, INCONCLUSIVE, classify
from harness.core.redact import redact_text
from harness.run.keys import DISRUPTED_KEY, EVIDENCE_KEY, SETUP_START_KEY, TARGET_KEY, WATCH_KEY


def is_inconclusive(excinfo: pytest.ExceptionInfo[BaseException] | None) -> bool:
    return excinfo is not None and classify(excinfo.value) == INCONCLUSIVE


def is_harness_error(excinfo: pytest.ExceptionInfo[BaseException] | None) -> bool:
    """The environment or the harness broke (outcomes.classify): ERROR, not FAIL."""
    return excinfo is not None and classify(excinfo.value) == ERROR


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
        if ("gpupoc_outcome", "ERROR") in report.user_properties:
            return "ERROR"
        return INCONCLUSIVE if ("gpupoc_outcome", INCONCLUSIVE) in report.user_properties else "FAIL"
    if report.when == "setup" and not report.passed:
        return "SKIP" if report.skipped else "ERROR"
    return None

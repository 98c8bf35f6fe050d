"""A case that cannot decide runs again: its interval straddled a threshold (INCONCLUSIVE), so it repeats, up to
the profile's `max_runs`, and each check pools the samples of every run (record/evidence.py, core/estimate.py).

Only the last run is reported and recorded; the earlier ones' checks travel to the next run on the item. Each run
has its own set-up and teardown of the case's own fixtures (a fresh namespace, its jobs deleted); the session's
and the module's stay.
"""

from __future__ import annotations

import os

import pytest
from _pytest.runner import call_and_report

from harness.core import progress
from harness.run import hostshare
from harness.record.evidence import Check, Evidence
from harness.run.keys import EVIDENCE_KEY, run_config
from harness.run.outcomes import FAIL, INCONCLUSIVE

RUN_KEY = pytest.StashKey[int]()          # this item's run, from 1
BEFORE_KEY = pytest.StashKey[dict[str, list[Check]]]()  # criterion -> the earlier runs' checks (pooled)
NOT_POOLED_KEY = pytest.StashKey[str]()  # why this run measured the host, not the cluster ('': it did not)
# The host's CPU pressure (PSI "some": the share of time some task waited for a CPU) over a case's window above
# which a time it measured is the host's as much as the cluster's. make poc's cases ran at 0.5-0.8 beside the other
# parts; kai's latency case, FAILed on its inter-token p99 (0.125 s [0.108, 0.136] against 0.1), at 0.97 (2026-12-05).
SATURATED_PRESSURE = 0.9


def is_a_case(item: pytest.Item) -> bool:
    """A test that records evidence of a criterion: a case of the suites (or a test written like one)."""
    return "evidence" in getattr(item, "fixturenames", ())


def max_runs(item: pytest.Item) -> int:
    return run_config(item.config).profile.max_runs


def time_limits(items: list[pytest.Item], config: pytest.Config) -> None:
    """pytest-timeout's limit (the ini's `timeout`) holds for one run of a case: a case that may run `max_runs`
    times gets that many, and a quiet case that may first wait for a quiet host (hostshare) that wait as well, so
    neither a repeat nor the wait is cut off as a hung test. A case's own `timeout` mark stays as written."""
    if not config.pluginmanager.hasplugin("timeout"):
        return
    # as pytest-timeout reads it: the command line, else PYTEST_TIMEOUT, else the ini; 0 is none
    given = config.getoption("timeout", None)
    per_run = float(given if given is not None else os.environ.get("PYTEST_TIMEOUT") or config.getini("timeout") or 0)
    if per_run <= 0:
        return
    for item in items:
        if is_a_case(item) and item.get_closest_marker("timeout") is None:
            wait = hostshare.QUIET_WAIT_S if hostshare.waits_for_quiet(item) else 0.0
            item.add_marker(pytest.mark.timeout((per_run + wait) * max_runs(item)))  # each run may wait again


def runs_again(item: pytest.Item, outcome: str) -> bool:
    """The call phase ended INCONCLUSIVE and the profile allows another run: this run is not the record's."""
    if item.get_closest_marker("gpupoc_last") is not None:
        return False  # it measures what the whole run did: a second run would measure the same again
    return outcome == INCONCLUSIVE and item.stash.get(RUN_KEY, 1) < max_runs(item)


def measured_the_host(evidence: list[Evidence]) -> str:
    """Pure: why a FAIL is no verdict on the cluster, else '': every check that missed is a time (seconds) and the
    host was saturated while the case measured it (its own load, or the other parts': not the cluster's)."""
    missed = [c for ev in evidence for c in ev.checks if c.verdict == FAIL]
    pressure = max((float(ev.host.get("cpu_pressure_some", 0.0)) for ev in evidence), default=0.0)
    if not missed or pressure < SATURATED_PRESSURE or any(c.unit.strip() != "s" for c in missed):
        return ""
    return (f"not a verdict on the cluster: the host was saturated while the case measured (CPU pressure "
            f"{pressure:.2f}, at or above {SATURATED_PRESSURE}), and what missed is a time the host's own load "
            f"lengthens ({'; '.join(c.describe() for c in missed)}); this run's samples are not pooled")


def earlier_checks(item: pytest.Item, criterion: str) -> list[Check]:
    return item.stash.get(BEFORE_KEY, {}).get(criterion, [])


def protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool:
    """pytest_runtest_protocol for a case of the suites: run it, again while it cannot decide; report the last."""
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    limit = max_runs(item)
    for run in range(1, limit + 1):
        item.stash[RUN_KEY] = run
        with hostshare.case_on_the_host(item):
            reports, again = _run_once(item, nextitem)
        if not again:
            for report in reports:
                item.ihook.pytest_runtest_logreport(report=report)
            break
        dropped = item.stash.get(NOT_POOLED_KEY, "")  # its samples left out of the pool
        item.stash[NOT_POOLED_KEY] = ""
        earlier: dict[str, list[Check]] = item.stash.get(BEFORE_KEY, {})
        pooled = dict(earlier) if dropped else {}
        for ev in [] if dropped else item.stash.get(EVIDENCE_KEY, []):
            pooled.setdefault(ev.criterion, []).extend(ev.checks)
        item.stash[BEFORE_KEY] = pooled
        item.stash[EVIDENCE_KEY] = []
        undecided = dropped or "; ".join(c.describe() for checks in pooled.values() for c in checks
                                         if c.verdict == INCONCLUSIVE)
        progress.say(f"gpupoc: {item.nodeid}: not decided in run {run} of {limit} ({undecided}); running it again"
                     + ("" if dropped else ", its samples pooled"))
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def _run_once(item: pytest.Item, nextitem: pytest.Item | None) -> tuple[list[pytest.TestReport], bool]:
    """pytest's runtestprotocol, except that a run to be repeated tears down only the case's own fixtures."""
    if hasattr(item, "_request") and not item._request:
        item._initrequest()  # type: ignore[attr-defined]  # a repeated item: its fixture request anew
    try:
        reports = [call_and_report(item, "setup", log=False)]
        if reports[0].passed:
            reports.append(call_and_report(item, "call", log=False))
        again = any(("gpupoc_repeat", True) in r.user_properties for r in reports if r.when == "call")
        following = item.parent if again else nextitem
        if item.session.shouldfail or item.session.shouldstop:
            following, again = None, False
        reports.append(call_and_report(item, "teardown", log=False, nextitem=following))
    finally:
        if hasattr(item, "_request"):
            item._request = False
            item.funcargs = None  # type: ignore[attr-defined]
    return reports, again

"""Scenario fit on recorded and built records: every verdict follows from the cells its scenario names."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from harness.config.profile import load_profile, parse_profile
from harness.core.errors import ConfigError
from harness.core.paths import REPO_ROOT
from harness.record.fit import BAD, DEFAULT_SCENARIOS, FINDINGS, FITS, NO_FIT, NOT_TESTED, fits, measured
from harness.record.merge import repeated
from harness.record.model import Record, Result, load_record
from harness.record.render import sections

RECORDS = Path(__file__).parents[2] / "fixtures" / "records"


def result(criterion: str, backend: str, outcome: str, not_checked: str = "") -> Result:
    check = {"name": "x", "measured": 1.0, "threshold": 2.0, "comparison": "<=", "unit": " s",
             "not_checked": not_checked, "passed": outcome == "PASS"}
    return Result(f"suites/x.py::{criterion}[{backend}]", criterion, backend, outcome,
                  "skipped: no queue" if outcome == "SKIP" else "", evidence=[{"checks": [check]}])


SCENARIOS = {"training": ("training.gang_admission", "training.queue_fairness"),
             "sharing": ("governance.tenant_isolation",)}


def test_each_verdict_follows_from_the_cells_its_scenario_names() -> None:
    record = Record("r", "now", "0", "c", results=[
        result("training.gang_admission", "a", "PASS"), result("training.queue_fairness", "a", "PASS"),
        result("training.gang_admission", "b", "FAIL"), result("training.queue_fairness", "b", "PASS"),
        result("training.gang_admission", "c", "PASS"), result("training.queue_fairness", "c", "SKIP"),
        result("training.gang_admission", "d", "SKIP"), result("training.queue_fairness", "d", "SKIP"),
        result("training.gang_admission", "e", "PASS", not_checked="no metric"),
        result("training.queue_fairness", "e", "PASS"),
        result("governance.tenant_isolation", "-", "FAIL"), result("governance.tenant_isolation", "a", "PASS")])
    got = {(f.scenario, f.backend): f for f in fits(record, SCENARIOS)}
    assert {k: f.verdict for k, f in got.items() if k[0] == "training"} == {
        ("training", "a"): FITS, ("training", "b"): NO_FIT, ("training", "c"): FINDINGS, ("training", "d"): NOT_TESTED,
        ("training", "e"): FINDINGS}
    assert got[("sharing", "a")].verdict == NO_FIT  # the once-per-cluster FAIL decides for every backend
    assert "-" not in {b for _, b in got}
    assert got[("training", "b")].findings[0].why == "x: 1 s (wanted <= 2 s)"
    assert "x not checked: no metric" in got[("training", "e")].findings[0].why


def test_on_a_recorded_run_a_failed_decider_never_reads_fits_and_the_worst_of_repeats_decides() -> None:
    record = load_record(RECORDS / "gang-schema3.json")
    for fit in fits(record):
        if any(d.outcome in BAD for d in fit.deciders):
            assert fit.verdict == NO_FIT
        if fit.verdict == FITS:
            assert all(d.outcome == "PASS" and not d.why for d in fit.deciders)
    repeated = copy.deepcopy(record)
    passed = next(r for r in repeated.results if r.outcome == "PASS" and r.criterion == "training.gang_admission")
    repeated.results.append(Result(passed.nodeid + "#2", passed.criterion, passed.backend, "FAIL"))
    fit = next(f for f in fits(repeated) if f.backend == passed.backend and f.scenario == "batch training")
    assert fit.verdict == NO_FIT


def test_the_page_opens_with_the_scenario_fit() -> None:
    html = sections(load_record(RECORDS / "gang-schema3.json"))
    assert html.index('id="gpupoc-fit"') < html.index('id="gpupoc-verdict"')
    assert all(s in html for s in DEFAULT_SCENARIOS) and "does not fit" in html


def test_a_profile_names_its_own_scenarios_of_known_criteria() -> None:
    assert load_profile(REPO_ROOT / "profiles" / "sim.yaml").scenarios == {}  # the record's defaults
    data = yaml.safe_load((REPO_ROOT / "profiles" / "sim.yaml").read_text())
    data["scenarios"] = {"notebooks": ["governance.queue_classes"]}
    assert parse_profile(data, "p").scenarios == {"notebooks": ("governance.queue_classes",)}
    data["scenarios"] = {"notebooks": ["governance.no_such"]}
    with pytest.raises(ConfigError, match=r"scenarios.notebooks: needs known criteria, got \['governance.no_such'\]"):
        parse_profile(data, "p")


def test_a_repeated_record_holds_every_runs_outcome_and_spread_and_the_worst_decides() -> None:
    first = load_record(RECORDS / "gang-schema3.json")
    second = copy.deepcopy(first)
    second.run_id = "again"
    target = next(r for r in second.results if r.outcome == "PASS" and r.evidence and r.evidence[0].get("checks"))
    target.outcome = "FAIL"
    target.evidence[0]["checks"][0]["measured"] = 99.0
    record = repeated("both", [first, second])
    assert record.target["repeats"] == [first.run_id, "again"] and len(record.results) == 2 * len(first.results)
    assert len({r.nodeid for r in record.results}) == len(record.results)
    _, _, cells = record.matrix()
    assert len(cells[(target.criterion, target.backend)]) == 2  # the cell shows both runs' outcomes
    fit = next(f for f in fits(record) if f.backend == target.backend
               and target.criterion in [d.criterion for d in f.deciders])
    assert fit.verdict == NO_FIT
    told = next(d for d in fit.deciders if d.criterion == target.criterion).measured
    assert " to 99 over 2 runs" in told, told
    assert "2 runs (h2-look2, again)" in sections(record) and "take the worst" in sections(record)


def test_a_backend_that_skipped_its_own_case_is_not_passed_by_the_clusters() -> None:
    record = Record("r", "now", "0", "c", results=[
        result("governance.tenant_isolation", "-", "PASS"), result("governance.tenant_isolation", "k", "SKIP"),
        result("governance.tenant_isolation", "a", "PASS")])
    got = {f.backend: f for f in fits(record, {"sharing": ("governance.tenant_isolation",)})}
    assert got["k"].verdict == NOT_TESTED and got["a"].verdict == FITS


def test_the_spread_counts_runs_and_parts_and_a_run_with_nothing_measured() -> None:
    runs = [result("training.queue_wait", "a", "PASS") for _ in range(2)]
    for k, r in enumerate(runs):
        r.nodeid = f"run-{k}: {r.nodeid}"
        r.evidence[0]["checks"][0]["measured"] = float(k + 1)
    errored = Result("run-2: suites/x.py::q[a]", "training.queue_wait", "a", "ERROR")
    assert measured([*runs, errored]) == "x 1 to 2 over 3 runs, 1 with nothing measured (<= 2 s)"
    merged = result("governance.audit", "-", "PASS")
    merged.evidence = [{"checks": [dict(merged.evidence[0]["checks"][0], measured=v)]} for v in (0.5, 0.7, 0.6)]
    assert measured([merged]) == "x 0.5 to 0.7 over 3 parts (<= 2 s)"
    assert measured([result("training.queue_wait", "a", "PASS")]) == "x 1 (<= 2 s)"


def test_a_designed_failure_is_told_in_the_words_of_its_design() -> None:
    record = Record("r", "now", "0", "c", results=[result("training.gang_admission", "d", "FAIL"),
                                                   result("training.gang_admission", "k", "FAIL")],
                    designed={"training.gang_admission [d]": "kube-scheduler binds a gang pod by pod"})
    got = {f.backend: f for f in fits(record, {"training": ("training.gang_admission",)})}
    assert got["d"].findings[0].designed == "kube-scheduler binds a gang pod by pod"
    assert got["k"].findings[0].designed == ""  # not designed: a finding of this run
    recorded = load_record(RECORDS / "gang-schema3.json")
    recorded.designed = {"training.gang_admission [default]": "kube-scheduler binds a gang pod by pod"}
    assert "By design on the reference sim: kube-scheduler binds a gang pod by pod" in sections(recorded)


def test_an_undecided_cell_reads_not_decided_with_its_interval_everywhere() -> None:
    from harness.record.fit import UNDECIDED
    from harness.record.verdict import verdicts
    undecided = result("training.queue_fairness", "a", "INCONCLUSIVE")
    undecided.evidence[0]["checks"][0].update(low=1.5, high=2.5, runs=3, verdict="INCONCLUSIVE", passed=False)
    record = Record("r", "now", "0", "c", results=[result("training.gang_admission", "a", "PASS"), undecided,
                                                   result("training.gang_admission", "b", "FAIL"), result(
                                                       "training.queue_fairness", "b", "INCONCLUSIVE")])
    got = {(f.scenario, f.backend): f for f in fits(record, SCENARIOS)}
    assert got[("training", "a")].verdict == UNDECIDED and got[("training", "b")].verdict == NO_FIT
    said = got[("training", "a")].findings[0].why
    assert said == "not decided: x: 1 s [1.5, 2.5] over 3 runs (wanted <= 2 s)", said
    counted = {v.backend: v for v in verdicts(record)}
    assert counted["a"].counts["INCONCLUSIVE"] == 1 and counted["a"].failed[0].outcome == "INCONCLUSIVE"
    shown = load_record(RECORDS / "gang-schema3.json")
    template = next(r for r in shown.results if r.evidence)
    shown.results.append(Result(undecided.nodeid, undecided.criterion, "a", "INCONCLUSIVE", "not decided", evidence=[
        {**copy.deepcopy(template.evidence[0]), "checks": undecided.evidence[0]["checks"]}]))
    html = sections(shown)
    assert 'class="gp-INCONCLUSIVE"' in html and "not decided" in html and "[1.5, 2.5]" in html

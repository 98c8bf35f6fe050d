"""`gpupoc trend` on recorded records (tests/fixtures/records): values over runs with thresholds, what changed
between the last two runs, one offline page."""

from __future__ import annotations

import copy
import re
from pathlib import Path

from harness.cli import main
from harness.record.model import load_record
from harness.record.sparkline import sparkline
from harness.record.trend import OUTCOME_ONLY, changes, in_order, page, series

RECORDS = Path(__file__).parents[2] / "fixtures" / "records"
PATHS = [RECORDS / "gang-schema3.json", RECORDS / "gang-3da4843.json", RECORDS / "gang-3a15079.json"]
GANG = "training.gang_admission"


def test_series_follow_each_check_over_runs_oldest_first() -> None:
    runs = in_order([load_record(p) for p in PATHS])
    assert [r.commit.split("+")[0] for r in runs][:2] == ["3da4843", "3a15079"]
    lines = series(runs)
    partial = lines[(GANG, "default", "max_partial_pods")]
    assert [p.measured if p else None for p in partial] == [3.0, 3.0, 3.0]
    assert {p.threshold for p in partial if p} == {0.0} and {p.outcome for p in partial if p} == {"FAIL"}
    volcano = lines[(GANG, "volcano", "all_bound_within_s")]
    assert volcano[0] is None and volcano[1] is not None  # the first run had no volcano: a gap, not a zero
    assert (GANG, "kuberay", OUTCOME_ONLY) not in lines  # every result here has checks


def test_what_changed_between_the_last_two_runs() -> None:
    before, after = in_order([load_record(p) for p in PATHS])[-2:]
    assert [c.what for c in changes(before, after)] == ["harness commit"]
    moved = copy.deepcopy(after)
    moved.schedulers = [{**s, "version": "kueue v0.20.0"} if s["name"] == "kueue" else s for s in moved.schedulers]
    moved.nodes = moved.nodes[:1]
    moved.profile["thresholds"][GANG] = {**moved.profile["thresholds"][GANG], "all_bound_within_s": 10.0}
    found = {c.what: (c.before, c.after) for c in changes(before, moved)}
    assert found["scheduler kueue"] == ("kueue v0.19.2", "kueue v0.20.0")
    assert found["GPU nodes"] == ("2", "1")
    assert found["GPUs NVIDIA-H100-80GB-HBM3"][1].startswith("8 × NVIDIA-H100-80GB-HBM3 (1 node, simulated)")
    assert "all_bound_within_s = 10.0" in found[f"thresholds of {GANG}"][1]


def test_the_page_is_offline_with_a_chart_and_threshold_per_check() -> None:
    html = page([load_record(p) for p in PATHS])
    assert "<title>gpupoc trend: 3 runs" in html and "What changed between the last two runs" in html
    assert html.count("<svg") >= 6 and 'stroke-dasharray="4 3"' in html  # thresholds drawn
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", html)
    assert "max_partial_pods" in html and "3 pods" in html


def test_a_run_with_nothing_measured_is_drawn_apart_from_a_run_without_the_check() -> None:
    svg = sparkline([(1.0, 5.0, "PASS", "a"), (None, 5.0, "FAIL", "b: nothing measured"), (None, None, "", "")])
    assert svg.count("<circle") == 1 and svg.count("<rect") == 1  # the absent run is not drawn
    assert "nothing measured in any run" in sparkline([(None, None, "", "")])


def test_gpupoc_trend_writes_the_page(tmp_path: Path) -> None:
    out = tmp_path / "trend.html"
    assert main(["trend", *map(str, PATHS), "--output", str(out)]) == 0
    assert "gpupoc trend over 3 runs" in out.read_text()
    assert main(["trend", str(tmp_path / "missing.json")]) == 2


def test_a_run_that_errored_before_measuring_shows_on_the_criterions_lines() -> None:
    runs = in_order([load_record(p) for p in PATHS])
    broken = copy.deepcopy(runs[-1])
    for result in broken.results:
        if result.backend == "kueue":
            result.outcome, result.evidence = "ERROR", []
    lines = series([*runs[:-1], broken])
    assert (GANG, "kueue", OUTCOME_ONLY) not in lines
    last = lines[(GANG, "kueue", "all_bound_within_s")][-1]
    assert last is not None and last.outcome == "ERROR" and last.measured is None


def test_verdict_flips_are_counted_per_cell() -> None:
    from harness.record.trend import Point, flips
    line = [Point("a", "PASS"), None, Point("b", "INCONCLUSIVE"), Point("c", "PASS"), Point("d", "PASS")]
    assert flips(line) == 2 and flips([None, Point("a", "FAIL")]) == 0
    runs = [load_record(p) for p in PATHS]
    flipped = copy.deepcopy(runs[-1])
    flipped.run_id = "flipped"
    flipped.started_at = "9999"
    for result in flipped.results:
        if result.criterion == GANG and result.backend == "default":
            result.outcome = "PASS"
    html = page(runs + [flipped])
    assert "Verdict flips" in html and re.search(r"<td>training.gang_admission</td><td>default</td><td>1</td>", html)


def test_each_cell_shows_its_least_margin_in_interval_widths() -> None:
    """Issue 40: a designed outcome is decided with margin when its value lies 3 or more interval widths from the
    threshold in every run."""
    from harness.record.trend import Point, least_margin, margin_widths
    wide = Point("a", "PASS", 8.0, 10.0, "<=", " s", low=7.5, high=8.5)  # 2 s off, 1 s wide: 2 widths
    narrow = Point("b", "PASS", 5.0, 10.0, "<=", " s", low=4.9, high=5.1)
    assert margin_widths(wide) == 2.0 and least_margin([wide, None, narrow]) == 2.0
    assert margin_widths(Point("c", "FAIL", 3.0, 0.0, "<=", low=3.0, high=3.0)) == float("inf")
    assert margin_widths(Point("e", "PASS", 0.0, 0.0, "<=", low=0.0, high=0.0)) == float("inf")  # a count: decided
    assert margin_widths(Point("d", "SKIP")) is None and least_margin([None]) is None
    assert ">margin</th>" in page([load_record(p) for p in PATHS])

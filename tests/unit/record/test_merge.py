"""A run's record from its side-by-side parts (harness/record/merge.py), on a recorded record split in two."""

from __future__ import annotations

import copy
from pathlib import Path

from harness.record.merge import merge
from harness.record.model import Record, Result, load_record
from harness.record.render import page
from harness.record.verdict import environment_line

RECORD = Path(__file__).parents[2] / "fixtures" / "records" / "gang-schema3.json"


def part(backend: str, run_wide_outcome: str, started: str, finished: str) -> Record:
    record = copy.deepcopy(load_record(RECORD))
    shown = next(e for r in record.results for e in r.evidence)
    record.run_id, record.started_at, record.finished_at = f"r-{backend}", started, finished
    record.results = [Result(f"suites/x.py::test_x[{backend}]", "training.x", backend, "PASS", duration_s=3.0),
                      Result("suites/a.py::test_audit", "governance.audit", "-", run_wide_outcome,
                             message=f"{backend} audit", duration_s=2.0 if backend == "kueue" else 5.0,
                             evidence=[{**shown, "statement": "every object audited"}])]
    record.operations = {backend: next(iter(record.operations.values()))}
    return record


def test_each_backend_from_its_part_a_run_wide_case_the_worst_of_all_parts() -> None:
    merged = merge("r", [("kueue", part("kueue", "PASS", "2026-12-03T10:00:01", "2026-12-03T10:05:00")),
                         ("volcano", part("volcano", "FAIL", "2026-12-03T10:00:00", "2026-12-03T10:06:00"))])
    assert sorted((r.criterion, r.backend, r.outcome) for r in merged.results) == [
        ("governance.audit", "-", "FAIL"), ("training.x", "kueue", "PASS"), ("training.x", "volcano", "PASS")]
    audit = next(r for r in merged.results if r.backend == "-")
    # the worst part first: its line is the one the cell shows
    assert audit.message == "[part volcano] volcano audit\n[part kueue] kueue audit" and audit.duration_s == 5.0
    assert [e["statement"] for e in audit.evidence] == ["[part volcano] every object audited",
                                                        "[part kueue] every object audited"]
    assert (merged.started_at, merged.finished_at) == ("2026-12-03T10:00:00", "2026-12-03T10:06:00")
    assert set(merged.operations) == {"kueue", "volcano"}
    assert [p["backends"] for p in merged.target["parts"]] == [["kueue"], ["volcano"]]
    assert all(n["node"].split(": ")[0] in ("kueue", "volcano") for n in merged.nodes)


def test_merged_record_is_a_page_naming_its_parts() -> None:
    merged = merge("r", [("kueue", part("kueue", "PASS", "a", "b")), ("volcano", part("volcano", "PASS", "a", "b"))])
    html = page(merged)
    assert html.startswith("<!DOCTYPE html>") and "gpupoc run r on" in html
    assert "2 parts at once" in html and 'href="parts/r-volcano/record.html"' in html
    one = len([n for n in merged.nodes if n["node"].startswith("kueue: ")])
    assert one and "2 sim clusters side by side · Kubernetes" in environment_line(merged)
    assert f"each: {sum(n['count'] for n in merged.nodes[:one])} × " in environment_line(merged)

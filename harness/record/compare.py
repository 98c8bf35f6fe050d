"""`gpupoc compare RUN.json ...`: the same criteria across runs, regressions against the first flagged."""

from __future__ import annotations

import html
import statistics
from pathlib import Path

from harness.record.model import Record, load_record
from harness.record.render import SEVERITY

Key = tuple[str, str, str]  # (criterion, backend, check name)
NOT_CHECKED = "not checked"


def measurements(record: Record) -> dict[Key, tuple[float | None, str, str]]:
    """(criterion, backend, check) -> (measured, comparison, outcome) for every check of a run."""
    found: dict[Key, tuple[float | None, str, str]] = {}
    for result in record.results:
        for evidence in result.evidence:
            for check in evidence.get("checks", []):
                comparison = NOT_CHECKED if check.get("not_checked") else check["comparison"]
                found[(result.criterion, result.backend, check["name"])] = (
                    check["measured"], comparison, result.outcome)
        if not any(e.get("checks") for e in result.evidence):
            found[(result.criterion, result.backend, "outcome")] = (None, "", result.outcome)
    return found


def regressed(first: tuple[float | None, str, str], later: tuple[float | None, str, str]) -> bool:
    """Worse outcome, or a measured value moved the wrong way (up for <= thresholds, down for >=)."""
    if SEVERITY.get(later[2], 0) > SEVERITY.get(first[2], 0):
        return True
    if NOT_CHECKED in (first[1], later[1]):  # a check the backend cannot give: no value to compare
        return False
    if first[0] is None or later[0] is None:
        return first[0] is not None and later[0] is None
    return later[0] > first[0] if first[1] == "<=" else later[0] < first[0] if first[1] == ">=" else False


def spread(values: list[float]) -> str:
    if len(values) < 2:
        return ""
    return f"mean {statistics.mean(values):.3g}, stdev {statistics.stdev(values):.3g}"


def compare(paths: list[Path]) -> str:
    records = [load_record(p) for p in paths]
    tables = [measurements(r) for r in records]
    keys = sorted({k for t in tables for k in t})
    same_profile = len({r.profile.get("name") for r in records}) == 1
    head = "".join(f"<th>{html.escape(r.run_id)}<br><small>{html.escape(r.started_at)}</small></th>" for r in records)
    rows = []
    for key in keys:
        cells, values = [], []
        first = tables[0].get(key)
        for table in tables:
            value = table.get(key)
            if value is None:
                cells.append("<td>—</td>")
                continue
            if value[0] is not None:
                values.append(float(value[0]))
            flag = " class='regressed'" if first and value is not first and regressed(first, value) else ""
            shown = (f"{value[0]:g}" if value[0] is not None
                     else NOT_CHECKED if value[1] == NOT_CHECKED else "nothing measured")
            cells.append(f"<td{flag}>{value[2]} {shown if key[2] != 'outcome' else ''}</td>")
        stats = spread(values) if same_profile else ""
        rows.append(f"<tr><th>{html.escape(' / '.join(key))}</th>{''.join(cells)}<td>{stats}</td></tr>")
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>gpupoc: comparison of runs</title><style>"
            "table{border-collapse:collapse;font-family:sans-serif;font-size:13px}td,th{border:1px solid #bbb;"
            "padding:3px 8px}.regressed{background:#f8d7da;font-weight:bold}</style></head><body>"
            f"<h1>Comparison of {len(records)} runs</h1><p>Cells in red regressed against the first run "
            f"({html.escape(records[0].run_id)}).{'' if same_profile else ' Profiles differ: no mean/spread.'}</p>"
            f"<table><tr><th>criterion / backend / measurement</th>{head}<th>spread</th></tr>{''.join(rows)}"
            "</table></body></html>")

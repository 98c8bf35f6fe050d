"""`gpupoc trend RECORD.json...`: each criterion × backend's measured values over runs, with their thresholds, and
what changed between the last two runs (harness commit, scheduler versions, GPU inventory). Pure over Records;
the page is harness/record/templates/trend.html.j2 with inline SVG (harness.record.sparkline)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from harness.record.model import Record, load_record
from harness.record.sparkline import sparkline
from harness.record.verdict import gpu_summary

Key = tuple[str, str, str]  # (criterion, backend, check name; "outcome" for a result without checks)
OUTCOME_ONLY = "outcome"
_ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
                          autoescape=True, undefined=jinja2.StrictUndefined)


@dataclass(frozen=True)
class Point:
    """One run's value of one check: measured (None: nothing measured or not checked) against its threshold."""

    run_id: str
    outcome: str
    measured: float | None = None
    threshold: float | None = None
    comparison: str = ""
    unit: str = ""
    not_checked: str = ""
    low: float | None = None   # the interval of the measured value (a record older than intervals: none)
    high: float | None = None


@dataclass(frozen=True)
class Change:
    what: str
    before: str
    after: str


def in_order(records: list[Record]) -> list[Record]:
    """Oldest first, by the time each run started."""
    return sorted(records, key=lambda r: r.started_at)


def points(record: Record) -> dict[Key, Point]:
    """Every check of a run (a result without checks: its outcome alone). Two tests of one criterion and backend
    with the same check: the later one's value (as in `gpupoc compare`)."""
    found: dict[Key, Point] = {}
    for result in record.results:
        checks = [c for e in result.evidence for c in e.get("checks", [])]
        for check in checks:
            measured = check.get("measured")
            low, high = check.get("low"), check.get("high")
            found[(result.criterion, result.backend, check["name"])] = Point(
                record.run_id, result.outcome, None if measured is None else float(measured),
                float(check["threshold"]), check.get("comparison", ""), check.get("unit", ""),
                check.get("not_checked", ""), None if low is None else float(low), None if high is None else float(high))
        if not checks:
            found[(result.criterion, result.backend, OUTCOME_ONLY)] = Point(record.run_id, result.outcome)
    return found


def series(records: list[Record]) -> dict[Key, list[Point | None]]:
    """Key -> one point per run (None where the run did not have it), runs oldest first. A run whose result had no
    checks (it ERRORed or was skipped) shows its outcome on the lines of that criterion's checks, not a line apart."""
    per_run = [points(r) for r in records]
    keys = {k for p in per_run for k in p}
    measured = {(c, b) for c, b, check in keys if check != OUTCOME_ONLY}
    keys = {k for k in keys if k[2] != OUTCOME_ONLY or (k[0], k[1]) not in measured}
    return {k: [p.get(k) or p.get((k[0], k[1], OUTCOME_ONLY)) for p in per_run] for k in sorted(keys)}


def _schedulers(record: Record) -> dict[str, str]:
    return {s.get("name", "?"): s.get("version", "?") for s in record.schedulers}


def _gpus(record: Record) -> dict[str, str]:
    """Per GPU model: count, nodes, driver and CUDA (the inventory as it reads in a line)."""
    models = sorted({str(n.get("model")) for n in record.nodes})
    return {m: gpu_summary([n for n in record.nodes if str(n.get("model")) == m]) for m in models}


def _compare(what: str, before: dict[str, str], after: dict[str, str]) -> list[Change]:
    absent = "(absent)"
    return [Change(f"{what} {name}", before.get(name, absent), after.get(name, absent))
            for name in sorted(set(before) | set(after)) if before.get(name) != after.get(name)]


def changes(before: Record, after: Record) -> list[Change]:
    """Pure: what differs between two runs' environments: harness, target, scheduler versions, GPU inventory,
    profile and its thresholds."""
    target_b, target_a = before.target or {}, after.target or {}
    plain = {"harness commit": (before.commit, after.commit),
             "harness version": (before.harness_version, after.harness_version),
             "target": (f"{target_b.get('kind')} {target_b.get('context')} {target_b.get('api_url')}",
                        f"{target_a.get('kind')} {target_a.get('context')} {target_a.get('api_url')}"),
             "Kubernetes": (str(target_b.get("kubernetes_version")), str(target_a.get("kubernetes_version"))),
             "profile": (str(before.profile.get("name")), str(after.profile.get("name"))),
             "GPU nodes": (str(len(before.nodes)), str(len(after.nodes)))}
    found = [Change(what, b, a) for what, (b, a) in plain.items() if b != a]
    found += _compare("scheduler", _schedulers(before), _schedulers(after))
    found += _compare("GPUs", _gpus(before), _gpus(after))
    found += _compare("thresholds of", _thresholds(before), _thresholds(after))
    return found


def _thresholds(record: Record) -> dict[str, str]:
    values = record.profile.get("thresholds") or {}
    return {c: "; ".join(f"{k} = {v}" for k, v in sorted(t.items())) for c, t in values.items() if isinstance(t, dict)}


def describe(point: Point | None) -> str:
    """A run's value in words: '4.9 s (wanted <= 30 s), PASS'."""
    if point is None:
        return "not in this run"
    if point.not_checked:
        return f"not checked: {point.not_checked}"
    if point.threshold is None:
        return point.outcome
    measured = "nothing measured" if point.measured is None else f"{point.measured:g}{point.unit}"
    if point.measured is not None and point.low is not None and point.high is not None and point.low != point.high:
        measured += f" [{point.low:g}, {point.high:g}]"
    return f"{measured} (wanted {point.comparison} {point.threshold:g}{point.unit}), {point.outcome}"


def _mark(point: Point | None) -> tuple[float | None, float | None, str, str]:
    if point is None:
        return None, None, "", f"{describe(point)}"
    return point.measured, point.threshold, point.outcome, f"{point.run_id}: {describe(point)}"


def flips(line: list[Point | None]) -> int:
    """Pure: how often the verdict changed from one run to the next (runs without the cell left out): the same
    cluster should give the same verdict."""
    outcomes = [p.outcome for p in line if p is not None]
    return sum(1 for a, b in zip(outcomes, outcomes[1:]) if a != b)


def margin_widths(point: Point | None) -> float | None:
    """Pure: how many of its own interval widths the measured value lies from the threshold (inf: an exact value, a
    count, which decides at once; None: nothing measured, or no interval recorded). Issue 40 asks designed outcomes
    for 3 or more."""
    if (point is None or point.measured is None or point.threshold is None or point.low is None
            or point.high is None or point.not_checked):
        return None
    distance = abs(point.measured - point.threshold)
    width = point.high - point.low
    return distance / width if width > 0 else float("inf")


def least_margin(line: list[Point | None]) -> float | None:
    """The smallest margin over the runs that measured the check."""
    found = [m for m in (margin_widths(p) for p in line) if m is not None]
    return min(found) if found else None


def last_value(line: list[Point | None]) -> Point | None:
    return next((p for p in reversed(line) if p is not None), None)


def page(records: list[Record]) -> str:
    """The offline HTML page of the trend over `records` (any order: shown oldest first)."""
    runs = in_order(records)
    lines = series(runs)
    rows: list[dict[str, Any]] = []
    for (criterion, backend, check), line in lines.items():
        last = last_value(line)
        rows.append({"criterion": criterion, "backend": backend, "check": check, "line": line, "last": last,
                     "flips": flips(line), "margin": least_margin(line),
                     "chart": sparkline([_mark(p) for p in line]) if check != OUTCOME_ONLY else ""})
    flipping = sorted({(r["criterion"], r["backend"]): r["flips"] for r in rows if r["flips"]}.items(),
                      key=lambda item: -item[1])
    template = _ENV.get_template("trend.html.j2")
    return template.render(runs=runs, rows=rows, flipping=flipping, inf=float("inf"), last_two=runs[-2:],
                           changes=changes(runs[-2], runs[-1]) if len(runs) > 1 else [])


def write_trend(paths: list[Path], out: Path) -> Path:
    records = [load_record(p) for p in paths]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page(records))
    return out

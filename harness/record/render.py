"""The HTML view of a Record: environment, GPU inventory, matrix and evidence (inline CSS and SVG)."""

from __future__ import annotations

from pathlib import Path
import jinja2

from harness.record.charts import evidence_charts
from harness.record.model import Record, Result

_ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
                          autoescape=True, undefined=jinja2.StrictUndefined)
SEVERITY = {"ERROR": 4, "FAIL": 3, "UNFINISHED": 2, "PASS": 1, "SKIP": 0}


def worst(cell: list[Result]) -> str:
    return max((r.outcome for r in cell), key=lambda o: SEVERITY[o], default="SKIP")


def short(result: Result) -> str:
    """The measured values of a cell against their thresholds, in a line; checks not made say so."""
    checks = [c for e in result.evidence for c in e.get("checks", [])]
    if checks:
        return "; ".join(f"{c['name']} not checked" if c.get("not_checked")
                         else f"{c['name']} {c['measured']} ({c['comparison']} {c['threshold']})" for c in checks)
    return result.message.splitlines()[0][:120] if result.message else ""


def label(result: Result) -> str:
    """The cell's outcome; a PASS with checks that could not be made is not a plain PASS."""
    unchecked = [c for e in result.evidence for c in e.get("checks", []) if c.get("not_checked")]
    if result.outcome == "PASS" and unchecked:
        return f"PASS, {len(unchecked)} not checked"
    return result.outcome


def sections(record: Record) -> str:
    criteria, backends, cells = record.matrix()
    template = _ENV.get_template("sections.html.j2")
    return template.render(r=record, criteria=criteria, backends=backends, cells=cells, worst=worst, short=short,
                           label=label,
                           charts=lambda e: evidence_charts(e))

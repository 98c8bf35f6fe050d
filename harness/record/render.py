"""The HTML view of a Record: verdict, environment, GPU inventory, matrix, operations per backend and evidence with
its task samples (inline CSS and SVG)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
import yaml

from harness.record.charts import across_backends, evidence_charts
from harness.record.fit import FINDINGS, FITS, NO_FIT, NOT_TESTED, UNDECIDED, fits
from harness.record.model import Record, Result
from harness.record.operations import answers, failure_signs
from harness.record.verdict import SEVERITY, environment_line, title, verdicts, worst

__all__ = ["SEVERITY", "worst", "short", "label", "sections", "page"]
_ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
                          autoescape=True, undefined=jinja2.StrictUndefined)


def short(result: Result) -> str:
    """The measured values of a cell against their thresholds, in a line; checks not made say so."""
    checks = [c for e in result.evidence for c in e.get("checks", [])]
    if checks:
        return "; ".join(f"{c['name']} not checked" if c.get("not_checked")
                         else f"{c['name']} {_interval(c)} ({c['comparison']} {c['threshold']})" for c in checks)
    return result.message.splitlines()[0][:120] if result.message else ""


def _interval(check: dict[str, Any]) -> str:
    low, high = check.get("low"), check.get("high")
    return f"{check['measured']}" + (f" [{low}, {high}]" if low is not None and high is not None and low != high
                                     else "")


def label(result: Result) -> str:
    """The cell's outcome; a PASS with checks that could not be made is not a plain PASS."""
    unchecked = [c for e in result.evidence for c in e.get("checks", []) if c.get("not_checked")]
    if result.outcome == "PASS" and unchecked:
        return f"PASS, {len(unchecked)} not checked"
    return result.outcome


def as_yaml(manifest: dict[str, Any]) -> str:
    return yaml.safe_dump(manifest, sort_keys=False, default_flow_style=False, width=120)


def sections(record: Record) -> str:
    criteria, backends, cells = record.matrix()
    template = _ENV.get_template("sections.html.j2")
    signs = {b: failure_signs([r for r in record.results if r.backend == b]) for b in backends}
    return template.render(r=record, criteria=criteria, backends=backends, cells=cells, worst=worst, short=short,
                           fit=fit_table(record),
                           label=label, verdicts=verdicts(record), environment=environment_line(record),
                           signs=signs, answers={b: answers(record, b) for b in backends}, as_yaml=as_yaml,
                           charts=lambda e: evidence_charts(e),
                           compared=across_backends([(x.backend, e) for x in record.results for e in x.evidence]))


def fit_table(record: Record) -> dict[str, Any]:
    """The scenario fit as rows (workload class, its criteria, a Fit per backend) and its backends."""
    found = fits(record)
    rows = []
    for scenario in dict.fromkeys(f.scenario for f in found):
        row = [f for f in found if f.scenario == scenario]
        rows.append((scenario, [d.criterion for d in row[0].deciders], row))
    return {"backends": list(dict.fromkeys(f.backend for f in found)), "rows": rows, "css": FIT_CSS}


FIT_CSS = {FITS: "gp-PASS", FINDINGS: "gp-UNFINISHED", UNDECIDED: "gp-INCONCLUSIVE", NO_FIT: "gp-FAIL",
           NOT_TESTED: "gp-SKIP"}


def page(record: Record) -> str:
    """The record as a page of its own (a run assembled from parts: no pytest-html page holds it)."""
    return _ENV.get_template("page.html.j2").render(title=title(record), sections=sections(record))

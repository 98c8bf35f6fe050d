"""Scenario fit: for each workload class a review asks about (batch training, online inference, development,
multi-team sharing, scale), whether each backend fits it, from the criteria that decide it. Not a ranking: a
verdict per class with the deciding measured values, each linked to its evidence. Pure, from a Record.

- fits: every deciding criterion ran and passed, every sub-check made;
- fits with findings: none failed, but some were skipped or had sub-checks that could not be made (named);
- not decided: none failed, but a deciding value's interval straddles its threshold (INCONCLUSIVE: "not decided:
  measured X [low, high] against Z");
- does not fit: a deciding criterion failed, errored or did not finish (named, measured against wanted);
- not tested: no deciding criterion ran on it.
A criterion run once per cluster (backend "-") decides for every backend. Over repeated runs a cell holds each
run's result and the worst decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import reduce

from harness.core.estimate import Estimate, decide, from_record, pool
from harness.record.model import Record, Result
from harness.record.verdict import CLUSTER, SEVERITY, missed, unchecked

FITS, FINDINGS, UNDECIDED, NO_FIT, NOT_TESTED = ("fits", "fits with findings", "not decided", "does not fit",
                                                 "not tested")
BAD = ("FAIL", "ERROR", "UNFINISHED")
# The workload classes and the criteria that decide each, unless the profile names its own (profile `scenarios`).
DEFAULT_SCENARIOS: dict[str, tuple[str, ...]] = {
    "batch training": ("training.gang_admission", "training.queue_fairness", "training.priority_preemption",
                       "training.failure_recovery", "training.queue_wait"),
    "large-scale training (topology)": ("training.topology_placement", "training.gang_admission"),
    "online inference": ("inference.cold_start", "inference.latency", "inference.rolling_release",
                         "inference.elasticity", "inference.service_discovery", "inference.capacity",
                         "inference.prefix_routing"),
    "development and debugging": ("governance.queue_classes", "training.queue_wait"),
    "multi-team sharing": ("governance.quota", "governance.borrowing_reclaim", "governance.tenant_isolation",
                           "training.queue_fairness", "governance.cost_attribution"),
    "scale": ("scale.throughput",),
}


@dataclass(frozen=True)
class Decider:
    """One deciding criterion of a backend: its worst outcome, why in a line, and its evidence."""

    criterion: str
    outcome: str
    why: str
    anchor: str = ""
    measured: str = ""  # its checks, measured against wanted
    designed: str = ""  # why the reference sim is designed to give this outcome (the record's `designed`)
    caveat: str = ""  # the release it holds for, and the later one known to change it (the record's `caveats`)


@dataclass
class Fit:
    scenario: str
    backend: str
    verdict: str
    deciders: list[Decider] = field(default_factory=list)

    @property
    def findings(self) -> list[Decider]:
        """What keeps it from a plain "fits": failures first, then skips and unchecked sub-checks."""
        return sorted((d for d in self.deciders if d.outcome != "PASS" or d.why),
                      key=lambda d: -SEVERITY.get(d.outcome, 0))


def decider(criterion: str, results: list[Result]) -> Decider:
    """The worst of a cell's results (over repeated runs, every run's), told in a line."""
    if not results:
        return Decider(criterion, "SKIP", "not run")
    result = max(results, key=lambda r: SEVERITY.get(r.outcome, 0))
    if result.outcome in BAD or result.outcome == "INCONCLUSIVE":
        why = missed(result)
    elif result.outcome == "SKIP":
        why = result.message.strip().splitlines()[0] if result.message.strip() else "skipped"
    else:
        gaps = [c for r in results for c in unchecked(r)]
        why = "; ".join(f"{c['name']} not checked: {c['not_checked']}" for c in gaps)
    return Decider(criterion, result.outcome, why, result.cell_id, measured(results))


def run_of(result: Result) -> str:
    """The run a result came from in a record of repeated runs (its node id is prefixed "RUN: "), else ''."""
    return result.nodeid.split(": ", 1)[0] if ": " in result.nodeid else ""


def measured(results: list[Result]) -> str:
    """Each check against its threshold: its value; over repeated runs its spread, lowest to highest, and how many
    runs measured nothing (a run that errored with no checks included); over a merged case's parts (one result,
    an evidence per part) the same per part."""
    runs = sorted({run_of(r) for r in results})
    values: dict[str, list[float]] = {}
    estimates: dict[str, list[Estimate | None]] = {}
    thresholds: dict[str, tuple[float, str]] = {}
    seen: dict[str, set[str]] = {}  # check -> the runs (or parts) that gave it
    wanted: dict[str, str] = {}
    for result in results:
        for index, evidence in enumerate(result.evidence):
            for check in (c for c in evidence.get("checks", []) if not c.get("not_checked")):
                name, value = check["name"], check.get("measured")
                values.setdefault(name, [])
                if isinstance(value, (int, float)):
                    values[name].append(float(value))
                estimates.setdefault(name, []).append(from_record(check))
                thresholds[name] = (float(check["threshold"]), str(check["comparison"]))
                seen.setdefault(name, set()).add(run_of(result) if len(runs) > 1 else f"{result.nodeid}#{index}")
                wanted[name] = f"{check['comparison']} {check['threshold']:g}{check.get('unit', '')}"
    told = []
    for name, numbers in values.items():
        numbers.sort()
        over, unit = (len(runs), "runs") if len(runs) > 1 else (len(seen[name]), "parts")
        shown = (f"{numbers[0]:g}" if len(numbers) == 1 else f"{numbers[0]:g} to {numbers[-1]:g}") if numbers \
            else "nothing"
        if over > 1:
            nothing = over - len(seen[name]) if unit == "runs" else over - len(numbers)
            shown += f" over {over} {unit}" + (f", {nothing} with nothing measured" if nothing > 0 else "")
        if unit == "runs" and over > 1:
            shown += pooled_verdict(estimates.get(name, []), *thresholds[name])
        told.append(f"{name} {shown} ({wanted[name]})")
    return "; ".join(told)


def pooled_verdict(found: list[Estimate | None], threshold: float, comparison: str) -> str:
    """Over repeated runs: the runs' samples pooled into one interval and its verdict, where every run kept them."""
    if len(found) < 2 or any(e is None for e in found):
        return ""
    together = reduce(pool, [e for e in found if e is not None])
    return f", pooled [{together.low:.4g}, {together.high:.4g}]: {decide(together, threshold, comparison)}"


def explained(found: Decider, backend: str, record: Record) -> Decider:
    """A decider with the words of its design, where the reference sim is designed to fail it, and the caveat of the
    release it ran, where a later one is known to change it."""
    cell = f"{found.criterion} [{backend}]"
    why = record.designed.get(cell) or record.designed.get(f"{found.criterion} [{CLUSTER}]", "")
    return replace(found, designed=why if why and found.outcome in BAD else "", caveat=record.caveats.get(cell, ""))


def deciding(own: list[Result], cluster: list[Result]) -> list[Result]:
    """The results that decide a criterion for a backend: its own and the cluster's, except that a backend that
    skipped its own case is not passed by the cluster's (its SKIP is the finding)."""
    if own and all(r.outcome == "SKIP" for r in own):
        return own
    return own + cluster


def verdict_of(deciders: list[Decider]) -> str:
    """Pure: a scenario's verdict for one backend from its deciding criteria."""
    outcomes = [d.outcome for d in deciders]
    if not outcomes or all(o == "SKIP" for o in outcomes):
        return NOT_TESTED
    if any(o in BAD for o in outcomes):
        return NO_FIT
    if any(o == "INCONCLUSIVE" for o in outcomes):
        return UNDECIDED
    if any(o == "SKIP" or d.why for o, d in zip(outcomes, deciders)):
        return FINDINGS
    return FITS


def fits(record: Record, scenarios: dict[str, tuple[str, ...]] | None = None) -> list[Fit]:
    """Every scenario x backend (the cluster-wide pseudo-backend aside: it decides for all)."""
    _, backends, cells = record.matrix()
    chosen = scenarios or record.profile.get("scenarios") or DEFAULT_SCENARIOS
    found = []
    for scenario, criteria in chosen.items():
        for backend in (b for b in backends if b != CLUSTER):
            deciders = [explained(decider(c, deciding(cells.get((c, backend), []), cells.get((c, CLUSTER), []))),
                                  backend, record) for c in criteria]
            found.append(Fit(scenario, backend, verdict_of(deciders), deciders))
    return found

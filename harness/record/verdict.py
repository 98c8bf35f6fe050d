"""What a reviewer reads first: per backend, how many criteria passed, failed, errored, were skipped or not fully
checked; the failures named with measured against wanted; the environment in one line. Pure, from a Record."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from harness.record.model import Record, Result

SEVERITY = {"ERROR": 5, "FAIL": 4, "UNFINISHED": 3, "INCONCLUSIVE": 2, "PASS": 1, "SKIP": 0}
COLUMNS = ("PASS", "FAIL", "ERROR", "SKIP", "INCONCLUSIVE", "UNFINISHED")
SHOWN = ("FAIL", "ERROR", "UNFINISHED", "INCONCLUSIVE")  # named under the verdict, worst first
MESSAGE_CHARS = 200
CLUSTER = "-"  # the backend of cases run once per target


@dataclass
class Named:
    """One criterion of a backend that did not simply pass, and why in a line."""

    criterion: str
    outcome: str
    why: str
    anchor: str


@dataclass
class BackendVerdict:
    backend: str
    counts: dict[str, int] = field(default_factory=dict)  # outcome -> criteria (each criterion's worst result)
    not_checked: list[Named] = field(default_factory=list)  # criteria with sub-checks that could not be made
    failed: list[Named] = field(default_factory=list)      # FAIL, ERROR, UNFINISHED and INCONCLUSIVE, worst first

    @property
    def label(self) -> str:
        return "cluster (once per target)" if self.backend == CLUSTER else self.backend


def worst(results: list[Result]) -> str:
    return max((r.outcome for r in results), key=lambda o: SEVERITY.get(o, 0), default="SKIP")


def unchecked(result: Result) -> list[dict[str, Any]]:
    return [c for e in result.evidence for c in e.get("checks", []) if c.get("not_checked")]


def missed(result: Result) -> str:
    """The checks a result missed (or could not decide), measured against wanted; else the first line of its
    message."""
    deciding = {"FAIL": "FAIL", "INCONCLUSIVE": "INCONCLUSIVE"}.get(result.outcome)
    checks = [c for e in result.evidence for c in e.get("checks", []) if not c.get("not_checked")
              and check_verdict(c) == deciding]
    if deciding and checks:
        said = "; ".join(f"{c['name']}: {_measured(c)} (wanted {c['comparison']} {c['threshold']:g}{c.get('unit', '')})"
                         for c in checks)
        return f"not decided: {said}" if deciding == "INCONCLUSIVE" else said
    first = result.message.strip().splitlines()[0] if result.message.strip() else result.outcome.lower()
    return first[:MESSAGE_CHARS]


def check_verdict(check: dict[str, Any]) -> str:
    """A recorded check's verdict (a record older than intervals: from `passed`)."""
    return str(check.get("verdict") or ("PASS" if check.get("passed") else "FAIL"))


def _measured(check: dict[str, Any]) -> str:
    value, low, high, unit = check.get("measured"), check.get("low"), check.get("high"), check.get("unit", "")
    if value is None:
        return "nothing measured"
    if low is None or high is None or low == high:
        return f"{value:g}{unit}"
    runs = check.get("runs", 1)
    return f"{value:g}{unit} [{low:g}, {high:g}]" + (f" over {runs} runs" if runs > 1 else "")


def verdicts(record: Record) -> list[BackendVerdict]:
    """Per backend (the once-per-cluster cases last): criteria by worst outcome, failures and unchecked named."""
    criteria, backends, cells = record.matrix()
    found = []
    for backend in sorted(backends, key=lambda b: (b == CLUSTER, b)):
        verdict = BackendVerdict(backend, {o: 0 for o in COLUMNS})
        for criterion in criteria:
            cell = cells.get((criterion, backend))
            if not cell:
                continue
            outcome = worst(cell)
            verdict.counts[outcome] = verdict.counts.get(outcome, 0) + 1
            bad = sorted((r for r in cell if r.outcome in SHOWN),
                         key=lambda r: -SEVERITY[r.outcome])
            verdict.failed += [Named(criterion, r.outcome, missed(r), r.cell_id) for r in bad]
            gaps = [c for r in cell for c in unchecked(r)]
            if gaps:
                why = "; ".join(f"{c['name']}: {c['not_checked']}" for c in gaps)
                verdict.not_checked.append(Named(criterion, "NOT CHECKED", why[:2 * MESSAGE_CHARS], cell[0].cell_id))
        verdict.failed.sort(key=lambda n: -SEVERITY[n.outcome])
        found.append(verdict)
    return found


def gpu_summary(nodes: list[dict[str, Any]]) -> str:
    """'32 × NVIDIA-H100-80GB-HBM3 (4 nodes, simulated), driver 550.90.07, CUDA 12.4' (several models: each)."""
    if not nodes:
        return "no GPU nodes"
    by_model: dict[str, list[dict[str, Any]]] = {}
    for node in nodes:
        by_model.setdefault(str(node.get("model")), []).append(node)
    parts = []
    for model, group in sorted(by_model.items()):
        count = sum(int(n.get("count") or 0) for n in group)
        drivers = ", ".join(sorted({str(n.get("driver_version")) for n in group}))
        cuda = ", ".join(sorted({str(n.get("cuda_version")) for n in group if n.get("cuda_version")}))
        kind = "simulated" if all(n.get("simulated") for n in group) else "real"
        kwok = sum(1 for n in group if n.get("kwok"))
        # the sim's real nodes: real kubelets, simulated devices (a record older than the field says nothing)
        if kind == "simulated" and all("kwok" in n for n in group) and kwok < len(group):
            kind += f"; {kwok} kwok, {len(group) - kwok} real kubelet{'s' if len(group) - kwok != 1 else ''}"
        parts.append(f"{count} × {model} ({len(group)} node{'s' if len(group) != 1 else ''}, {kind}), "
                     f"driver {drivers}" + (f", CUDA {cuda}" if cuda else ""))
    return "; ".join(parts)


def environment_line(record: Record) -> str:
    """Target, Kubernetes version, GPU model × count, driver: the environment in one line."""
    target = record.target or {}
    where = f"{target.get('kind', '?')} (context {target.get('context', '?')}, {target.get('api_url', '?')})"
    parts = target.get("parts") or []
    if parts:  # side by side (record/merge.py): the same nodes in each part's cluster
        where = f"{len(parts)} {target.get('kind', '?')} clusters side by side"
        first = [n for n in record.nodes if str(n.get("node", "")).startswith(f"{parts[0]['name']}: ")]
        return (f"{where} · Kubernetes {target.get('kubernetes_version', '?')} · each: "
                f"{gpu_summary(first or record.nodes)}")
    return f"{where} · Kubernetes {target.get('kubernetes_version', '?')} · {gpu_summary(record.nodes)}"


def title(record: Record) -> str:
    """The page's title: the run and the target, not the file."""
    target = record.target or {}
    context = target.get("context")
    where = f"{target.get('kind', '?')}" + (f" {context}" if context and context not in ("-", target.get("kind")) else "")
    return f"gpupoc run {record.run_id} on {where}"


def outcome_counts(record: Record) -> Counter[str]:
    """Results by outcome over the whole run (the headline)."""
    return Counter(worst(cell) for cell in record.matrix()[2].values())

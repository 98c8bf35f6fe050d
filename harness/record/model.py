"""The record's data model (the JSON is the source; the HTML is a view of it)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.core.errors import ConfigError

SCHEMA_VERSION = 3  # 3: task samples per result, an operations table per backend
READABLE_VERSIONS = (2, 3)  # 2: evidence has chart specs, series per chart, checks that were not checked
OUTCOMES = ("PASS", "FAIL", "ERROR", "SKIP", "UNFINISHED")


@dataclass
class Result:
    nodeid: str
    criterion: str
    backend: str
    outcome: str            # one of OUTCOMES
    message: str = ""
    duration_s: float = 0.0
    evidence: list[dict[str, Any]] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)  # what it submitted: one per shape (record.samples)

    @property
    def cell_id(self) -> str:
        return f"ev-{abs(hash(self.nodeid)) % 10**10}"


@dataclass
class Record:
    run_id: str
    started_at: str
    harness_version: str
    commit: str
    target: dict[str, Any] = field(default_factory=dict)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    schedulers: list[dict[str, str]] = field(default_factory=list)
    slurm: dict[str, Any] = field(default_factory=dict)  # the Slurm backend's site, when it had one
    profile: dict[str, Any] = field(default_factory=dict)
    results: list[Result] = field(default_factory=list)
    finished_at: str = ""
    interrupted: bool = False
    runner: str = ""  # Python, pytest and the platform the run ran on
    operations: dict[str, dict[str, Any]] = field(default_factory=dict)  # backend -> record.operations.Operations
    # "criterion [backend]" -> why the reference sim is designed to give that outcome (suites/expected.yaml; the sim
    # only: a real cluster's outcomes are its own)
    designed: dict[str, str] = field(default_factory=dict)
    # "criterion [backend]" -> the release the verdict holds for and the later one known to change it
    # (harness/record/caveats.py, suites/releases.yaml)
    caveats: dict[str, str] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def models(self) -> list[dict[str, Any]]:
        """The inventory by GPU model: each model (and resource) with its nodes and GPUs, most GPUs first. A record of
        parts side by side names each node's part (a cluster each: record/merge.py): counted per cluster, `clusters`
        of them, `each` where every cluster has as many (else the sums)."""
        tally: dict[tuple[str, str], dict[str, list[int]]] = {}
        simulated: set[tuple[str, str]] = set()
        for node in self.nodes:
            key = (str(node.get("model") or "unknown"), str(node.get("resource") or ""))
            counts = tally.setdefault(key, {}).setdefault(str(node.get("part") or ""), [0, 0])
            counts[0] += 1
            counts[1] += int(node.get("count") or 0)
            if node.get("simulated"):
                simulated.add(key)
        rows = []
        for (model, resource), clusters in tally.items():
            each = len({tuple(c) for c in clusters.values()}) == 1
            nodes, gpus = (next(iter(clusters.values())) if each else
                           [sum(c[0] for c in clusters.values()), sum(c[1] for c in clusters.values())])
            rows.append({"model": model, "resource": resource, "nodes": nodes, "gpus": gpus,
                         "clusters": len(clusters), "each": each, "simulated": (model, resource) in simulated})
        return sorted(rows, key=lambda row: (-row["gpus"], row["model"]))

    def matrix(self) -> tuple[list[str], list[str], dict[tuple[str, str], list[Result]]]:
        """(criteria, backends, cells): every criterion x backend cell and the results in it."""
        criteria = sorted({r.criterion for r in self.results})
        backends = sorted({r.backend for r in self.results})
        cells: dict[tuple[str, str], list[Result]] = {}
        for r in self.results:
            cells.setdefault((r.criterion, r.backend), []).append(r)
        return criteria, backends, cells

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, default=str)

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json())
        return path


def load_record(path: Path) -> Record:
    """A run's record.json; a ConfigError saying what is wrong when the file is not one."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror}); give the record.json of a run "
                          "(reports/RUN_ID/record.json)") from exc
    except ValueError as exc:
        raise ConfigError(f"{path}: not JSON ({exc}); give the record.json of a run") from exc
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version not in READABLE_VERSIONS:
        raise ConfigError(f"{path}: not a gpupoc record of schema {'/'.join(map(str, READABLE_VERSIONS))} "
                          f"(schema_version: {version}); "
                          "give the record.json of a run of this gpupoc")
    try:
        results = [Result(**r) for r in data.pop("results")]
        return Record(**data, results=results)
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: a gpupoc record with missing or unknown fields ({exc})") from exc


def validate(data: dict[str, Any]) -> list[str]:
    """Problems with a record's JSON against the schema (empty when valid)."""
    problems = []
    required = {"schema_version": int, "run_id": str, "started_at": str, "harness_version": str, "commit": str,
                "target": dict, "nodes": list, "schedulers": list, "profile": dict, "results": list,
                "finished_at": str, "interrupted": bool}
    for key, kind in required.items():
        if not isinstance(data.get(key), kind):
            problems.append(f"{key}: expected {kind.__name__}, got {type(data.get(key)).__name__}")
    for i, result in enumerate(data.get("results") or []):
        if result.get("outcome") not in OUTCOMES:
            problems.append(f"results[{i}].outcome: {result.get('outcome')!r} is not one of {OUTCOMES}")
        for key in ("nodeid", "criterion", "backend"):
            if not isinstance(result.get(key), str):
                problems.append(f"results[{i}].{key}: expected str")
    for i, node in enumerate(data.get("nodes") or []):
        for key in ("node", "model", "count", "driver_version", "simulated"):
            if key not in node:
                problems.append(f"nodes[{i}].{key}: missing")
    return problems

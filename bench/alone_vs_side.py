"""The timing cases' deciding values measured alone and side by side, each with its interval.

Run: python bench/alone_vs_side.py SIDE_BY_SIDE/record.json ALONE/record.json [...more alone records]
  SIDE_BY_SIDE: a `make poc` record (four parts and the real-node part sharing 2 cores);
  ALONE: records of the same cases run on one sim with nothing beside them, e.g.
    gpupoc run --backends kueue,volcano,kuberay,kai,default -- suites/training/test_gang_admission.py \\
        suites/training/test_priority_preemption.py suites/training/test_queue_wait.py ...
Prints a Markdown table: per criterion x backend x check, the value [low, high] and verdict alone and side by side,
the threshold, and the host's CPU (busy share, PSI) during each. Only checks whose value is not exact.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from harness.record.model import load_record


def rows(path: Path) -> dict[tuple[str, str, str], tuple[dict[str, Any], dict[str, Any]]]:
    """(criterion, backend, check) -> (the check, the host's load of its evidence), the last of each."""
    found: dict[tuple[str, str, str], tuple[dict[str, Any], dict[str, Any]]] = {}
    for result in load_record(path).results:
        for ev in result.evidence:
            for check in ev.get("checks", []):
                if check.get("not_checked") or check.get("low") == check.get("high"):
                    continue
                found[(result.criterion, result.backend, check["name"])] = (
                    {**check, "verdict": check.get("verdict", result.outcome)}, ev.get("host") or {})
    return found


def shown(entry: tuple[dict[str, Any], dict[str, Any]] | None) -> str:
    if entry is None:
        return "not run"
    check, host = entry
    load = f"CPU {host.get('cpu_busy_share', '?')}, PSI {host.get('cpu_pressure_some', '?')}"
    runs = f", {check['runs']} runs" if check.get("runs", 1) > 1 else ""
    return f"{check['measured']:g} [{check['low']:g}, {check['high']:g}] {check['verdict']}{runs} ({load})"


def main(paths: list[str]) -> int:
    if len(paths) < 2:
        print(__doc__)
        return 2
    side = rows(Path(paths[0]))
    alone: dict[tuple[str, str, str], tuple[dict[str, Any], dict[str, Any]]] = {}
    for path in paths[1:]:
        alone.update(rows(Path(path)))
    print("| criterion | backend | check | threshold | alone | side by side |")
    print("|---|---|---|---|---|---|")
    for key in sorted(set(alone) & set(side)) + sorted(set(alone) - set(side)):
        check = (alone.get(key) or side[key])[0]
        print(f"| {key[0]} | {key[1]} | {key[2]} | {check['comparison']} {check['threshold']:g}{check.get('unit', '')} "
              f"| {shown(alone.get(key))} | {shown(side.get(key))} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Does a backend's measurement move when the other backends run beside it? (`make poc` runs them side by side.)

Run: python bench/interference.py --alone reports/A1/record.json ... --beside reports/B1/record.json ...
  alone:  runs with one backend after another on one sim (`gpupoc run`, no --side-by-side)
  beside: runs with the backends side by side, each part on a sim of its own (`gpupoc run --side-by-side`)
Per criterion x backend x check: the measured values alone (min / median / max) and beside them; a check
"moved" when the median beside the others lies outside the spread (min..max) of the runs alone, and the
direction is the worse one for its threshold. Outcomes that differ between the two are listed too.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from harness.record.model import load_record

Key = tuple[str, str, str]


def measured(paths: list[Path]) -> tuple[dict[Key, list[float]], dict[Key, str], dict[tuple[str, str], set[str]]]:
    values: dict[Key, list[float]] = defaultdict(list)
    comparison: dict[Key, str] = {}
    outcomes: dict[tuple[str, str], set[str]] = defaultdict(set)
    for path in paths:
        for r in load_record(path).results:
            outcomes[(r.criterion, r.backend)].add(r.outcome)
            for ev in r.evidence:
                for check in ev.get("checks", []):
                    if isinstance(check.get("measured"), (int, float)) and not check.get("not_checked"):
                        key = (r.criterion, r.backend, check["name"] + (f"[{check['label']}]" if check.get("label")
                                                                        else ""))
                        values[key].append(float(check["measured"]))
                        comparison[key] = check.get("comparison", "")
    return values, comparison, outcomes


def moved_worse(alone: list[float], beside: list[float], comparison: str) -> bool:
    median = statistics.median(beside)
    if comparison == "<=":
        return median > max(alone)
    if comparison == ">=":
        return median < min(alone)
    return not min(alone) <= median <= max(alone)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alone", nargs="+", type=Path, required=True)
    parser.add_argument("--beside", nargs="+", type=Path, required=True)
    args = parser.parse_args(argv)
    alone, comparison, alone_outcomes = measured(args.alone)
    beside, _, beside_outcomes = measured(args.beside)
    print(f"{len(args.alone)} runs alone, {len(args.beside)} beside the others; values: min / median / max\n")
    print(f"{'criterion':<32} {'backend':<8} {'check':<38} {'alone':>26} {'beside':>26}  moved")
    moved = []
    for key in sorted(set(alone) & set(beside)):
        a, b = alone[key], beside[key]
        worse = moved_worse(a, b, comparison.get(key, ""))
        if worse:
            moved.append(key)
        spread = lambda v: f"{min(v):8.3f} {statistics.median(v):8.3f} {max(v):8.3f}"  # noqa: E731
        print(f"{key[0]:<32} {key[1]:<8} {key[2][:38]:<38} {spread(a):>26} {spread(b):>26}  "
              f"{'WORSE' if worse else ''}")
    changed = {k: (alone_outcomes[k], beside_outcomes[k]) for k in set(alone_outcomes) & set(beside_outcomes)
               if alone_outcomes[k] != beside_outcomes[k]}
    for (criterion, backend), (was, now) in sorted(changed.items()):
        print(f"outcome: {criterion} [{backend}]: alone {'/'.join(sorted(was))}, beside {'/'.join(sorted(now))}")
    print(f"\n{len(moved)} of {len(set(alone) & set(beside))} checks moved the worse way beyond their spread alone; "
          f"{len(changed)} outcome(s) differ")
    return 1 if moved or changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

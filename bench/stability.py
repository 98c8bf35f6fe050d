"""Zero false alarms: the outcomes and the spread of every measured value over K runs of the suites.

Run: bash bench/stability.sh [K]   (or: python bench/stability.py reports/RUN-1/record.json ...)
Per criterion x backend: the outcome of each run (a '!' marks one the design in suites/expected.yaml
does not expect) and, per check, the measured values' min / median / max. Exit status 1 when any run
has an outcome other than designed: a defect to fix at its cause, never by widening a threshold.
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from pathlib import Path

from harness.run.outcomes import load_expected, unexpected
from harness.record.model import load_record


def main(paths: list[str]) -> int:
    designed = load_expected()
    wanted = {(d.criterion, d.backend): d.outcome for d in designed}
    outcomes: dict[tuple[str, str], list[str]] = defaultdict(list)
    values: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    problems = []
    for path in paths:
        record = load_record(Path(path))
        results = [(r.criterion, r.backend, r.outcome) for r in record.results]
        problems += [f"{record.run_id}: {p}" for p in unexpected(results, designed)]
        for r in record.results:
            mark = "!" if unexpected([(r.criterion, r.backend, r.outcome)], designed) else ""
            outcomes[(r.criterion, r.backend)].append(r.outcome + mark)
            for ev in r.evidence:
                for check in ev.get("checks", []):
                    if isinstance(check.get("measured"), (int, float)):
                        label = check["name"] + (f"[{check['label']}]" if check.get("label") else "")
                        values[(r.criterion, r.backend, label)].append(float(check["measured"]))
    print(f"{len(paths)} runs; '!' = not as designed (suites/expected.yaml)\n")
    print(f"{'criterion':<34} {'backend':<8} outcomes (designed)")
    for (criterion, backend), found in sorted(outcomes.items()):
        design = wanted.get((criterion, backend), "PASS")
        print(f"{criterion:<34} {backend:<8} {' '.join(found)}  ({design})")
    print(f"\n{'criterion':<34} {'backend':<8} {'check':<34} {'min':>9} {'median':>9} {'max':>9}")
    for (criterion, backend, check), found in sorted(values.items()):
        print(f"{criterion:<34} {backend:<8} {check:<34} {min(found):>9.3f} {statistics.median(found):>9.3f} "
              f"{max(found):>9.3f}")
    for line in problems:
        print(f"not as designed: {line}")
    print(f"\n{'no false alarm' if not problems else f'{len(problems)} outcome(s) not as designed'} over "
          f"{len(paths)} runs")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Where `make test`'s time went, from the timeline its workers wrote (tests/conftest.py: reports/make-test-timeline.jsonl).

Run: python bench/make_test_timeline.py [TIMELINE] [--top N]. Prints each worker's span, busy and idle seconds, the
files by their seconds (setup, call and teardown together) with the worker that ran them, and the longest tests.
Numbers go to bench/RESULTS.md; nothing here asserts.
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

DEFAULT = Path(__file__).resolve().parent.parent / "reports" / "make-test-timeline.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("timeline", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.timeline.read_text().splitlines() if line.strip()]
    if not rows:
        raise SystemExit(f"{args.timeline}: no tests recorded")
    begin = min(r["start"] for r in rows)
    print(f"{len({r['test'] for r in rows})} tests, {max(r['stop'] for r in rows) - begin:.0f} s from the first to the last")
    for worker in sorted({r["worker"] for r in rows}):
        mine = sorted((r for r in rows if r["worker"] == worker), key=lambda r: r["start"])
        busy = sum(r["stop"] - r["start"] for r in mine)
        span = mine[-1]["stop"] - begin
        print(f"  {worker}: ended at {span:.0f} s, busy {busy:.0f} s, between tests {span - busy:.0f} s")
    by_file: dict[tuple[str, str], float] = collections.defaultdict(float)
    by_test: dict[str, float] = collections.defaultdict(float)
    for r in rows:
        by_file[(r["test"].split("::", 1)[0], r["worker"])] += r["stop"] - r["start"]
        by_test[r["test"]] += r["stop"] - r["start"]
    print("files (seconds, worker):")
    for (path, worker), seconds in sorted(by_file.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"  {seconds:7.0f}  {worker}  {path}")
    print("tests (seconds):")
    for test, seconds in sorted(by_test.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"  {seconds:7.0f}  {test}")


if __name__ == "__main__":
    main()

"""Where the host's CPU goes while something runs (make test, make poc): every process's CPU time, read from
/proc every few seconds and summed by what the process is (its command; a Python process by its module), written
as JSON after each pass: a process's whole CPU time, also what it used before the first pass. Processes that
live less than one pass are not counted.

    python bench/cpu_by_process.py OUT.json [--every 3]   # stop it with Ctrl-C or kill once the run is over
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def what(pid: str) -> str | None:
    """A process's name for the sums: its command, or `py:<module>` for `python -m <module>`."""
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        if not comm.startswith("python"):
            return comm
        argv = Path(f"/proc/{pid}/cmdline").read_text().split("\0")
    except OSError:
        return None
    if "-m" in argv and argv.index("-m") + 1 < len(argv):
        module = argv[argv.index("-m") + 1]
        return "py:pytest-suite" if module == "pytest" and "-n" not in argv else f"py:{module}"
    return "py:" + (argv[1].rsplit("/", 1)[-1] if len(argv) > 1 else "?")


def cpu_seconds(pid: str) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--every", type=float, default=3.0, help="seconds between passes")
    args = parser.parse_args()
    seen: dict[str, tuple[str, float]] = {}  # pid -> (name, its CPU seconds at the last pass)
    while True:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            seconds = cpu_seconds(pid)
            if seconds is None:
                continue
            name = seen[pid][0] if pid in seen else what(pid)
            if name is not None:
                seen[pid] = (name, seconds)
        sums: collections.Counter[str] = collections.Counter()
        for name, seconds in seen.values():
            sums[name] += seconds
        args.out.write_text(json.dumps([(name, round(s, 1)) for name, s in sums.most_common()]))
        time.sleep(args.every)


if __name__ == "__main__":
    main()

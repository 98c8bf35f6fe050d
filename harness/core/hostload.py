"""The load of the host the harness runs on, over a case's measurement window: CPU busy share from /proc/stat and,
where the kernel has PSI, the share of time some task waited for a CPU (/proc/pressure/cpu). A verdict measured on
a saturated host says so beside it. Linux only; elsewhere nothing is measured."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

STAT = Path("/proc/stat")
PRESSURE = Path("/proc/pressure/cpu")


@dataclass(frozen=True)
class Snapshot:
    at: float
    busy: float | None       # CPU jiffies not idle or iowait, all CPUs
    total: float | None
    waited_us: float | None  # PSI "some" total: microseconds some task waited for a CPU


def snapshot() -> Snapshot:
    busy = total = waited = None
    try:
        fields = [float(v) for v in STAT.read_text().splitlines()[0].split()[1:]]
        total, busy = sum(fields[:8]), sum(fields[:8]) - fields[3] - fields[4]
    except (OSError, ValueError, IndexError):
        pass
    try:
        some = PRESSURE.read_text().splitlines()[0]
        waited = float(some.rsplit("total=", 1)[1])
    except (OSError, ValueError, IndexError):
        pass
    return Snapshot(time.time(), busy, total, waited)


def between(first: Snapshot, last: Snapshot) -> dict[str, float]:
    """Pure: the host's CPU busy share and CPU pressure (PSI some) between two snapshots, as far as measured."""
    found: dict[str, float] = {}
    if first.total is not None and last.total is not None and last.total > first.total:
        found["cpu_busy_share"] = round(((last.busy or 0.0) - (first.busy or 0.0)) / (last.total - first.total), 3)
    span = last.at - first.at
    if first.waited_us is not None and last.waited_us is not None and span > 0:
        found["cpu_pressure_some"] = round((last.waited_us - first.waited_us) / 1e6 / span, 3)
    if span > 0:
        found["window_s"] = round(span, 1)
    return found

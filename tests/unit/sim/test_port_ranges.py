"""Every sim the project starts on one host has a port range of its own: the default sim, make test's workers, the
second sims of tests and bench/, the side-by-side parts, the real-node sims, the multicluster case's workers.
Each range is a base and the ports above it (harness/sim/config.py), all below Linux's ephemeral ports."""

import re
from pathlib import Path

from harness.cli.side_by_side import PART_PORT_BASES
from harness.sim.config import DEFAULT_PORT_BASE
from harness.sim.worker_sims import PORT_BASES as MULTICLUSTER_WORKER_BASES
from tests.conftest import WORKER_PORT_BASES

REPO = Path(__file__).resolve().parents[3]
SPAN = 720  # a sim's ports end below this far above its base (harness/sim/config.py, Ports; docs/sim.md)
EPHEMERAL = 32768


def _constant(path: str, pattern: str) -> int:
    found = re.search(pattern, (REPO / path).read_text())
    assert found, f"{path}: {pattern} not found"
    return int(found.group(1))


def test_no_two_sims_share_a_port_range() -> None:
    bases = {"default sim": DEFAULT_PORT_BASE,
             **{f"make test worker {w}": b for w, b in WORKER_PORT_BASES.items()},
             **{f"side-by-side part {i}": b for i, b in enumerate(PART_PORT_BASES)},
             **{f"multicluster worker {i}": b for i, b in enumerate(MULTICLUSTER_WORKER_BASES)},
             "tests' second sim": _constant("tests/sim/test_lifecycle.py", r"PORT_BASE = (\d+)"),
             "real-node tests' sim": _constant("tests/sim/test_real_nodes.py", r"PORT_BASE = (\d+)"),
             "make poc's real-node sim": _constant("sim/poc.sh", r"GPUPOC_SIM_PORT_BASE=(\d+)"),
             "bench's sim": _constant("bench/sim_bringup.py", r'PORT_BASE = "(\d+)"')}
    # make poc's real-node sim and the real-node tests' one share a range: make poc and make test never run at once
    assert bases.pop("make poc's real-node sim") == bases["real-node tests' sim"]
    ordered = sorted(bases.items(), key=lambda kv: kv[1])
    clashes = [(a, b) for (a, x), (b, y) in zip(ordered, ordered[1:]) if y - x < SPAN]
    assert not clashes, clashes
    assert all(base + SPAN <= EPHEMERAL for base in bases.values()), bases


def test_kinds_prometheus_forwarder_is_outside_every_sims_range() -> None:
    """kind/here.sh forwards Prometheus from the host's 127.0.0.1 while make test's sims run: a multicluster worker
    sim's Prometheus held 19090, kind's old port (make test mt41, 2026-12-08)."""
    port = _constant("kind/here.sh", r"GPUPOC_KIND_PROMETHEUS_PORT:-(\d+)")
    bases = [DEFAULT_PORT_BASE, *WORKER_PORT_BASES.values(), *PART_PORT_BASES, *MULTICLUSTER_WORKER_BASES,
             _constant("tests/sim/test_lifecycle.py", r"PORT_BASE = (\d+)"),
             _constant("tests/sim/test_real_nodes.py", r"PORT_BASE = (\d+)"),
             _constant("bench/sim_bringup.py", r'PORT_BASE = "(\d+)"')]
    assert not [b for b in bases if b <= port < b + SPAN] and port < EPHEMERAL, (port, sorted(bases))

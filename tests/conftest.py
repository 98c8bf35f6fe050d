"""Fixtures of the project's own tests: the integration tests run against the sim."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from kubernetes import client

from harness.core.paths import build_root, gpupoc_home
from harness.targets.target import Target

# `make test` runs its files on pytest-xdist workers at once (Makefile: TEST_WORKERS). The first worker uses the
# sim as usual; each other worker gets a sim of its own (its own state directory and port range, the build shared),
# so a test that restarts a scheduler, injects a fault or misconfigures the cluster disturbs no other worker's tests.
# 29000 is the default base; 30000 and 31000 are the second sims of tests/sim/test_lifecycle.py and bench/. Every
# range ends below 32768, where Linux starts handing out ephemeral ports to outgoing connections.
WORKER_PORT_BASES = {"gw1": 32000, "gw2": 28000, "gw3": 27000}
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if WORKER and WORKER != "gw0":
    if WORKER not in WORKER_PORT_BASES:
        raise pytest.UsageError(f"make test runs at most {len(WORKER_PORT_BASES) + 1} workers (TEST_WORKERS)")
    os.environ.setdefault("GPUPOC_BUILD_HOME", str(build_root()))
    os.environ["GPUPOC_HOME"] = str(gpupoc_home() / "workers" / WORKER)
    os.environ["GPUPOC_SIM_PORT_BASE"] = str(WORKER_PORT_BASES[WORKER])


# Where each test's time went, one line per phase (setup, call, teardown) and worker: bench/make_test_timeline.py
# reads it to say how long each worker was busy, which files decide the total and where a worker waited.
TIMELINE = Path(__file__).resolve().parent.parent / "reports" / "make-test-timeline.jsonl"


_writes_timeline = [True]  # false on the xdist controller, which sees every worker's reports again


def pytest_configure(config: pytest.Config) -> None:
    worker = hasattr(config, "workerinput")
    _writes_timeline[0] = worker or not getattr(config.option, "numprocesses", None)
    if not worker:  # the controller (or a run without workers) starts the file afresh
        TIMELINE.parent.mkdir(exist_ok=True)
        TIMELINE.write_text("")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if _writes_timeline[0]:
        with TIMELINE.open("a") as out:
            out.write(json.dumps({"worker": WORKER or "main", "test": report.nodeid, "phase": report.when,
                                  "start": report.start, "stop": report.stop, "outcome": report.outcome}
                                 | ({"why": why_failed(report)} if report.failed else {})) + "\n")


def why_failed(report: pytest.TestReport) -> str:
    """A failed phase's error, as its summary line gives it: CI keeps the timeline when the log is cut."""
    lines = [line for line in report.longreprtext.splitlines() if line.startswith("E ")]
    return " / ".join(line[1:].strip() for line in lines[:6])[:2000]


@pytest.fixture(scope="session")
def sim_api(target: Target) -> client.ApiClient:
    """The sim's API as its admin (the cases run as the runner: `api`); these tests exercise the sim itself, so
    another target is a usage error."""
    if target.kind != "sim":
        pytest.fail(f"the project's integration tests run against the sim, not {target.kind} {target.context}")
    return target.admin_api


@pytest.fixture()
def core(sim_api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(sim_api)


# pytest-xdist hands out whole files (--dist loadfile), those with the most tests first (its default), the next one
# to a worker once it has 2 tests left; this order (the longest files first, seconds measured 2026-12-04) decides
# among files with as many tests. Handing them out longest first instead (xdist's --no-loadscope-reorder) started
# the three longest at once and two load-sensitive cases failed (2026-12-04); xdist's order passed, in 22 min 35 s.
# Tried again on 2026-12-07 (longest first by measured seconds, the heavy unit as one): the workers ended within 24 s
# of each other, but the files that start together slowed each other, the workers' busy seconds 4599-4889 against
# 4158 in xdist's order (mt25, 23 min 36 s), make test 26-28 min.
LONGEST_FIRST = ("tests/suites/test_slurm.py", "tests/suites/test_training_scenarios.py",
                 "tests/suites/test_training_sensitivity.py", "tests/sim/test_faults.py",
                 "tests/suites/test_governance.py", "tests/suites/test_inference.py",
                 "tests/suites/test_operations.py", "tests/suites/test_multicluster.py",
                 "tests/suites/test_inference_sensitivity.py",
                 "tests/sim/test_schedulers.py", "tests/suites/test_scale.py")


# The files whose tests take tests/heavy.py's `alone()` lock, and kind's bring-up (a node image, podman, two nodes: the
# heaviest load make test puts on the host): one unit of work for pytest-xdist, so one worker runs them one after
# another instead of two workers waiting on each other's lock (111 s of one worker's time, 2026-12-04; the real nodes'
# cases 102 s for the scale smoke run on another worker, 2026-12-06) or running beside each other (the scale smoke
# run beside kind's bring-up sustained 3.1 Volcano jobs/s, against 5, 2026-12-06). In the order of LONGEST_FIRST,
# then the files' own: the real nodes last. The inference file too: its latency case's stand-ins' token times are the
# host's CPU (ITL p99 0.24 s against 0.1 beside kind's bring-up, load 16 on 2 cores, 2026-12-07), and taking the lock
# for it instead kept its worker waiting 170 s for the training scenarios (2026-12-07); in the unit it waits for none.
# Its FAILs that load only deepens (one sequence at a time, a metric query matching nothing) are a file of their own
# outside the unit: with them the unit ended 106 s after the other workers (1608 s, make test 2026-12-07).
HEAVY_FILES = ("tests/suites/test_training_scenarios.py", "tests/suites/test_inference.py",
               "tests/suites/test_scale.py", "tests/kind/test_kind_here.py", "tests/sim/test_real_nodes.py")


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    from xdist.scheduler import LoadFileScheduling

    class HeavyFilesTogether(LoadFileScheduling):  # type: ignore[misc]  # xdist has no type hints
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return "heavy files" if path in HEAVY_FILES else path

    return HeavyFilesTogether(config, log) if config.getvalue("dist") == "loadfile" else None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)
    items.sort(key=rank)

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
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False  # the files in the order of pytest_collection_modifyitems below


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


# pytest-xdist hands out whole files (--dist loadfile), the next one to a worker once it has 2 tests left. Here the
# longest first, by their seconds in make test (mt26, 2026-12-07; a file not listed: 0, after these in collection
# order), the heavy unit (below) as one: a long file taken last ended a worker 100 s after the others (governance's
# 563 s after the training sensitivity's, mt26), where xdist's own order (the most tests first) took it.
SECONDS = {"tests/suites/test_governance.py": 560, "tests/suites/test_training_sensitivity.py": 570,
           "tests/suites/test_slurm.py": 355, "tests/suites/test_operations.py": 285, "tests/sim/test_faults.py": 270,
           "tests/sim/test_harness_core.py": 175, "tests/suites/test_accelerators.py": 100,
           "tests/sim/test_lifecycle.py": 100, "tests/sim/test_least_privilege.py": 100,
           "tests/suites/test_inference_sensitivity.py": 95, "tests/record/test_record.py": 80,
           "tests/sim/test_run_lock.py": 50, "tests/sim/test_bad_input.py": 40, "tests/sim/test_schedulers.py": 32,
           "tests/suites/test_kind_charts.py": 25, "tests/sim/test_cluster.py": 24,
           "tests/suites/test_training_scenarios.py": 410, "tests/sim/test_real_nodes.py": 345,
           "tests/suites/test_inference.py": 230, "tests/kind/test_kind_here.py": 220, "tests/suites/test_scale.py": 200}


# The files whose tests take tests/heavy.py's `alone()` lock, and kind's bring-up (a node image, podman, two nodes: the
# heaviest load make test puts on the host): one unit of work for pytest-xdist, so one worker runs them one after
# another instead of two workers waiting on each other's lock (111 s of one worker's time, 2026-12-04; the real nodes'
# cases 102 s for the scale smoke run on another worker, 2026-12-06) or running beside each other (the scale smoke
# run beside kind's bring-up sustained 3.1 Volcano jobs/s, against 5, 2026-12-06). In this order: the real nodes
# last. The inference file too: its latency case's stand-ins' token times are the
# host's CPU (ITL p99 0.24 s against 0.1 beside kind's bring-up, load 16 on 2 cores, 2026-12-07), and taking the lock
# for it instead kept its worker waiting 170 s for the training scenarios (2026-12-07); in the unit it waits for none.
# Its FAILs that load only deepens (one sequence at a time, a metric query matching nothing) are a file of their own
# outside the unit: with them the unit ended 106 s after the other workers (1608 s, make test 2026-12-07).
HEAVY_FILES = ("tests/suites/test_training_scenarios.py", "tests/suites/test_inference.py",
               "tests/suites/test_scale.py", "tests/kind/test_kind_here.py", "tests/sim/test_real_nodes.py")


def scope_of(path: str) -> str:
    return "heavy files" if path in HEAVY_FILES else path


def seconds_of(scope: str) -> int:
    return sum(SECONDS.get(f, 0) for f in HEAVY_FILES) if scope == "heavy files" else SECONDS.get(scope, 0)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    from xdist.scheduler import LoadFileScheduling

    class HeavyFilesTogether(LoadFileScheduling):  # type: ignore[misc]  # xdist has no type hints
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(super()._split_scope(nodeid))

    return HeavyFilesTogether(config, log) if config.getvalue("dist") == "loadfile" else None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first (a stable sort: each file's tests keep their order), the heavy unit's in its order."""
    def rank(item: pytest.Item) -> tuple[int, int]:
        path = item.nodeid.split("::", 1)[0]
        order = HEAVY_FILES.index(path) if path in HEAVY_FILES else 0
        return -seconds_of(scope_of(path)), order
    items.sort(key=rank)

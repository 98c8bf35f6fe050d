"""A case that cannot decide runs again, pooling its samples (harness/run/repeat.py): it decides once the pooled
interval clears the threshold, and ends INCONCLUSIVE (its own outcome, neither passed nor failed) when the
profile's runs are spent. No cluster: the cases record evidence only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

INNER = '''
from pathlib import Path

from harness.core.estimate import percentile

RUNS = Path(__file__).with_name("runs")


def test_decides_once_pooled(evidence):
    run = len(RUNS.read_text()) if RUNS.exists() else 0
    RUNS.write_text("x" * (run + 1))
    ev = evidence("training.queue_wait")  # its threshold on the sim: 60 s
    # the first run's median of 50-69 s: [55, 64], undecided; with a run of 40-49.5 s pooled: [.., 56], decided
    waits = [50.0 + i for i in range(20)] if run == 0 else [40.0 + i / 2 for i in range(20)]
    ev.expect("p95_s", percentile(waits, 0.5))
    ev.verdict()


def test_never_decides(evidence):
    ev = evidence("training.queue_wait")
    ev.expect("p95_s", percentile([58.0, 59.0, 60.0, 61.0, 62.0] * 4, 0.5))  # [59, 61] however often
    ev.verdict()
'''


def test_an_undecided_case_runs_again_and_the_last_run_is_recorded(tmp_path: Path) -> None:
    (tmp_path / "test_cases.py").write_text(INNER)
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "harness.plugin", "-q", "-rA", "-p",
                             "no:cacheprovider", "test_cases.py", "--run-id=repeat", f"--reports-dir={tmp_path}",
                             "--run-lock=off", "--progress=off"],
                            capture_output=True, text=True, timeout=300, cwd=tmp_path)
    said = result.stdout + result.stderr
    assert result.returncode == 1, said  # the undecided case: not passed
    assert (tmp_path / "runs").read_text() == "xx", "decided in its second run"
    record = json.loads((tmp_path / "repeat" / "record.json").read_text())
    outcomes = {r["nodeid"].rsplit("::", 1)[1]: r for r in record["results"]}
    assert len(record["results"]) == 2, [r["nodeid"] for r in record["results"]]  # one result per case
    decided = outcomes["test_decides_once_pooled"]["evidence"][0]["checks"][0]
    assert outcomes["test_decides_once_pooled"]["outcome"] == "PASS" and decided["runs"] == 2, decided
    assert "40 samples" in decided["how"] and decided["high"] <= 60, decided
    undecided = outcomes["test_never_decides"]
    assert undecided["outcome"] == "INCONCLUSIVE", undecided
    check = undecided["evidence"][0]["checks"][0]
    assert check["runs"] == 3 and check["verdict"] == "INCONCLUSIVE" and "not decided" in undecided["message"], check
    assert "INCONCLUSIVE" in said


QUIET = '''
import pytest

from harness.core.estimate import percentile


@pytest.mark.quiet
def test_measures_the_host_alone(evidence):
    ev = evidence("training.queue_wait")
    ev.expect("p95_s", percentile([10.0 + i for i in range(20)], 0.5))
    ev.verdict()
'''


def test_a_quiet_case_waiting_for_a_quiet_host_is_not_cut_off_as_hung(tmp_path: Path) -> None:
    """pytest-timeout's limit is one run's: the wait for make poc's other parts (GPUPOC_QUIET_AFTER) comes on top
    (a 600-s limit cut the real-node part's step-time case while four sims still ran, 2026-12-05). The limit is
    shorter than the wait, and long enough for the case itself on a loaded host (2 s was not, in make test)."""
    (tmp_path / "test_quiet.py").write_text(QUIET)
    busy = tmp_path / "busy"
    busy.write_text("four sims")
    env = {**os.environ, "GPUPOC_HOST_LOCK": str(tmp_path / "host.lock"), "GPUPOC_QUIET_AFTER": str(busy)}
    with subprocess.Popen(["sh", "-c", f"sleep 12 && rm {busy}"]) as clearing:
        result = subprocess.run([sys.executable, "-m", "pytest", "-p", "harness.plugin", "-q", "-p",
                                 "no:cacheprovider", "-o", "timeout=8", "test_quiet.py", "--run-id=quiet",
                                 f"--reports-dir={tmp_path}", "--run-lock=off"],
                                capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
        clearing.wait()
    said = result.stdout + result.stderr
    assert result.returncode == 0 and "Timeout" not in said, said
    assert "waits for a quiet host (four sims)" in said, said


SATURATED = '''
from pathlib import Path

from harness.core import hostload
from harness.core.estimate import percentile

RUNS = Path(__file__).with_name("runs")
real_between = hostload.between


def saturated_in_the_first_run(first, last):
    found = real_between(first, last)
    return {**found, "cpu_pressure_some": 0.97 if len(RUNS.read_text()) == 1 else 0.1}


def test_fails_only_while_the_host_is_saturated(evidence):
    RUNS.write_text(RUNS.read_text() + "x" if RUNS.exists() else "x")
    hostload.between = saturated_in_the_first_run
    ev = evidence("training.queue_wait")  # its threshold on the sim: 60 s
    waits = [70.0 + i for i in range(20)] if len(RUNS.read_text()) == 1 else [10.0 + i for i in range(20)]
    ev.expect("p95_s", percentile(waits, 0.5))
    ev.verdict()


def test_fails_on_a_count_while_the_host_is_saturated(evidence):
    hostload.between = lambda first, last: {"cpu_pressure_some": 0.97}
    ev = evidence("training.gang_admission")
    ev.expect("max_partial_pods", 3)
    ev.verdict()
'''


def test_a_time_missed_on_a_saturated_host_is_no_verdict_and_its_run_is_not_pooled(tmp_path: Path) -> None:
    """A FAIL decided only by times measured while the host was saturated (CPU pressure 0.97) runs again without
    its samples (the host's, not the cluster's); a count missed is a FAIL whatever the host's load."""
    (tmp_path / "test_saturated.py").write_text(SATURATED)
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "harness.plugin", "-q", "-rA", "-p",
                             "no:cacheprovider", "test_saturated.py", "--run-id=sat", f"--reports-dir={tmp_path}",
                             "--run-lock=off"],
                            capture_output=True, text=True, timeout=300, cwd=tmp_path)
    said = result.stdout + result.stderr
    record = json.loads((tmp_path / "sat" / "record.json").read_text())
    outcomes = {r["nodeid"].rsplit("::", 1)[1]: r for r in record["results"]}
    timed = outcomes["test_fails_only_while_the_host_is_saturated"]
    assert (tmp_path / "runs").read_text() == "xx", said
    check = timed["evidence"][0]["checks"][0]
    assert timed["outcome"] == "PASS" and check["runs"] == 1 and check["high"] < 60, timed  # run 1 dropped
    assert "the host was saturated while the case measured (CPU pressure 0.97" in said, said
    assert outcomes["test_fails_on_a_count_while_the_host_is_saturated"]["outcome"] == "FAIL", said

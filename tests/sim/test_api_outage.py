"""A frozen API server mid-test is the environment breaking, never a scheduler failing a criterion: an outage
the cluster seam's retry budget bridges passes with the retries noted in the evidence; one that outlasts it
ends as ERROR with the cause; neither hangs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from harness.record.model import load_record
from harness.sim import cluster
from harness.sim.paths import REPO_ROOT

REQUEST_S, BUDGET_S = 3, 12  # the seam's read timeout and retry budget in this test's profile
INNER = '''
import time
from pathlib import Path

import pytest

from harness.backends import GangJob


@pytest.mark.parametrize("backend", ["default"], indirect=True)
def test_a_criterion_waits_through_an_outage(backend, workloads, queue_model, evidence):
    ev = evidence("training.gang_admission")
    tenant = queue_model.tenants[0]
    job = GangJob("outage", tenant, 1, 1, run_for_s=1)
    workloads.pods(tenant.namespace)  # the watch is open before the freeze
    Path("ready").write_text("")
    while not Path("frozen").exists():
        time.sleep(0.05)
    workloads.submit(job)  # during the freeze: timed out and retried by the seam
    pods = workloads.pods(tenant.namespace)
    pods.wait_until("the job's pod bound", lambda objs: any((p.get("spec") or {}).get("nodeName")
                                                            for p in objs.values()), queue_model.timeouts.admit)
    ev.expect("max_partial_pods", 0)
    ev.expect("all_bound_within_s", 0)
    ev.verdict()
'''


def profile_with_short_budget(tmp_path: Path) -> Path:
    data = yaml.safe_load((REPO_ROOT / "profiles" / "sim.yaml").read_text())
    data["timeouts"].update(request=REQUEST_S, retry_budget=BUDGET_S)
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run_with_freeze(tmp_path: Path, freeze_s: float) -> tuple[str, str, list[str]]:
    """Run INNER; once it is ready, freeze (SIGSTOP) the sim's kube-apiserver for `freeze_s`; always thaw."""
    pid = cluster.component_pid("kube-apiserver")
    if pid is None:
        pytest.fail("the sim's kube-apiserver is not running")
    (tmp_path / "test_outage.py").write_text(INNER)
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "harness.plugin", "-q", "-rA", "-p",
                             "no:cacheprovider", "test_outage.py", f"--profile={profile_with_short_budget(tmp_path)}",
                             "--run-id=outage", f"--reports-dir={tmp_path}", "--queue-model=keep"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "ready").exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(pid, signal.SIGSTOP)
        try:
            (tmp_path / "frozen").write_text("")
            time.sleep(freeze_s)
        finally:
            os.kill(pid, signal.SIGCONT)
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    [result] = load_record(tmp_path / "outage" / "record.json").results
    notes = [n for e in result.evidence for n in e.get("notes", [])]
    return result.outcome, out, notes + [result.message]


def test_an_outage_within_the_retry_budget_is_bridged_and_noted(tmp_path: Path) -> None:
    outcome, out, notes = run_with_freeze(tmp_path, freeze_s=BUDGET_S - 5)
    assert outcome == "PASS", out[-3000:]
    assert any("; bridged by the retry budget" in n for n in notes), notes


def test_an_outage_beyond_the_retry_budget_is_an_error_with_its_cause(tmp_path: Path) -> None:
    outcome, out, notes = run_with_freeze(tmp_path, freeze_s=BUDGET_S + 10)
    assert outcome == "ERROR", out[-3000:]
    assert "retry budget 12s" in notes[-1] and "check that the API server is running" in notes[-1], notes

"""The suites themselves on the sim, every backend present: what passes, and the baseline's known failure.

kueue, volcano and default run every training case; kuberay runs where the sim supports it (gang
admission, preemption) and is skipped with its reason where a RayJob would have to complete; kai
(when the sim runs it) runs every case but failure recovery, skipped: bare pods have no retry policy.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kubernetes import client

from harness.record.model import load_record
from harness.sim import cluster
from harness.sim.paths import REPO_ROOT

EXPECTED_FAILURES = {("training.gang_admission", "default")}  # kube-scheduler binds a gang pod by pod


def test_training_suite_on_the_sim(tmp_path: Path, sim_api: client.ApiClient) -> None:
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "suites/training",
                             "--run-id=training-on-sim", f"--reports-dir={tmp_path}"], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=1800)
    record = load_record(tmp_path / "training-on-sim" / "record.json")
    outcomes = {(r.criterion, r.backend, r.nodeid.split("::")[1].split("[")[0]): r for r in record.results}
    failed = {(c, b) for (c, b, _), r in outcomes.items() if r.outcome in ("FAIL", "ERROR")}
    assert failed == EXPECTED_FAILURES, "\n".join(f"{r.nodeid}: {r.outcome} {r.message}" for r in record.results
                                                  if r.outcome in ("FAIL", "ERROR")) + result.stdout[-2000:]
    ran = {(c, b) for (c, b, _), r in outcomes.items() if r.outcome == "PASS"}
    for criterion in ("training.gang_admission", "training.queue_fairness", "training.priority_preemption",
                      "training.failure_recovery", "training.queue_wait"):
        for backend in ("kueue", "volcano"):
            assert (criterion, backend) in ran, f"{criterion} did not pass on {backend}"
    assert ("training.gang_admission", "kuberay") in ran and ("training.priority_preemption", "kuberay") in ran
    if cluster.component_running("kai-scheduler"):
        for criterion in ("training.gang_admission", "training.queue_fairness", "training.priority_preemption",
                          "training.queue_wait"):
            assert (criterion, "kai") in ran, f"{criterion} did not pass on kai"
        assert any(r.outcome == "SKIP" and r.backend == "kai" and "retrying" in r.message for r in record.results)
    skipped = [r for r in record.results if r.outcome == "SKIP"]
    assert all(r.message for r in skipped), "every SKIP carries its reason"

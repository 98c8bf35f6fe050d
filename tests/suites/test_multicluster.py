"""Operations — one queue over two clusters (Kueue's MultiKueue) against two worker sims: a misconfigured manager
dispatches nothing; the reference runs each job once and moves a lost worker's jobs. A file of its own: its worker
sims are held apart from kind's bring-up (tests/heavy.py: apart_for_inotify) only while its tests run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from harness.core.errors import CriterionViolation
from harness.criteria.operations import multicluster
from harness.config.profile import Profile
from harness.jobs.kubernetes import Workloads
from harness.record.evidence import Evidence
from harness.setup.multicluster import CA_BY_PATH_ENV
from harness.targets import sim
from harness.targets.target import Target
from suites.operations.test_multicluster import WORKERS, multicluster_run
from tests.heavy import apart_for_inotify


@pytest.fixture(scope="module")
def worker_sims(sim_api: client.ApiClient) -> Iterator[list[Any]]:
    """Two worker sims for both multicluster tests (the misconfigured run first: it leaves them as they were)."""
    with apart_for_inotify(), sim.worker_sims(WORKERS, 8) as sims:
        yield sims


@pytest.mark.parametrize("backend", ["kueue"], indirect=True)
def test_one_queue_over_two_clusters_fails_when_the_workers_kubeconfigs_name_their_ca_by_path(
        target: Target, workloads: Workloads, queue_model: Profile, worker_sims: list[Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Kueue v0.19 refuses a kubeconfig naming its CA by path (InsecureKubeConfig): no worker is active, nothing is
    dispatched; the case ends as soon as every worker is refused for good: no dispatch measured, both jobs lost."""
    monkeypatch.setenv(CA_BY_PATH_ENV, "1")
    evidence = Evidence.of(multicluster.CRITERION, "kueue", queue_model.thresholds[multicluster.CRITERION.id])
    with pytest.raises(CriterionViolation, match=r"max_dispatch_s: nothing measured \(wanted <= 15 s\).*"
                                                 r"max_jobs_lost: 2 jobs"):
        multicluster_run(target, workloads, queue_model, [s.cluster() for s in worker_sims], lambda _name: "",
                         evidence)
    assert any("InsecureKubeConfig" in note for note in evidence.notes), evidence.notes


@pytest.mark.parametrize("backend", ["kueue"], indirect=True)
def test_one_queue_over_two_clusters_runs_each_job_once_and_moves_a_lost_workers_jobs(
        target: Target, workloads: Workloads, queue_model: Profile, worker_sims: list[Any]) -> None:
    by_name = {s.name: s for s in worker_sims}
    evidence = Evidence.of(multicluster.CRITERION, "kueue", queue_model.thresholds[multicluster.CRITERION.id])
    multicluster_run(target, workloads, queue_model, [s.cluster() for s in worker_sims],
                     lambda name: by_name[name].down(), evidence)
    checks = {c.name: c for c in evidence.checks}
    assert all(c.passed and not c.not_checked for c in checks.values()), [c.describe() for c in checks.values()]
    assert checks["max_redispatch_s"].measured is not None and checks["max_redispatch_s"].measured > 0
    rows = evidence.tables["each job, on the manager and on the workers"]
    assert any("," in row["ran on"] for row in rows), rows  # a job that ran on the worker taken away, then the other

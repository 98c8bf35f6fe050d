"""Slurm as a backend, on the sim's real Slurm (Debian's slurmctld, slurmd per node, slurmdbd on MariaDB,
slurmrestd with JWT): the training cases it has run through slurmrestd with the same thresholds, and a
misconfigured Slurm makes its criterion FAIL with the measured value."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from harness.backends import ALL
from harness.backends.slurm import SlurmBackend
from harness.run.outcomes import load_expected, unexpected
from harness.config.profile import load_profile
from harness.record.model import load_record
from harness.sim import cluster
from harness.sim.slurm import daemons as sim_slurm
from harness.jobs.slurm.system import GANG_AS_ARRAY_ENV, NO_REQUEUE_ENV
from harness.targets.target import Target
from tests.suites.test_governance import SESSION_IN_10_S, suite
from tests.suites.test_training_sensitivity import (ADMIT_TIMEOUT_S, PREEMPT_WITHIN_S, SIM_PROFILE, profile_variant,
                                                     short_admission, short_admit_timeout)

# Fairness on Slurm lasts four ranking periods and a wait for a ranking (about 5 minutes): its PASS is `make poc`'s;
# its FAIL on equal shares is observed beside the Kubernetes scenarios (tests/suites/test_training_scenarios.py)
CASES = ("test_gang_admission.py", "test_priority_preemption.py", "test_queue_wait.py",
         "test_failure_recovery.py", "test_control_plane_recovery.py", "test_topology_placement.py")


@pytest.fixture(scope="module")
def slurm(sim_api: client.ApiClient) -> sim_slurm.SlurmLayout:
    if not cluster.component_running("slurmrestd"):
        pytest.skip("the sim runs no Slurm (GPUPOC_SIM_SCHEDULERS without slurm)")
    return sim_slurm.SlurmLayout(cluster.layout())


def test_the_training_cases_run_on_slurm_through_slurmrestd(tmp_path: Path, slurm: sim_slurm.SlurmLayout) -> None:
    result = suite(*(f"suites/training/{c}" for c in CASES), "--backends=slurm", "--run-id=slurm",
                   f"--reports-dir={tmp_path}")
    record = load_record(tmp_path / "slurm" / "record.json")
    outcomes = [(r.criterion, r.backend, r.outcome) for r in record.results]
    assert not unexpected(outcomes, load_expected()), "\n".join(
        f"{r.nodeid}: {r.outcome} {r.message}" for r in record.results) + result.stdout[-3000:]
    passed = {c for c, _, o in outcomes if o == "PASS"}
    assert {"training.gang_admission", "training.priority_preemption", "training.queue_wait",
            "training.failure_recovery", "training.control_plane_recovery", "training.topology_placement"} <= passed, \
        outcomes
    wait = next(r for r in record.results if r.criterion == "training.queue_wait")
    cross_checks = [c for c in wait.evidence[0]["checks"] if c["name"].startswith("metric_tolerance_s")]
    assert cross_checks and not any(c["not_checked"] for c in cross_checks), "the sim's exporter's histogram"
    # slurmdbd recorded every job with the tenant's own user and account: the submitting identity is real
    accounting = subprocess.run(["sacct", "--allusers", "--noheader", "--parsable2", "-X", "--starttime=now-1hour",
                                 "--format=JobName,User,Account"], capture_output=True, text=True, env=slurm.env(),
                                check=True).stdout.splitlines()
    rows = [line.split("|") for line in accounting if line.startswith(("gang-", "urgent-", "wait-team-a-"))]
    assert rows and all(user == "team-a-submitter" and account == "team-a" for _, user, account in rows
                        if not _.startswith("gang-filler")), rows


def test_the_governance_cases_run_on_slurm_through_slurmrestd(tmp_path: Path, slurm: sim_slurm.SlurmLayout) -> None:
    """Quota (the account's GPU limit), queue and job isolation (another tenant's account refused at submission, its
    jobs neither readable nor changeable), queue classes (a session's high QOS preempts low training), monitoring
    (the sim's exporter), audit and cost (slurmdbd's accounting) pass; borrowing is SKIP (a GrpTRES is a cap, not a quota
    that is lent and reclaimed)."""
    result = suite("suites/governance/test_quota.py::test_quota", "suites/governance/test_queue_classes.py",
                   "suites/governance/test_tenant_isolation.py::test_queue_isolation",
                   "suites/governance/test_borrowing_reclaim.py", "suites/governance/test_monitoring_coverage.py",
                   "suites/governance/test_audit.py", "suites/governance/test_cost_attribution.py",
                   "--backends=slurm", "--run-id=slurm-governance",
                   f"--reports-dir={tmp_path}")
    record = load_record(tmp_path / "slurm-governance" / "record.json")
    outcomes = {(r.criterion, r.outcome) for r in record.results}
    assert outcomes == {("governance.quota", "PASS"), ("governance.queue_classes", "PASS"),
                        ("governance.tenant_isolation", "PASS"), ("governance.monitoring_coverage", "PASS"),
                        ("governance.audit", "PASS"), ("governance.cost_attribution", "PASS"),
                        ("governance.borrowing_reclaim", "SKIP")}, \
        "\n".join(f"{r.nodeid}: {r.outcome} {r.message}" for r in record.results) + result.stdout[-3000:]
    isolation = next(r for r in record.results if r.criterion == "governance.tenant_isolation")
    tried = next(rows for name, rows in isolation.evidence[0]["tables"].items() if "other tenant's jobs" in name)
    assert len(tried) == 9 and all(row["verdict"] == "as expected" for row in tried), tried
    cost = next(r for r in record.results if r.criterion == "governance.cost_attribution")
    accounted = next(rows for name, rows in cost.evidence[0]["tables"].items() if "slurmdbd" in name)
    assert {row["account"] for row in accounted} == {"team-a", "team-b"}, accounted
    audit = next(r for r in record.results if r.criterion == "governance.audit")
    slurm_rows = [row for row in audit.evidence[0]["tables"]["audit: each submitted object and its audit entry"]
                  if row["object"].startswith("slurm/jobs")]
    assert slurm_rows and all(row["verdict"] == "as expected" for row in slurm_rows), slurm_rows
    assert any("refused at creation (slurmrestd POST job/submit as team-a-submitter" in n and
               "Invalid account" in n for n in isolation.evidence[0]["notes"]), isolation.evidence


def fails_on_slurm(case: str, *said: str, args: tuple[str, ...] = ()) -> str:
    """Run `case` on Slurm with the model as it is now: it must FAIL, its output saying each of `said`."""
    result = suite(case, "--backends=slurm", "--queue-model=keep", *args)
    assert "1 failed" in result.stdout, result.stdout[-3000:]
    for text in said:
        assert text in result.stdout, f"{text!r} not in:\n{result.stdout[-3000:]}"
    return result.stdout


def apply_reference_slurm_model(target: Target) -> None:
    backend = ALL["slurm"]
    assert isinstance(backend, SlurmBackend) and backend.unavailable_reason(target) is None  # finds the sim's Slurm
    backend.apply_reference_model(load_profile(SIM_PROFILE))


@pytest.fixture()
def reference_slurm_model_afterwards(slurm: sim_slurm.SlurmLayout, target: Target) -> Iterator[None]:
    yield
    apply_reference_slurm_model(target)


def test_preemption_fails_on_slurm_when_the_high_qos_cannot_preempt(
        tmp_path: Path, slurm: sim_slurm.SlurmLayout, reference_slurm_model_afterwards: None) -> None:
    sim_slurm.sacctmgr(slurm, "modify", "qos", "where", "name=high", "set", "preempt=")
    fails_on_slurm("suites/training/test_priority_preemption.py",
                   f"training.priority_preemption [slurm]: measured admit_within_s: {ADMIT_TIMEOUT_S}",
                   f"(wanted <= {PREEMPT_WITHIN_S} s)",
                   args=(f"--profile={profile_variant(tmp_path, short_admit_timeout)}",))


def test_queue_classes_fail_on_slurm_when_the_session_qos_cannot_preempt_training(
        tmp_path: Path, slurm: sim_slurm.SlurmLayout, reference_slurm_model_afterwards: None) -> None:
    """A Slurm workload class is its QOS: a high QOS that may not preempt low leaves the interactive session waiting
    behind training that fills the cluster (the wait ends at twice the threshold, here 10 s, so 20 s: a lower
    bound; the reference starts it in about 0.5 s)."""
    sim_slurm.sacctmgr(slurm, "modify", "qos", "where", "name=high", "set", "preempt=")
    fails_on_slurm("suites/governance/test_queue_classes.py",
                   "governance.queue_classes [slurm]: measured session_start_within_s: 20 s", "(wanted <= 10 s)",
                   args=(f"--profile={profile_variant(tmp_path, SESSION_IN_10_S)}",))


def test_gang_admission_fails_on_slurm_when_the_gang_is_submitted_as_independent_array_tasks(
        tmp_path: Path, slurm: sim_slurm.SlurmLayout, monkeypatch: pytest.MonkeyPatch) -> None:
    """One node per array task: Slurm starts each task where a node is free, so 3 of the 4 run while the gang
    cannot fit; one job of 4 nodes never starts partly (the case above)."""
    monkeypatch.setenv(GANG_AS_ARRAY_ENV, "1")
    fails_on_slurm("suites/training/test_gang_admission.py",
                   "training.gang_admission [slurm]: measured max_partial_pods: 3 pods (wanted <= 0 pods)")


def test_failure_recovery_fails_on_slurm_when_jobs_are_not_requeued(slurm: sim_slurm.SlurmLayout,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A job that does not ask to be requeued ends NODE_FAIL when its node fails: nothing recovers."""
    monkeypatch.setenv(NO_REQUEUE_ENV, "1")
    fails_on_slurm("suites/training/test_failure_recovery.py::test_failure_recovery",
                   "training.failure_recovery [slurm]: measured recover_within_s: nothing measured",
                   "job failed: NodeDown")


@pytest.fixture()
def slurmctld_restarts_without_its_state(slurm: sim_slurm.SlurmLayout) -> Iterator[None]:
    """slurm.conf points StateSaveLocation at an empty directory (state kept on a disk the restarted controller
    does not see): the running slurmctld is unchanged until the criterion restarts it. Afterwards the reference
    configuration is back, slurmctld restarted on its own state, and every job cancelled."""
    reference = slurm.conf.read_text()
    empty = slurm.state / "ctld-lost"
    empty.mkdir(parents=True, exist_ok=True)
    slurm.conf.write_text(reference.replace(f"StateSaveLocation={slurm.state / 'ctld'}",
                                            f"StateSaveLocation={empty}"))
    try:
        yield
    finally:
        slurm.conf.write_text(reference)
        cluster.restart_component("slurmctld", say=lambda _: None)
        sim_slurm.cancel_all(slurm)
        shutil.rmtree(empty, ignore_errors=True)


def test_control_plane_recovery_fails_on_slurm_when_slurmctld_restarts_without_its_state(
        tmp_path: Path, slurmctld_restarts_without_its_state: None) -> None:
    fails_on_slurm("suites/training/test_control_plane_recovery.py",
                   "training.control_plane_recovery [slurm]: measured resume_within_s: nothing measured",
                   "max_jobs_lost: 3", args=(f"--profile={profile_variant(tmp_path, short_admission)}",))


@pytest.fixture()
def every_node_under_one_leaf(slurm: sim_slurm.SlurmLayout) -> Iterator[None]:
    """Every node's feature names the first leaf switch (a site whose node features do not follow its switches):
    topology.conf, which the harness reads the domains from, is unchanged. Afterwards each node's own leaf again."""
    leaves = sim_slurm.leaf_features(slurm)
    first = sorted(set(leaves.values()))[0]
    sim_slurm.set_features(slurm, {node: first for node in leaves})
    try:
        yield
    finally:
        sim_slurm.set_features(slurm, leaves)
        sim_slurm.cancel_all(slurm)


def test_topology_placement_fails_on_slurm_when_the_nodes_features_do_not_follow_the_switches(
        every_node_under_one_leaf: None) -> None:
    """Every leaf a node short of the gang: `--constraint=[leaf-0|leaf-1]` holds on any two nodes, and Slurm starts
    the gang on the two free ones, one under each leaf switch."""
    fails_on_slurm("suites/training/test_topology_placement.py",
                   "training.topology_placement [slurm]: measured max_domains_spanned: 2")


def test_quota_fails_on_slurm_when_the_account_has_no_gpu_limit(
        tmp_path: Path, slurm: sim_slurm.SlurmLayout, reference_slurm_model_afterwards: None) -> None:
    """team-b's account without GrpTRES: its job beyond the limit starts at once."""
    sim_slurm.sacctmgr(slurm, "modify", "account", "where", "name=team-b", "set", "GrpTRES=gres/gpu=-1")
    out = fails_on_slurm("suites/governance/test_quota.py::test_quota", "wanted >= 15 s")
    assert re.search(r"governance\.quota \[slurm\]: measured max_gpus_over_limit: [1-9]\d* GPUs", out), out[-3000:]
    held = re.search(r"held_for_s: (\d+(?:\.\d+)?) s(?: \[[^]]*\])? \(wanted >= 15 s\)", out)
    assert held and float(held.group(1)) < 15, out[-3000:]  # not held: it started at the next scheduling pass


@pytest.fixture()
def team_a_user_in_team_b_account(slurm: sim_slurm.SlurmLayout) -> Iterator[None]:
    """An association of team-a's user with team-b's account (an administrator's slip): the reference model has
    none, so it is removed afterwards."""
    sim_slurm.sacctmgr(slurm, "add", "user", "team-a-submitter", "account=team-b")
    try:
        yield
    finally:
        sim_slurm.sacctmgr(slurm, "delete", "user", "where", "name=team-a-submitter", "account=team-b")


def test_queue_isolation_fails_on_slurm_when_a_user_may_use_the_other_tenants_account(
        slurm: sim_slurm.SlurmLayout, team_a_user_in_team_b_account: None) -> None:
    fails_on_slurm("suites/governance/test_tenant_isolation.py::test_queue_isolation",
                   "governance.tenant_isolation [slurm]: measured max_cross_tenant_allowed[queue]: 1 actions")


@pytest.fixture()
def slurm_exporter_without_its_queue_collector(slurm: sim_slurm.SlurmLayout) -> Iterator[None]:
    """The exporter restarted without the collector of jobs per account (squeue); its own arguments afterwards."""
    with cluster.started_with_extra_args("slurm-exporter", "--collectors=nodes,fairshare,limits,accounting",
                                         say=lambda _: None):
        yield


def test_monitoring_coverage_fails_on_slurm_naming_the_series_its_exporter_no_longer_exports(
        slurm_exporter_without_its_queue_collector: None) -> None:
    fails_on_slurm("suites/governance/test_monitoring_coverage.py",
                   "governance.monitoring_coverage [slurm]: measured max_pending_mismatch: nothing measured",
                   "max_missing_series: 3 series", "missing: usage per queue: slurm_account_gpus_allocated (missing)")


@pytest.fixture()
def slurm_without_private_data(slurm: sim_slurm.SlurmLayout) -> Iterator[None]:
    """slurm.conf and slurmdbd.conf without PrivateData: every user reads every job and its accounting record."""
    files = {path: path.read_text() for path in (slurm.conf, slurm.conf.with_name("slurmdbd.conf"))}
    for path, text in files.items():
        path.write_text("".join(line for line in text.splitlines(keepends=True) if not line.startswith("PrivateData=")))
    reread(slurm)
    try:
        yield
    finally:
        for path, text in files.items():
            path.write_text(text)
        reread(slurm)


def reread(slurm: sim_slurm.SlurmLayout) -> None:
    """slurmctld and slurmdbd read their configuration again (scontrol reconfigure; slurmdbd on a restart)."""
    subprocess.run(["scontrol", "reconfigure"], env=slurm.env(), check=True, capture_output=True, timeout=30)
    cluster.restart_component("slurmdbd", say=lambda _: None)


def test_tenant_isolation_fails_on_slurm_when_users_read_each_others_jobs(
        slurm_without_private_data: None) -> None:
    fails_on_slurm("suites/governance/test_tenant_isolation.py::test_queue_isolation",
                   "governance.tenant_isolation [slurm]: measured max_cross_tenant_allowed[jobs]: 2 actions",
                   "ALLOWED: team-a: slurmrestd: read team-b's job")

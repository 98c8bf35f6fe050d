"""Outcomes mean one thing everywhere: classification, designed outcomes, not-checked sub-checks, the seam's
pure decisions."""

from __future__ import annotations

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from harness.criteria import AT_MOST, Criterion, Threshold, get, registered
from harness.core.errors import ConfigError, CriterionViolation, HarnessError, WaitTimeout
from harness.run.outcomes import ERROR, FAIL, DesignedOutcome, load_expected, raced, unexpected, classify
from harness.record.evidence import Evidence
from harness.cluster.seam import ApiUnavailable, read_timeout, settled_by_retry, transient_cause
from harness.targets.target import SIM_FEATURES, features_of

CLUSTER_FEATURES = features_of("kubeconfig", "staging")


@pytest.mark.parametrize("exc, outcome", [
    (CriterionViolation("c", 3, "<= 0"), FAIL),
    (AssertionError("invariant"), FAIL),
    (WaitTimeout("Job a: not done after 10s"), ERROR),
    (ApiUnavailable("API server down for 31s"), ERROR),
    (ConfigError("tenant team-a has no kai queue"), ERROR),
    (ApiException(status=500, reason="Internal"), ERROR),
    (ApiException(status=403, reason="Forbidden"), ERROR),  # the runner's own request refused: not a verdict
    (urllib3.exceptions.ProtocolError("reset"), ERROR),
    (ConnectionRefusedError(), ERROR),
    (TypeError("bug"), ERROR),
])
def test_outcome_classification(exc: BaseException, outcome: str) -> None:
    assert classify(exc) == outcome


def test_designed_outcomes_are_data_and_deviations_are_named() -> None:
    designed = load_expected()
    assert {(d.criterion, d.backend, d.outcome) for d in designed} >= {
        ("training.gang_admission", "default", FAIL), ("training.queue_fairness", "default", FAIL)}
    assert all(d.why for d in designed)
    assert unexpected([("training.gang_admission", "default", "FAIL"), ("training.queue_wait", "kai", "SKIP"),
                       ("training.queue_fairness", "default", "PASS"),
                       ("training.queue_wait", "kueue", "ERROR")], designed) == [
        "training.queue_fairness [default]: PASS, designed to FAIL",
        "training.queue_wait [kueue]: ERROR, designed to pass"]


def test_a_designed_fail_that_a_known_race_decides_may_pass_and_is_named() -> None:
    designed = [DesignedOutcome("training.priority_preemption", "kueue-volcano", FAIL, "why", "kueue v0", "the race"),
                DesignedOutcome("training.gang_admission", "default", FAIL, "why", "kubernetes v1")]
    results = [("training.priority_preemption", "kueue-volcano", "PASS"), ("training.gang_admission", "default", "PASS")]
    assert unexpected(results, designed) == ["training.gang_admission [default]: PASS, designed to FAIL"]
    assert raced(results, designed) == ["training.priority_preemption [kueue-volcano]: PASS this run, a designed FAIL "
                                        "that a race decides: the race"]
    assert unexpected([("training.priority_preemption", "kueue-volcano", "ERROR")], designed)


def test_every_designed_outcome_names_a_registered_criterion() -> None:
    assert {d.criterion for d in load_expected()} <= set(registered())


def evidence() -> Evidence:
    spec = Criterion("t.x", "x", (Threshold("p95_s", "p95", AT_MOST, " s"), Threshold("tol_s", "tol", AT_MOST, " s")))
    return Evidence.of(spec, "b", {"p95_s": 10.0, "tol_s": 1.0})


def test_a_check_that_cannot_be_made_is_not_checked_never_passed_or_failed() -> None:
    ev = evidence()
    ev.expect("p95_s", 4.0, label="q")
    skipped = ev.not_checked("tol_s", "b: no wait histogram exported", label="q")
    assert skipped.verdict == "NOT CHECKED" and not skipped.passed
    assert [c.name for c in ev.unchecked] == ["tol_s[q]"]
    ev.verdict()  # the measured check passed; the unchecked one neither passes nor fails the criterion


def test_a_miss_reads_with_its_measured_value() -> None:
    ev = evidence()
    ev.expect("p95_s", 75.2)
    with pytest.raises(CriterionViolation, match=r"p95_s: 75.2 s \(wanted <= 10 s\)"):
        ev.verdict()


def test_criteria_are_found_from_their_id() -> None:
    queue_wait = get("training.queue_wait")
    assert queue_wait.threshold("p95_s").direction == AT_MOST
    assert type(queue_wait).__module__ == "harness.criteria"
    assert all(c.statement and c.thresholds for c in registered().values())
    with pytest.raises(ConfigError, match="no criterion 'training.nope'"):
        get("training.nope")


def test_seam_retries_only_what_is_transient_and_watches_read_longer() -> None:
    assert transient_cause(None, 503) == "HTTP 503"
    assert transient_cause(None, 404) is None and transient_cause(None, 200) is None
    assert transient_cause(urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out"), None)
    assert transient_cause(ValueError("x"), None) is None
    refused = urllib3.exceptions.NewConnectionError(None, "refused")  # type: ignore[arg-type]
    assert transient_cause(urllib3.exceptions.MaxRetryError(None, "/", refused), None) == "NewConnectionError"
    bad_ca = urllib3.exceptions.SSLError("certificate verify failed")
    assert transient_cause(urllib3.exceptions.MaxRetryError(None, "/", bad_ca), None) is None  # will not heal
    assert settled_by_retry("POST", 409, retried=True) and settled_by_retry("DELETE", 404, retried=True)
    assert not settled_by_retry("POST", 409, retried=False) and not settled_by_retry("PATCH", 404, retried=True)
    assert read_timeout("https://h/api/v1/pods?watch=true&timeoutSeconds=300", 20) == 315
    assert read_timeout("https://h/api/v1/pods?limit=5", 20) == 20
    assert read_timeout("https://h/apis/batch/v1/namespaces/a/jobs?labelSelector=x%3Dy", 20, "DELETE") == 300
    assert read_timeout("https://h/apis/batch/v1/namespaces/a/jobs/j1", 20, "DELETE") == 20
    assert issubclass(ApiUnavailable, HarnessError)


def test_a_tenant_without_a_queue_for_the_backend_is_a_profile_gap_not_a_fail() -> None:
    from harness.backends import ALL
    from harness.jobs.model import GangJob
    from harness.config.profile import Tenant
    tenant = Tenant("team-c", "poc-team-c", "team-c-submitter", 1.0, 8, {"kueue": "team-c"})
    with pytest.raises(ConfigError, match="tenant team-c has no volcano queue in the profile") as caught:
        ALL["volcano"].manifests(GangJob("j", tenant, 1, 1))
    assert classify(caught.value) == ERROR


def test_backends_declare_capabilities_and_own_their_metric_queries() -> None:
    from harness.backends import ALL
    from harness.backends.base import JOBS_COMPLETE, PREEMPTION_COUNTER, RETRY_POLICY, WAIT_HISTOGRAM
    assert not ALL["kuberay"].lacks(JOBS_COMPLETE, SIM_FEATURES)  # the sim answers its Ray dashboards (ray_dashboard.py)
    assert "bare pods" in (ALL["kai"].lacks(RETRY_POLICY, SIM_FEATURES) or "")
    assert ALL["kai"].lacks(WAIT_HISTOGRAM, SIM_FEATURES) and not ALL["kueue"].lacks(WAIT_HISTOGRAM, SIM_FEATURES)
    assert {name for name, b in ALL.items() if not b.lacks(PREEMPTION_COUNTER, SIM_FEATURES)} == set(ALL)
    assert "exporter is not mapped" in (ALL["slurm"].lacks(PREEMPTION_COUNTER, CLUSTER_FEATURES) or "")
    assert not ALL["slurm"].lacks(WAIT_HISTOGRAM, SIM_FEATURES)
    assert ALL["slurm"].lacks(WAIT_HISTOGRAM, CLUSTER_FEATURES)
    assert ALL["kueue"].owned_kind() is not None and ALL["volcano"].owned_kind() is None
    with pytest.raises(ValueError, match="unknown capability"):
        ALL["kueue"].lacks("teleport", SIM_FEATURES)

"""Pure parts of reliability: restart measurements, the environment watch's bookkeeping, merged outages."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import requests
from prometheus_api_client.exceptions import PrometheusApiClientException

from harness.criteria.training.control_plane_recovery import (Bind, admitted_twice, disturbed, first_admission_after,
                                                              lost)
from harness.run.environment import Down, EnvironmentWatch, Part, faults_between, judged, without_sampled_twice
from harness.cluster.prometheus import transient
from harness.core.redact import environment_secrets, kubeconfig_secrets
from harness.cluster.runlock import expired
from harness.cluster.seam import Outage, merged

BINDS = [Bind("fill-0", "u1", 10.0), Bind("wait-0", "u2", 21.5), Bind("wait-1", "u3", 22.0),
         Bind("wait-1", "u4", 30.0)]


def test_resume_is_measured_from_the_restart_to_the_first_admission_of_a_waiting_job() -> None:
    assert first_admission_after(BINDS, {"wait-0", "wait-1"}, 20.0) == 1.5
    assert first_admission_after(BINDS, {"wait-2"}, 20.0) is None


def test_lost_and_twice_admitted_jobs_are_named() -> None:
    pods = {"wait-0": 1, "wait-1": 1, "wait-2": 1}
    assert lost(BINDS, pods) == ["wait-2"]
    assert admitted_twice(BINDS, pods) == ["wait-1"]


def test_a_running_job_whose_pods_changed_is_disturbed() -> None:
    assert disturbed({"steady": {"a"}}, {"steady": {"a"}}) == []
    assert disturbed({"steady": {"a"}}, {"steady": {"b"}}) == ["steady"]
    assert disturbed({"steady": {"a"}}, {}) == ["steady"]


def test_a_part_down_counts_against_a_test_only_when_it_overlaps_and_was_not_disrupted_on_purpose() -> None:
    downs = [Down("kueue", "not running", 10.0, 12.0), Down("etcd", "frozen", 30.0, None)]
    assert [d.part for d in faults_between(downs, 11.0, 20.0, set())] == ["kueue"]
    assert faults_between(downs, 11.0, 20.0, {"kueue"}) == []
    assert [d.part for d in faults_between(downs, 40.0, 50.0, set())] == ["etcd"]
    assert faults_between(downs, 13.0, 20.0, set()) == []


def test_a_fault_the_sim_logged_is_not_listed_twice_when_it_was_also_sampled() -> None:
    logged = [Down("kueue", "stopped on purpose", 10.0, 12.0)]
    sampled = [Down("kueue", "not running", 10.2, 11.8), Down("etcd", "not running", 10.5, 11.0)]
    assert [(d.part, d.problem) for d in without_sampled_twice(sampled, logged)] == [
        ("kueue", "stopped on purpose"), ("etcd", "not running")]


def test_the_watch_keeps_each_interval_a_part_was_down() -> None:
    state = {"problem": None}
    watch = EnvironmentWatch([Part("kueue", lambda: state["problem"])])
    watch.sample()
    state["problem"] = "not running"
    watch.sample()
    state["problem"] = None
    watch.sample()
    assert len(watch.downs) == 1 and watch.downs[0].ended is not None
    assert watch.faults(0, 1e12, set())[0].describe(1e12).startswith("kueue: not running for ")


def test_an_injected_fault_is_the_environment_and_a_crash_of_the_backend_itself_counts_against_it() -> None:
    downs = [Down("kube-apiserver", "not running", 1, 2), Down("kueue", "stopped on purpose", 1, 2, injected=True),
             Down("kueue", "not running", 3, 4), Down("volcano-scheduler", "not running", 1, 2)]
    faults, crashes = judged(downs, own={"kueue", "kube-scheduler"}, schedulers={"kueue", "kube-scheduler",
                                                                                 "volcano-scheduler"})
    assert [(d.part, d.injected) for d in faults] == [("kube-apiserver", False), ("kueue", True)]
    assert [(d.part, d.injected) for d in crashes] == [("kueue", False)]


def test_overlapping_outages_seen_by_several_requests_are_one() -> None:
    found = merged([Outage(10, 20, 5, "refused"), Outage(12, 25, 7, "refused", bridged=False),
                    Outage(40, 41, 1, "refused"), Outage(10, 11, 1, "refused", what="Prometheus")])
    assert [(o.what, o.started, o.ended, o.bridged) for o in found] == [
        ("API server", 10, 25, False), ("API server", 40, 41, True), ("Prometheus", 10, 11, True)]


def test_a_lease_not_renewed_within_its_duration_is_free() -> None:
    now = datetime(2026, 12, 1, 10, 0, 0, tzinfo=timezone.utc)
    assert not expired(now - timedelta(seconds=20), 30, now)
    assert expired(now - timedelta(seconds=31), 30, now)
    assert expired(None, 30, now)


def test_secret_named_variables_and_kubeconfig_credentials_are_found_and_nothing_else() -> None:
    env = {"MY_API_TOKEN": "abcdefgh12", "DB_PASSWORD": "hunter2hunter2", "GIT_AUTHOR_NAME": "Someone Long",
           "XAUTHORITY": "/home/x/.Xauthority", "SHORT_TOKEN": "abc", "PATH": "/usr/bin:/bin"}
    assert sorted(environment_secrets(env)) == ["abcdefgh12", "hunter2hunter2"]
    kubeconfig = ("users:\n- name: a\n  user:\n    token: tok-123456\n    client-key-data: a2V5LWRhdGE=\n"
                  "- name: b\n  user:\n    auth-provider:\n      config:\n        id-token: idt-987654\n")
    assert sorted(kubeconfig_secrets(kubeconfig)) == ["a2V5LWRhdGE=", "idt-987654", "tok-123456"]
    assert kubeconfig_secrets("not: [yaml") == ()


def test_a_prometheus_not_ready_yet_is_retried_and_a_bad_query_is_not() -> None:
    assert transient(PrometheusApiClientException("HTTP Status Code 503 (b'Service Unavailable')")) == "HTTP 503"
    assert transient(requests.ConnectionError()) == "ConnectionError"
    assert transient(PrometheusApiClientException("HTTP Status Code 400 (b'bad_data')")) is None


def test_redacting_a_json_file_keeps_it_json() -> None:
    """A failure message quoting `password: value"` inside a JSON string: the value goes, the escaped quote stays."""
    import json
    from harness.core.redact import redact_text
    text = json.dumps({"message": 'assert False, "token: " + x + " password: hunter2-planted"',
                       "config": "password=s3cr3t-value\\"})
    redacted = redact_text(text)
    assert "hunter2-planted" not in redacted and "s3cr3t-value" not in redacted
    assert json.loads(redacted)["message"].endswith('password: [REDACTED]"')

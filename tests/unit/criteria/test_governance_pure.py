"""The governance criteria's pure parts: quota peaks and holds, borrowing shares and victims, isolation verdicts,
audit log entries and CIS findings, monitoring states, cost attribution with its resolution, and the queue model
rendering each tenant's limit into each backend's own mechanism."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from harness.core.estimate import quadrature
from harness.criteria.governance.monitoring_coverage import Series
from harness.criteria.governance import (audit, borrowing_reclaim as reclaim, cost_attribution as cost, quota,
                                         monitoring_coverage as coverage, tenant_isolation as iso)
from harness.criteria.training.queue_fairness import Interval
from harness.config.profile import load_profile
from harness.setup.queue_model import queue_model
from harness.core.paths import REPO_ROOT

T0 = datetime(2026, 12, 1, 12, 0, 0, tzinfo=timezone.utc)


def test_peak_gpus_counts_overlaps_and_releases_before_starts_at_the_same_instant() -> None:
    intervals = [Interval("b", 0, 10, 8), Interval("b", 5, 20, 8), Interval("b", 10, 30, 8)]
    assert quota.peak_gpus(intervals) == 16  # the first ends as the third starts
    assert quota.peak_gpus([]) == 0


def test_a_held_job_is_held_for_the_whole_window_and_one_that_started_until_it_started() -> None:
    assert quota.held_for(100.0, None, 115.0) == 15.0
    assert quota.held_for(100.0, 101.5, 115.0) == 1.5


def test_borrowed_share_of_the_allowance() -> None:
    assert reclaim.borrowed_share(16, 8, 16) == 1.0
    assert reclaim.borrowed_share(12, 8, 16) == 0.5
    assert reclaim.borrowed_share(0, 8, 16) == 0.0   # a status not yet updated is not a negative share
    assert reclaim.borrowed_share(8, 8, 8) == 1.0    # no allowance: nothing to borrow


def test_wrong_victims_are_the_lenders_and_borrower_jobs_beyond_what_it_borrowed() -> None:
    assert reclaim.wrong_victims({"b1": "team-b"}, "team-a", "team-b", borrowed_jobs=1) == 0
    assert reclaim.wrong_victims({"b1": "team-b", "b2": "team-b"}, "team-a", "team-b", borrowed_jobs=1) == 1
    assert reclaim.wrong_victims({"a1": "team-a"}, "team-a", "team-b", borrowed_jobs=1) == 1


@pytest.mark.parametrize("status, outcome", [(403, iso.REFUSED), (401, iso.REFUSED), (404, iso.ALLOWED),
                                             (400, iso.ALLOWED), (201, iso.ALLOWED), (422, iso.ALLOWED)])
def test_only_authorization_refuses_a_real_request(status: int, outcome: str) -> None:
    assert iso.request_outcome(status) == outcome


def test_an_action_allowed_by_either_check_counts_and_broken_controls_are_found() -> None:
    refused = iso.Attempt("team-a", "get pods in poc-team-b", iso.REFUSED, iso.REFUSED, iso.REFUSED)
    leaky = iso.Attempt("team-a", "list secrets in poc-team-b", iso.REFUSED, iso.REFUSED, iso.ALLOWED, "HTTP 200")
    control = iso.Attempt("team-a", "create jobs (own)", iso.ALLOWED, iso.ALLOWED, iso.REFUSED, "HTTP 403")
    assert iso.cross_tenant_allowed([refused, leaky, control]) == [leaky]
    assert iso.control_failures([refused, leaky, control]) == [control]
    assert leaky.row()["verdict"] == "NOT as expected" and refused.row()["verdict"] == "as expected"


def audit_line(verb: str, name: str, code: int, user: str, impersonated: str | None = None, at: str = "12:00:00.4",
               stage: str = "ResponseComplete", received: str = "") -> str:
    event = {"stage": stage, "verb": verb, "user": {"username": user},
             "objectRef": {"resource": "jobs", "apiGroup": "batch", "namespace": "poc-team-b", "name": name},
             "responseStatus": {"code": code}, "stageTimestamp": f"2026-12-01T{at}Z",
             **({"requestReceivedTimestamp": f"2026-12-01T{received}Z"} if received else {})}
    if impersonated:
        event["impersonatedUser"] = {"username": impersonated}
    return json.dumps(event)


def test_the_audit_entry_names_the_impersonated_submitter_of_the_object_it_created() -> None:
    sa = "system:serviceaccount:poc-team-b:team-b-submitter"
    entries = audit.parse_entries([
        "not json", audit_line("patch", "j1", 201, "gpupoc-admin", sa),
        audit_line("patch", "j1", 201, "gpupoc-admin", sa, stage="RequestReceived"),
        audit_line("delete", "j1", 200, "gpupoc-admin", sa, at="12:01:00"),
        audit_line("create", "j2", 403, "someone")])
    submitted = audit.Submitted("jobs", "batch", "poc-team-b", "j1", T0, sa)
    found = audit.creation_of(submitted, entries)
    assert found is not None and found.user == sa and found.verb == "patch"
    assert abs((found.at - T0).total_seconds() - 0.4) < 1e-6
    assert audit.creation_of(audit.Submitted("jobs", "batch", "poc-team-b", "j2", T0, ""), entries) is None


def test_the_audit_time_skew_is_the_creation_second_outside_the_request_in_flight() -> None:
    """A request held 2.5 s by loaded admission webhooks still contains its object's creation: no skew. An entry
    whose request ended before the object's second began, or began after it ended, is off by the gap."""
    [slow] = audit.parse_entries([audit_line("create", "j1", 201, "u", at="12:00:02.5", received="12:00:00.1")])
    assert slow.received is not None and audit.skew_s(slow, T0) == 0.0  # T0: 12:00:00, creation within [0, 1)
    [late] = audit.parse_entries([audit_line("create", "j1", 201, "u", at="12:00:05.0", received="12:00:03.5")])
    assert audit.skew_s(late, T0) == 2.5  # the request began 2.5 s after the creation second ended
    [early] = audit.parse_entries([audit_line("create", "j1", 201, "u", at="11:59:57.0")])
    assert audit.skew_s(early, T0) == 3.0  # no received stamp: the response time alone


def test_a_slurm_jobs_accounted_submission_second_within_a_slow_request_is_no_skew() -> None:
    """slurmrestd answered 3.5 s after the harness sent the job (make poc run 17: a loaded host); slurmdbd's
    submission second lies inside that request. A second before it was sent is off by the gap."""
    from datetime import timedelta
    sent, answered = T0, T0 + timedelta(seconds=3.5)
    job = audit.Submitted("jobs", "slurm", "poc-team-a", "17", answered, "team-a", sent)
    inside = audit.Entry("team-a", "submit", "jobs", "slurm", "poc-team-a", "17", T0 + timedelta(seconds=1), 0)
    before = audit.Entry("team-a", "submit", "jobs", "slurm", "poc-team-a", "17", T0 - timedelta(seconds=3), 0)
    assert audit.submission_skew_s(job, inside) == 0.0 and audit.submission_skew_s(job, before) == 2.0


def test_cis_audit_findings_name_what_falls_short() -> None:
    rows = audit.cis_findings({"audit-log-path": "/var/log/audit.log", "audit-log-maxbackup": "1",
                               "audit-log-maxsize": "200"}, covers_workload_creates=False)
    findings = {r["check"]: r["finding"] for r in rows}
    assert findings["1.2.16 audit log path set"] == "meets"
    assert findings["1.2.17 retention (days)"] == "below the benchmark's 30"
    assert findings["1.2.18 backups kept"] == "below the benchmark's 10"
    assert findings["1.2.19 size before rotation (MB)"] == "meets"
    assert findings["3.2.1 policy covers workload creates"] == "workload creates not logged"


def test_monitoring_states_a_counter_before_its_first_event_is_not_checked_never_present() -> None:
    gauge, counter, none = Series("pending", "x_pending"), Series("preempted", "x_total", event=True), Series("wait", "")
    found = [coverage.Found(gauge, None, False), coverage.Found(counter, None, False), coverage.Found(none, None, False),
             coverage.Found(Series("usage", "x_usage"), 95.0, False), coverage.Found(Series("q", "x_q"), 90.0, True)]
    assert [f.state() for f in found] == [coverage.MISSING, coverage.NOT_YET, coverage.NO_SERIES,
                                          coverage.NOT_SCRAPED, coverage.PRESENT]
    assert len(coverage.missing(found)) == 3
    assert coverage.staleness(found, 100.0) == 10.0


def test_a_pod_without_an_exact_end_counts_to_half_a_scrape_after_its_last_scrape_seen_running() -> None:
    pod = cost.PodSeries(8, start=100.0, completed=None, last_running=112.0)
    assert cost.pod_gpu_seconds(pod, (0.0, 1000.0), 5.0) == (116.0, 40.0)  # to the middle of the next scrape
    exact = cost.PodSeries(8, start=100.0, completed=110.0, last_running=112.0)
    assert cost.pod_gpu_seconds(exact, (0.0, 1000.0), 5.0) == (80.0, 0.0)
    assert cost.pod_gpu_seconds(pod, (105.0, 108.0), 5.0)[0] == 24.0  # clipped to the window
    assert cost.pod_gpu_seconds(pod, (200.0, 300.0), 5.0) == (0.0, 0.0)  # outside it: not even uncertain
    assert cost.pod_gpu_seconds(cost.PodSeries(8, None, None, None), (0, 1), 5.0) == (0.0, 0.0)


def test_independent_end_errors_add_in_quadrature() -> None:
    assert quadrature([40.0] * 4) == pytest.approx(3 * (4 * 1600 / 12) ** 0.5)
    assert quadrature([40.0], ends=2) == pytest.approx(3 * (2 * 1600 / 12) ** 0.5)
    assert quadrature([]) == 0.0


def test_pods_shorter_than_two_scrapes_that_a_scrape_never_saw_count_in_the_resolution() -> None:
    held = [cost.Held("ns", "short", "kueue", "q", 8, 0.0, 3.0), cost.Held("ns", "long", "kueue", "q", 8, 0.0, 30.0)]
    assert cost.unseen_resolution(held, seen=set(), scrape_s=5.0) == 24.0
    assert cost.unseen_resolution(held, seen={"short"}, scrape_s=5.0) == 0.0


def test_a_pod_unseen_because_scrapes_came_late_or_failed_counts_in_the_resolution() -> None:
    """The long pod ran 30 s, but only one successful scrape fell within it (the host was loaded)."""
    held = [cost.Held("ns", "long", "kueue", "q", 8, 0.0, 30.0)]
    assert cost.unseen_resolution(held, seen=set(), scrape_s=5.0, scrapes=[-4.0, 12.0, 41.0]) == 240.0
    assert cost.unseen_resolution(held, seen=set(), scrape_s=5.0, scrapes=[-4.0, 12.0, 17.0, 41.0]) == 0.0


def test_gpu_hours_are_summed_by_the_model_of_the_node_each_pod_ran_on() -> None:
    held = [cost.Held("ns", "a", "kueue", "q", 2, 0.0, 1800.0, "h1"),
            cost.Held("ns", "b", "kueue", "q", 1, 0.0, 3600.0, "l1"),
            cost.Held("ns", "c", "kueue", "q", 4, 0.0, 900.0, "gone"),  # a node removed since
            cost.Held("ns", "d", "slurm", "q", 1, 0.0, 3600.0)]  # no node known
    assert cost.gpu_hours_by_model(held, {"h1": "H100", "l1": "L40S"}) == {
        "H100": 1.0, "L40S": 1.0, cost.UNKNOWN_MODEL: 2.0}


def test_disagreement_beyond_resolution() -> None:
    assert cost.beyond_resolution(110.0, 100.0, 20.0) == 0.0
    assert cost.beyond_resolution(150.0, 100.0, 20.0) == pytest.approx(0.3)
    assert cost.beyond_resolution(5.0, 0.0, 10.0) == 0.0
    assert cost.beyond_resolution(50.0, 0.0, 10.0) == 1.0


def test_each_tenants_limit_is_rendered_in_each_backends_own_mechanism() -> None:
    profile = load_profile(REPO_ROOT / "profiles" / "sim.yaml")
    objects = {(o["kind"], o["metadata"]["name"], o["apiVersion"].split("/")[0]): o
               for o in queue_model(profile, ["kueue", "volcano", "kai"])}
    gpu = next(r for r in objects[("ClusterQueue", "team-b", "kueue.x-k8s.io")]["spec"]["resourceGroups"][0]
               ["flavors"][0]["resources"] if r["name"] == "nvidia.com/gpu")
    assert (gpu["nominalQuota"], gpu["borrowingLimit"]) == (8, 8)
    assert objects[("Queue", "team-b", "scheduling.volcano.sh")]["spec"]["capability"] == {"nvidia.com/gpu": "16"}
    assert objects[("Queue", "team-b", "scheduling.run.ai")]["spec"]["resources"]["gpu"]["limit"] == 16


def test_a_disagreement_decides_from_the_interval_its_resolution_leaves() -> None:
    from harness.core.estimate import FAIL, INCONCLUSIVE, PASS, decide
    assert decide(cost.disagreement(102.0, 100.0, 3.0), 0.10, "<=") == PASS      # [0, 0.05]
    assert decide(cost.disagreement(108.0, 100.0, 5.0), 0.10, "<=") == INCONCLUSIVE  # [0.03, 0.13]
    assert decide(cost.disagreement(150.0, 100.0, 20.0), 0.10, "<=") == FAIL     # [0.3, 0.7]
    assert cost.worst([cost.disagreement(102.0, 100.0, 3.0), cost.disagreement(150.0, 100.0, 20.0)]).low == 0.3


def test_inference_perfs_per_request_report_gives_each_requests_latencies() -> None:
    from harness.criteria.inference.latency import per_request_samples
    entries = [{"start_time": 1.0, "end_time": 1.5, "error": None, "computed_metrics": {
                   "time_to_first_token": 0.04, "request_latency": 0.4, "inter_token_latencies": [0.01, 0.012]}},
               {"start_time": 1.1, "end_time": 1.2, "error": {"error_type": "timeout"}, "computed_metrics": None}]
    assert per_request_samples(entries) == {"ttft": (0.04,), "itl": (0.01, 0.012), "e2e": (0.4,)}
    assert per_request_samples([]) == {}


def test_a_disagreement_the_resolution_cannot_decide_is_not_checked() -> None:
    coarse = cost.disagreement(108.5, 100.0, 21.0)  # 0.085 [0, 0.295]: no run at this resolution decides 0.10
    assert "wider than the 10% allowed" in cost.too_coarse(coarse, 0.10)
    assert cost.too_coarse(cost.disagreement(108.0, 100.0, 4.0), 0.10) == ""  # [0.04, 0.12]: a run may decide
    assert cost.too_coarse(cost.disagreement(250.0, 100.0, 21.0), 0.10) == ""  # FAIL whatever the resolution


def test_every_queue_a_pod_was_charged_to_is_compared_with_the_tenants_own_first() -> None:
    held = [cost.Held("poc-team-a", "a", "kueue", "team-a", 1, 0.0, 1.0),
            cost.Held("poc-team-a", "b", "kueue", "team-a-models", 1, 0.0, 1.0),
            cost.Held("poc-team-a", "c", "kueue", "gpupoc-topology", 1, 0.0, 1.0),
            cost.Held("poc-team-b", "d", "kueue", "gpupoc-topology", 1, 0.0, 1.0),
            cost.Held("elsewhere", "e", "kueue", "", 1, 0.0, 1.0)]  # charged to no queue: none to compare
    queues = cost.charged_queues({"team-a": "team-a", "team-b": "team-b"},
                                 {"poc-team-a": "team-a", "poc-team-b": "team-b"}, held)
    assert queues == {"team-a": "team-a", "team-b": "team-b", "team-a-models": "team-a",
                      "gpupoc-topology": "team-a, team-b"}

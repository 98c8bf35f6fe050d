"""Slurm adapter logic on slurmrestd answers recorded from the sim's Slurm 22.05.8 (no Slurm needed here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.jobs.model import FAILED, PREEMPTED, QUEUED, RUNNING, SUCCEEDED
from harness.sim.slurm import daemons as sim_slurm
from harness.sim.components import Layout
from harness.core.errors import HarnessError
from harness.jobs.model import GangJob, Placement
from harness.jobs.slurm.system import (PollSource, expand_hostlist, gres_count, job_object,
                                       leaf_switches, member_objects, merged, placed_as, status_of)
from harness.config.profile import HOSTNAME, Tenant

# as GET /slurm/v0.0.38/jobs answered for a 2-node gang (fields trimmed to those read)
RUNNING_JOB = {"job_id": 7, "name": "gang-ab12c", "account": "team-a", "user_name": "team-a-submitter",
               "job_state": "RUNNING", "state_reason": "None", "nodes": "gpu-node-[0-1]", "node_count": 2,
               "submit_time": 1796154000, "start_time": 1796154001, "end_time": 1796157601, "restart_cnt": 0}
PENDING_JOB = {**RUNNING_JOB, "job_state": "PENDING", "state_reason": "Resources", "nodes": "", "start_time": 0}


def test_hostlists_expand_as_slurm_writes_them() -> None:
    assert expand_hostlist("gpu-node-[0-1,3]") == ["gpu-node-0", "gpu-node-1", "gpu-node-3"]
    assert expand_hostlist("gpu-node-2") == ["gpu-node-2"]
    assert expand_hostlist("n[08-10],login") == ["n08", "n09", "n10", "login"]
    assert expand_hostlist("") == []


def test_a_running_job_binds_every_member_and_a_pending_one_none() -> None:
    running = member_objects(RUNNING_JOB, "poc-team-a")
    assert [m["spec"].get("nodeName") for m in running] == ["gpu-node-0", "gpu-node-1"]
    assert {m["status"]["phase"] for m in running} == {"Running"}
    pending = member_objects(PENDING_JOB, "poc-team-a")
    assert len(pending) == 2 and all("nodeName" not in m["spec"] for m in pending)
    assert member_objects({**RUNNING_JOB, "job_state": "CANCELLED"}, "poc-team-a") == []


def test_states_and_times_come_from_slurm() -> None:
    running = status_of(job_object(RUNNING_JOB, "poc-team-a"))
    assert running.state == RUNNING and running.admitted_at is not None and running.finished_at is None
    assert (running.admitted_at - running.submitted_at).total_seconds() == 1  # type: ignore[operator]
    assert status_of(job_object(PENDING_JOB, "ns")).state == QUEUED
    assert status_of(job_object({**RUNNING_JOB, "job_state": "COMPLETED"}, "ns")).state == SUCCEEDED
    assert status_of(job_object({**RUNNING_JOB, "job_state": "NODE_FAIL"}, "ns")).state == FAILED
    assert status_of(job_object({**PENDING_JOB, "job_state": "REQUEUED"}, "ns")).state == PREEMPTED


def test_an_object_changes_version_only_when_the_job_changes() -> None:
    first, again = job_object(RUNNING_JOB, "ns"), job_object(dict(RUNNING_JOB), "ns")
    assert first["metadata"]["resourceVersion"] == again["metadata"]["resourceVersion"]
    assert job_object(PENDING_JOB, "ns")["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]


def test_gpus_per_node_are_read_from_gres() -> None:
    assert gres_count("gpu:h100:8(S:0)") == 8
    assert gres_count("gpu:8") == 8
    assert gres_count("") == 0


def test_the_sims_config_names_gpus_with_device_files_and_the_profiles_model(tmp_path: Path) -> None:
    lay, ports = sim_slurm.SlurmLayout(Layout(tmp_path)), sim_slurm.SlurmPorts(29000)
    conf = sim_slurm.slurm_conf(lay, ports, 4, 8, sim_slurm.gres_type("NVIDIA-H100-80GB-HBM3"))
    assert "NodeName=gpu-node-3 NodeHostname=localhost NodeAddr=127.0.0.1 Port=29713" in conf
    assert "Gres=gpu:h100:8 Features=leaf-1 State=UNKNOWN" in conf and "TopologyPlugin=topology/tree" in conf
    assert "Gres=gpu:h100:8" in conf and "PreemptType=preempt/qos" in conf and "PriorityCalcPeriod=1" in conf
    assert f"AccountingStoragePass={lay.munge_socket}" in conf  # clients reach slurmdbd through it
    gres = sim_slurm.gres_conf(lay, 4, 8, "h100")
    assert "Name=gpu Type=h100 File=" in gres and "nvidia[0-7]" in gres  # a GPU without File= is dropped


def test_the_sims_switches_are_its_nodes_topology_labels_and_read_back_as_leaves() -> None:
    conf = sim_slurm.topology_conf(4)
    assert "SwitchName=leaf-1 Nodes=gpu-node-2,gpu-node-3" in conf and "SwitchName=spine-0 Switches=leaf-0,leaf-1" in conf
    assert leaf_switches(conf) == {"gpu-node-0": "leaf-0", "gpu-node-1": "leaf-0", "gpu-node-2": "leaf-1",
                                   "gpu-node-3": "leaf-1"}
    assert "SwitchName=core Switches=spine-0,spine-1,spine-2" in sim_slurm.topology_conf(9)  # one root over spines
    # a site's file: hostlists and comments as Slurm writes them
    assert leaf_switches("# racks\nSwitchName=s0 Nodes=n[01-02] LinkSpeed=100\nSwitchName=top Switches=s0\n") == \
        {"n01": "s0", "n02": "s0"}


def test_a_required_placement_asks_one_leaf_switchs_feature_and_a_node_selector_excludes_the_others() -> None:
    tenant = Tenant("team-a", "poc-team-a", "team-a-submitter", 1.0, 8, {"slurm": "team-a"})
    gang = GangJob("gang", tenant, pods=2, gpus_per_pod=8, placement=Placement("leaf", required=True))
    nodes, leaves = ["gpu-node-0", "gpu-node-1", "gpu-node-2"].copy, ["leaf-0", "leaf-1"].copy
    assert placed_as(gang, nodes, leaves) == {"constraints": "[leaf-0|leaf-1]"}  # matching OR: one of them for all
    assert placed_as(GangJob("soft", tenant, 2, 8, placement=Placement("leaf", required=False)), nodes, leaves) == {}
    assert placed_as(GangJob("filler", tenant, 1, 8, node_selector={HOSTNAME: "gpu-node-1"}), nodes, leaves) == \
        {"exclude_nodes": "gpu-node-0,gpu-node-2"}
    with pytest.raises(HarnessError, match="by node name only"):
        placed_as(GangJob("zoned", tenant, 1, 8, node_selector={"zone": "a"}), nodes, leaves)
    with pytest.raises(HarnessError, match="no topology.conf names a leaf"):
        placed_as(gang, nodes, list)


def test_the_reference_model_follows_the_profile() -> None:
    commands = sim_slurm.reference_model([{"account": "team-a", "user": "team-a-submitter", "weight": 3,
                                           "limit_gpus": 32}, {"account": "team-b", "user": "team-b-submitter",
                                                               "weight": 1, "limit_gpus": 16}], cluster_gpus=32)
    flat = [" ".join(c) for c in commands]
    assert "modify qos where name=high set priority=1000 preempt=low preemptmode=requeue" in flat
    assert any("fairshare=1" in c and "GrpTRES=gres/gpu=16" in c for c in flat)
    assert any("fairshare=3" in c and "GrpTRES=gres/gpu=-1" in c for c in flat)  # the whole cluster: no limit
    assert "add user team-a-submitter account=team-a qos=normal,low,high defaultqos=normal" in flat


def test_an_array_stands_for_one_member_per_task_each_started_on_its_own() -> None:
    base = {**PENDING_JOB, "array_job_id": 9, "node_count": 1}
    pending_rest = {**base, "job_id": 9, "array_task_string": "2-3", "array_task_id": None}
    started = {**RUNNING_JOB, "array_job_id": 9, "job_id": 10, "array_task_id": 0, "array_task_string": "",
               "nodes": "gpu-node-1", "node_count": 1}
    members = member_objects(pending_rest, "ns") + member_objects(started, "ns")
    assert {m["metadata"]["name"]: m["spec"].get("nodeName") for m in members} == {
        "gang-ab12c-2": None, "gang-ab12c-3": None, "gang-ab12c-0": "gpu-node-1"}  # a partial gang
    job = status_of(job_object(merged([pending_rest, started]), "ns"))
    assert job.state == RUNNING and job.admitted_at is not None


def test_a_job_cancelled_while_pending_never_started() -> None:
    """Slurm sets its start time to its end time; it ran on no node and must not count as admitted."""
    cancelled = {**PENDING_JOB, "job_state": "CANCELLED", "start_time": 1796154100, "end_time": 1796154100}
    status = status_of(job_object(cancelled, "ns"))
    assert status.state == FAILED and status.admitted_at is None


def test_a_failed_poll_is_skipped_within_the_outage_budget() -> None:
    answers: list[object] = [HarnessError("slurmrestd unreachable"), [job_object(RUNNING_JOB, "ns")]]

    def read() -> list[dict[str, object]]:
        answer = answers.pop(0) if answers else [job_object(RUNNING_JOB, "ns")]
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[return-value]

    source = PollSource(read)  # type: ignore[arg-type]
    source._seen = {}
    events = [kind for kind, _ in source.watch("0", 2)]
    assert events == ["ADDED"]  # the failed poll was skipped, the next one seen


def test_a_pending_job_slurm_could_not_place_has_members_marked_unschedulable() -> None:
    from harness.criteria.training.gang_admission import unschedulable
    assert all(unschedulable(m) for m in member_objects(PENDING_JOB, "ns"))  # reason Resources
    assert not any(unschedulable(m) for m in member_objects({**PENDING_JOB, "state_reason": "None"}, "ns"))
    assert not any(unschedulable(m) for m in member_objects(RUNNING_JOB, "ns"))


def test_a_requeued_job_gets_members_of_a_new_allocation() -> None:
    first = {m["metadata"]["uid"] for m in member_objects(RUNNING_JOB, "ns")}
    again = {m["metadata"]["uid"] for m in member_objects({**RUNNING_JOB, "restart_cnt": 1}, "ns")}
    assert first and again and not first & again


def test_refusals_are_told_from_other_errors_whichever_field_names_the_code() -> None:
    from harness.jobs.slurm.system import REFUSALS, _codes, _errors
    answer = '{"errors": [{"error_code": 2045, "error": "Invalid account or account/partition combination specified"}]}'
    assert _codes(answer) == {2045} and _codes(answer) & REFUSALS
    assert _errors(answer) == "Invalid account or account/partition combination specified (2045)"
    other = '{"errors": [{"error_number": 2042, "error": "Job is in held state", "description": "pending"}]}'
    assert _codes(other) == {2042} and not _codes(other) & REFUSALS
    assert _errors(other) == "Job is in held state (2042): pending"
    assert _codes("not json") == set()


def test_a_member_back_to_pending_stopped_holding_its_gpus() -> None:
    from harness.core.timeline import Timeline, Transition
    from harness.core.timeline import running_intervals
    timeline = Timeline()
    for state, at in (("pending", 1.0), ("running", 2.0), ("pending", 5.0), ("running", 16.0), ("succeeded", 20.0)):
        timeline.add(Transition("Pod", "job-0", state, at))
    assert running_intervals(timeline, 30.0) == [("job-0", 2.0, 5.0), ("job-0", 16.0, 20.0)]


def test_slurmdbd_records_give_the_submitter_and_the_gpu_seconds_of_every_run() -> None:
    from datetime import datetime, timezone
    from harness.criteria.governance.audit import Submitted
    from harness.jobs.slurm.system import AUDIT_GROUP, accounted_gpu_seconds, accounting_entry
    gpus = {"type": "gres", "name": "gpu", "count": 8}
    # as GET /slurmdb/v0.0.38/jobs answered for a job preempted after 1 s and run again for 15 s (fields trimmed)
    records = [{"job_id": 214, "user": "team-a-submitter", "time": {"submission": 1796154000, "elapsed": 1},
                "tres": {"allocated": [{"type": "cpu", "count": 1}, gpus, {**gpus, "name": "gpu:h100"}]}},
               {"job_id": 214, "user": "team-a-submitter", "time": {"submission": 1796154000, "elapsed": 15},
                "tres": {"allocated": [gpus]}},
               {"job_id": 214, "user": "team-a-submitter", "time": {"submission": 1796154000, "elapsed": 0},
                "tres": {"allocated": []}}]
    assert accounted_gpu_seconds(records) == 8 * 16
    submitted = Submitted("jobs", AUDIT_GROUP, "poc-team-a", "214",
                          datetime.fromtimestamp(1796154000.4, timezone.utc), "team-a-submitter")
    entry = accounting_entry(records, submitted)
    assert entry is not None and entry.user == "team-a-submitter" and entry.at.timestamp() == 1796154000
    assert accounting_entry([], submitted) is None


def test_accounting_is_settled_once_every_job_is_recorded_and_every_run_has_ended() -> None:
    from datetime import datetime, timezone
    from harness.criteria.governance.audit import Submitted
    from harness.jobs.slurm.system import AUDIT_GROUP, accounting_settled
    job = Submitted("jobs", AUDIT_GROUP, "poc-team-a", "44", datetime.fromtimestamp(1796177448.3, timezone.utc),
                    "team-a-submitter")
    # as slurmdbd answered 2 s after submission (not handed over yet), while it ran, and once it had ended
    ran = {"job_id": 44, "user": "team-a-submitter", "time": {"submission": 1796177448, "end": 0}}
    assert not accounting_settled({}, [job])
    assert not accounting_settled({"44": [ran]}, [job])
    assert accounting_settled({"44": [{**ran, "time": {"submission": 1796177448, "end": 1796177452}}]}, [job])


def test_a_requeued_member_is_seen_leaving_and_a_new_one_coming() -> None:
    """As a preempted pod is deleted and replaced: the old allocation DELETED, the new one ADDED, same name."""
    requeued = {**RUNNING_JOB, "job_state": "PENDING", "nodes": "", "restart_cnt": 1, "state_reason": "BeginTime"}
    polls = [member_objects(RUNNING_JOB, "ns"), member_objects(requeued, "ns")]
    source = PollSource(lambda: polls.pop(0) if polls else member_objects(requeued, "ns"))
    source.list()
    seen = [(kind, obj.metadata.uid) for kind, obj in source.watch("0", 1)]
    old, new = member_objects(RUNNING_JOB, "ns")[0], member_objects(requeued, "ns")[0]
    assert seen[:2] == [("DELETED", old["metadata"]["uid"]), ("ADDED", new["metadata"]["uid"])]

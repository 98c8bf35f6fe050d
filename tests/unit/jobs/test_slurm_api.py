"""slurmrestd's openapi versions (harness.jobs.slurm.api): which one is spoken, and the answers and request bodies of
v0.0.40 and later against v0.0.38's shape, on objects written as Slurm's source says each version writes them
(SchedMD/slurm, src/plugins/data_parser/v0.0.4N/parsers.c at each release's tag). Pure logic, no slurmrestd."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.core.errors import ConfigError
from harness.jobs.slurm.system import (REFUSALS, _codes, accounted_gpu_seconds, job_object, member_objects, merged,
                                       status_of)
from harness.jobs.slurm.api import LEGACY, SUPPORTED, chosen, job_description, job_submit_body, legacy_answer, offered
from tests.unit.jobs.test_slurm_adapter import PENDING_JOB, RUNNING_JOB

CURRENT = [v for v in SUPPORTED if v != LEGACY]


def number(n: int) -> dict[str, Any]:
    """UINT32_NO_VAL / UINT64_NO_VAL / TIMESTAMP_NO_VAL as dumped: the {set, infinite, number} struct."""
    return {"set": True, "infinite": False, "number": n}


UNSET = {"set": False, "infinite": False, "number": 0}
NO_EXIT_CODE = {"status": ["PENDING"], "return_code": UNSET, "signal": {"id": UNSET, "name": ""}}

# as GET /slurm/v0.0.4N/jobs answers RUNNING_JOB: JOB_INFO (v0.0.40: slurm-23-11-0-1 ... v0.0.45: slurm-26-05-3-1),
# job_state a JOB_STATE flag array, times TIMESTAMP_NO_VAL, counts UINT32_NO_VAL, exit_code PROCESS_EXIT_CODE
RUNNING_4X = {"job_id": 7, "name": "gang-ab12c", "account": "team-a", "user_name": "team-a-submitter",
              "job_state": ["RUNNING"], "state_reason": "None", "nodes": "gpu-node-[0-1]", "node_count": number(2),
              "submit_time": number(1796154000), "start_time": number(1796154001), "end_time": number(1796157601),
              "restart_cnt": 0, "array_job_id": number(0), "array_task_id": UNSET, "array_task_string": "",
              "exit_code": NO_EXIT_CODE}
PENDING_4X = {**RUNNING_4X, "job_state": ["PENDING"], "state_reason": "Resources", "nodes": "",
              "start_time": number(0)}

# served /openapi/v3 documents, paths only. 22.05: each plugin's openapi.json paths under its servers url, merged
# by src/common/openapi.c (slurm-22-05-8-1); later: as testsuite/python/data/openapi_specs/openapi_spec_v4N.json
PATHS = ("jobs/", "job/{job_id}", "job/submit", "nodes/", "ping/")


def served(*versions: str) -> dict[str, Any]:
    paths: dict[str, Any] = {f"/{side}/{v}/{p}": {} for v in versions for side in ("slurm", "slurmdb") for p in PATHS}
    return {"openapi": "3.0.2", "paths": {**paths, "/openapi/v3": {}, "/openapi.json": {}}}


SLURM_22_05 = served("v0.0.36", "v0.0.37", "v0.0.38")
SLURM_23_11 = served("v0.0.38", "v0.0.39", "v0.0.40")
SLURM_24_11 = served("v0.0.40", "v0.0.41", "v0.0.42")
SLURM_26_05 = {"paths": {**served("v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45")["paths"],
                         "/util/v0.0.45/hostnames": {}}}


def test_the_newest_version_both_speak_is_chosen() -> None:
    assert offered(SLURM_22_05) == ["v0.0.36", "v0.0.37", "v0.0.38"]
    assert chosen(SLURM_22_05) == "v0.0.38"  # the sim's Slurm
    assert chosen(SLURM_23_11) == "v0.0.40"
    assert chosen(SLURM_24_11) == "v0.0.42"
    assert chosen(SLURM_26_05) == "v0.0.45"
    assert chosen(served("v0.0.37", "v0.0.38", "v0.0.39")) == "v0.0.38"  # 23.02


def test_the_override_is_honoured_when_both_speak_it() -> None:
    assert chosen(SLURM_24_11, "v0.0.41") == "v0.0.41"
    assert chosen(SLURM_23_11, "v0.0.38") == "v0.0.38"
    with pytest.raises(ConfigError, match=r"GPUPOC_SLURM_API=v0.0.39: slurmrestd serves openapi v0.0.38, v0.0.39, "
                                          r"v0.0.40; gpupoc speaks v0.0.38, v0.0.40"):
        chosen(SLURM_23_11, "v0.0.39")
    with pytest.raises(ConfigError, match="GPUPOC_SLURM_API=v0.0.43"):
        chosen(SLURM_24_11, "v0.0.43")  # the harness speaks it, this server does not


def test_a_server_speaking_none_of_the_harness_versions_is_refused_with_both_lists() -> None:
    with pytest.raises(ConfigError) as refused:
        chosen(served("v0.0.46"))
    assert "slurmrestd serves openapi v0.0.46; gpupoc speaks v0.0.38, v0.0.40," in str(refused.value)
    with pytest.raises(ConfigError, match="serves openapi no version"):
        chosen({"paths": {"/openapi/v3": {}}})


@pytest.mark.parametrize("version", CURRENT)
def test_current_jobs_read_as_the_v0_0_38_ones(version: str) -> None:
    jobs = legacy_answer({"jobs": [RUNNING_4X, PENDING_4X]}, version, db=False)["jobs"]
    for legacy, job in zip((RUNNING_JOB, PENDING_JOB), jobs):
        assert job_object(job, "ns") == job_object(legacy, "ns")
        assert member_objects(job, "ns") == member_objects(legacy, "ns")
        assert status_of(job_object(job, "ns")) == status_of(job_object(legacy, "ns"))


@pytest.mark.parametrize("version", CURRENT)
def test_job_state_flags_read_as_v0_0_38_named_them(version: str) -> None:
    def state(flags: list[str]) -> str:
        return str(legacy_answer({"jobs": [{**PENDING_4X, "job_state": flags}]}, version, db=False)
                   ["jobs"][0]["job_state"])
    assert state(["PENDING", "REQUEUED"]) == "REQUEUED"  # a preempted job waiting again
    assert state(["RUNNING", "COMPLETING"]) == "COMPLETING"
    assert state(["CANCELLED"]) == "CANCELLED"
    assert state(["NODE_FAIL", "UPDATE_DB"]) == "NODE_FAIL"  # a flag v0.0.38 never named


@pytest.mark.parametrize("version", CURRENT)
def test_arrays_and_exit_codes_read_as_in_v0_0_38(version: str) -> None:
    pending_rest = {**PENDING_4X, "job_id": 9, "array_job_id": number(9), "array_task_string": "2-3",
                    "node_count": number(1)}
    started = {**RUNNING_4X, "job_id": 10, "array_job_id": number(9), "array_task_id": number(0),
               "nodes": "gpu-node-1", "node_count": number(1)}
    legacy_rest = {**PENDING_JOB, "job_id": 9, "array_job_id": 9, "array_task_string": "2-3", "node_count": 1,
                   "array_task_id": None}
    legacy_started = {**RUNNING_JOB, "job_id": 10, "array_job_id": 9, "array_task_id": 0, "array_task_string": "",
                      "nodes": "gpu-node-1", "node_count": 1}
    jobs = legacy_answer({"jobs": [pending_rest, started]}, version, db=False)["jobs"]
    assert [m for j in jobs for m in member_objects(j, "ns")] == \
        [m for j in (legacy_rest, legacy_started) for m in member_objects(j, "ns")]
    assert job_object(merged(jobs), "ns") == job_object(merged([legacy_rest, legacy_started]), "ns")
    failed = {**RUNNING_4X, "job_state": ["FAILED"],
              "exit_code": {"status": ["ERROR"], "return_code": number(42), "signal": {"id": UNSET, "name": ""}}}
    assert legacy_answer({"jobs": [failed]}, version, db=False)["jobs"][0]["exit_code"] == 42 << 8


@pytest.mark.parametrize("version", CURRENT)
def test_slurmdbd_records_and_errors_keep_their_shape(version: str) -> None:
    gpus = {"type": "gres", "name": "gpu", "id": 1001, "count": 8}
    # as GET /slurmdb/v0.0.4N/jobs answers: JOB (times TIMESTAMP and UINT32: plain numbers; tres TRES_STR: TRES)
    record = {"job_id": 214, "user": "team-a-submitter", "state": {"current": ["PREEMPTED"], "reason": "None"},
              "time": {"submission": 1796154000, "start": 1796154001, "end": 1796154002, "elapsed": 1,
                       "limit": number(3)}, "tres": {"allocated": [{"type": "cpu", "id": 1, "count": 1}, gpus]}}
    answer = legacy_answer({"jobs": [record], "errors": [], "warnings": []}, version, db=True)
    assert answer["jobs"] == [record] and accounted_gpu_seconds(answer["jobs"]) == 8
    # OPENAPI_ERROR: error_number, as v0.0.38 named it for most calls
    refused = {"errors": [{"description": "", "error_number": 2017, "error": "Invalid job id specified",
                           "source": "_handle_job_get"}], "warnings": []}
    assert _codes(json.dumps(legacy_answer(refused, version, db=False))) == {2017} <= REFUSALS


@pytest.mark.parametrize("version", CURRENT)
def test_what_the_record_describes_reads_as_in_v0_0_38(version: str) -> None:
    ping = {"meta": {"slurm": {"release": "24.11.0", "cluster": "site"}}, "pings": []}  # OPENAPI_META
    assert legacy_answer(ping, version, db=False)["meta"]["Slurm"]["release"] == "24.11.0"
    partitions = {"partitions": [{"name": "gpu", "nodes": {"allowed_allocation": "", "configured": "gpu-node-[0-3]",
                                                          "total": 4}, "partition": {"state": ["UP"]}}]}
    assert {k: legacy_answer(partitions, version, db=False)["partitions"][0][k] for k in ("name", "nodes", "state")} \
        == {"name": "gpu", "nodes": "gpu-node-[0-3]", "state": "UP"}
    nodes = {"nodes": [{"name": "gpu-node-0", "gres": "gpu:h100:8(S:0)", "partitions": ["gpu"],
                        "state": ["IDLE", "DRAIN"]}]}
    assert legacy_answer(nodes, version, db=False)["nodes"][0] == {**nodes["nodes"][0], "state": "IDLE,DRAIN"}
    qos = {"qos": [{"name": "high", "priority": number(1000), "preempt": {"list": ["low"], "mode": ["REQUEUE"]}}]}
    assert legacy_answer(qos, version, db=True)["QOS"][0]["priority"] == 1000


# as SlurmJobs.submit writes it in v0.0.38's shape (a 2-node gang of 8 GPUs each, requeued on failure)
SUBMIT_38 = {"script": "#!/bin/bash\nsleep 60 &\nwait\n", "job": {
    "name": "gang-ab12c", "account": "team-a", "partition": "gpu", "nodes": 2, "tasks": 2, "tasks_per_node": 1,
    "gres": "gpu:h100:8", "time_limit": 3, "requeue": True, "environment": {"PATH": "/usr/bin:/bin"},
    "current_working_directory": "/tmp", "standard_output": "/dev/null", "standard_error": "/dev/null",
    "qos": "high"}}


def test_v0_0_38_bodies_are_sent_as_they_are() -> None:
    assert json.dumps(job_submit_body(SUBMIT_38, LEGACY)) == json.dumps(SUBMIT_38)
    for update in ({"hold": True}, {"time_limit": 1}, {"account": "team-b"}, {"comment": "gpupoc"}):
        assert json.dumps(job_description(update, LEGACY)) == json.dumps(update)


@pytest.mark.parametrize("version", CURRENT)
def test_bodies_are_written_as_the_current_versions_read_them(version: str) -> None:
    # JOB_SUBMIT_REQ (script beside job: read by every version, as Slurm's testsuite/python/tests/test_112_4N.py
    # sends it) holding a JOB_DESC_MSG: tres_per_node, environment a STRING_ARRAY, nodes JOB_DESC_MSG_NODES (a
    # string), time_limit and priority UINT32_NO_VAL
    assert job_submit_body(SUBMIT_38, version) == {"script": SUBMIT_38["script"], "job": {
        "name": "gang-ab12c", "account": "team-a", "partition": "gpu", "nodes": "2", "tasks": 2, "tasks_per_node": 1,
        "tres_per_node": "gres/gpu:h100:8", "time_limit": number(3), "requeue": True,
        "environment": ["PATH=/usr/bin:/bin"], "current_working_directory": "/tmp",
        "standard_output": "/dev/null", "standard_error": "/dev/null", "qos": "high"}}
    assert job_description({"hold": True}, version) == {"priority": number(0)}  # v0.0.40 has no hold
    assert job_description({"time_limit": 1}, version) == {"time_limit": number(1)}
    assert job_description({"account": "team-b"}, version) == {"account": "team-b"}
    assert job_description({"comment": "gpupoc"}, version) == {"comment": "gpupoc"}


def test_the_chosen_version_names_the_tracked_objects() -> None:
    assert job_object(RUNNING_JOB, "ns")["apiVersion"] == "slurm/v0.0.38"
    assert job_object(RUNNING_JOB, "ns", "v0.0.42")["apiVersion"] == "slurm/v0.0.42"

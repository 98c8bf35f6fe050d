"""The record ready for review, on recorded records (tests/fixtures/records: trimmed record.json of sim runs):
the verdict first, the operations table, task samples, and old records still rendering."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from harness.core.errors import ConfigError
from harness.record import operations
from harness.record.model import Result, load_record
from harness.core.redact import REDACTED
from harness.record.render import sections
from harness.core.samples import Samples, shape
from harness.record.verdict import environment_line, title, verdicts

RECORDS = Path(__file__).parents[2] / "fixtures" / "records"
OLD, NEW = RECORDS / "gang-3a15079.json", RECORDS / "gang-schema3.json"


def batch_job(name: str, namespace: str, queue: str, parallelism: int) -> dict[str, Any]:
    template = {"metadata": {"labels": {"gpupoc.io/job": name}}, "spec": {"containers": [
        {"name": "work", "image": "busybox", "env": [{"name": "HF_TOKEN", "value": "hf_abcdefgh12345"}],
         "resources": {"limits": {"nvidia.com/gpu": 8}}}]}}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": queue}},
            "spec": {"parallelism": parallelism, "completions": parallelism, "template": template}}


def test_jobs_differing_only_in_name_tenant_and_queue_are_one_sample() -> None:
    samples = Samples()
    for i in range(12):
        samples.add(batch_job(f"fair-{i}-1a2b3", "poc-team-a" if i % 2 else "poc-team-b", f"team-{i % 2}", 1))
    samples.add(batch_job("gang-1a2b3", "poc-team-a", "team-a", 4))
    found = samples.as_list()
    assert [(s["kind"], s["count"]) for s in found] == [("Job", 12), ("Job", 1)]
    assert found[0]["manifest"]["metadata"]["name"] == "fair-0-1a2b3"  # the first, as it was submitted
    assert found[1]["manifest"]["spec"]["parallelism"] == 4


def test_samples_hold_no_secret() -> None:
    samples = Samples()
    samples.add({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf"}, "data": {"token": "c2VjcmV0"},
                 "stringData": {"password": "hunter2hunter2"}})
    samples.add(batch_job("j", "ns", "q", 1))
    secret, job = (s["manifest"] for s in samples.as_list())
    assert secret["data"] == {"token": REDACTED} and secret["stringData"] == {"password": REDACTED}
    assert job["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] == REDACTED


def test_a_slurm_body_shape_ignores_its_name_in_the_script() -> None:
    def body(name: str) -> dict[str, Any]:
        return {"script": f"#!/bin/bash\n# gpupoc job {name}: 4 node(s)\nsleep 30\n",
                "job": {"name": name, "account": "team-a", "nodes": 4}}
    via = "slurmrestd POST job/submit as team-a-submitter"
    assert shape(body("gang-1a2b3"), via) == shape(body("gang-9f8e7"), via)
    assert shape(body("gang-1a2b3"), via) != shape({**body("gang-1a2b3"), "job": {"nodes": 2}}, via)


def test_verdict_counts_per_backend_and_names_failures_with_measured_vs_wanted() -> None:
    record = load_record(NEW)
    by_backend = {v.backend: v for v in verdicts(record)}
    assert by_backend["default"].counts["FAIL"] == 1 and by_backend["kueue"].counts["PASS"] == 1
    failed = by_backend["default"].failed[0]
    assert failed.criterion == "training.gang_admission" and "max_partial_pods: 3 pods (wanted <= 0 pods)" in failed.why
    assert by_backend["slurm"].failed == [] and by_backend["slurm"].counts["PASS"] == 1


def test_environment_in_one_line_and_title_name_run_and_target() -> None:
    record = load_record(NEW)
    line = environment_line(record)
    assert line.startswith("sim (context gpupoc-sim") and "Kubernetes v1.36.3" in line
    assert "16 × NVIDIA-H100-80GB-HBM3 (2 nodes, simulated), driver 550.90.07, CUDA 12.4" in line
    assert title(record) == "gpupoc run h2-look2 on sim gpupoc-sim"


def test_page_opens_with_the_verdict_then_operations_beside_the_matrix_and_samples_in_evidence() -> None:
    html = sections(load_record(NEW))
    assert html.index('id="gpupoc-fit"') < html.index('id="gpupoc-verdict"')
    assert html.index('id="gpupoc-verdict"') < html.index('id="gpupoc-environment"') < html.index(
        'id="gpupoc-matrix"') < html.index('id="gpupoc-operations"') < html.index('id="gpupoc-evidence"')
    assert "kueue-validating-webhook-configuration" in html and "kueue.x-k8s.io" in html
    assert "Task samples: what this case submitted (2 shapes, 2 objects)" in html
    assert "kind: Job" in html and "slurmrestd POST job/submit as" in html
    assert "not measured" in html  # slurmctld has no scrape job on the sim: never shown as 0


def test_an_old_record_still_loads_and_renders_without_the_new_parts() -> None:
    record = load_record(OLD)
    assert record.schema_version == 2 and record.operations == {}
    html = sections(record)
    assert "predates the operations table" in html and 'id="gpupoc-verdict"' in html


def test_a_record_of_an_unknown_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    path.write_text(NEW.read_text().replace('"schema_version": 3', '"schema_version": 1'))
    with pytest.raises(ConfigError, match="schema 2/3"):
        load_record(path)


SIM_WEBHOOKS = [  # as the sim's API server answers (Kueue's webhooks call its process by URL)
    {"kind": "ValidatingWebhookConfiguration", "name": "kueue-validating-webhook-configuration",
     "hooks": [{"name": "vjob.kb.io", "calls": "https://127.0.0.1:29600/validate-batch-v1-job"},
               {"name": "vworkload.kb.io", "calls": "https://127.0.0.1:29600/validate-kueue-x-k8s-io-v1beta2-workload"}]},
    {"kind": "MutatingWebhookConfiguration", "name": "admission",
     "hooks": [{"name": "mutatejob.volcano.sh", "calls": "service volcano-system/volcano-admission-service"}]},
]


def test_crds_and_webhooks_are_attributed_by_group_and_by_name_or_service() -> None:
    crds = [("kueue.x-k8s.io", "Workload"), ("kueue.x-k8s.io", "ClusterQueue"), ("batch.volcano.sh", "Job"),
            ("scheduling.volcano.sh", "Queue"), ("ray.io", "RayJob"), ("scheduling.run.ai", "Queue")]
    assert operations.crds_by_group(crds, "volcano") == {"batch.volcano.sh": ["Job"], "scheduling.volcano.sh": ["Queue"]}
    assert operations.crds_by_group(crds, "kueue") == {"kueue.x-k8s.io": ["ClusterQueue", "Workload"]}
    assert operations.crds_by_group(crds, "default") == {}
    kueue = operations.webhooks_of(SIM_WEBHOOKS, "kueue")
    assert [(w["name"], w["hooks"], w["calls"]) for w in kueue] == [
        ("kueue-validating-webhook-configuration", ["vjob.kb.io", "vworkload.kb.io"], "https://127.0.0.1:29600")]
    assert [w["name"] for w in operations.webhooks_of(SIM_WEBHOOKS, "volcano")] == ["admission"]


def test_usage_not_read_is_not_measured_never_zero() -> None:
    usage = operations.usage_by_job([({"job": "kueue"}, 1.5)], [({"job": "kueue"}, 100 * operations.MIB),
                                                                 ({"job": "kube-scheduler"}, 50 * operations.MIB)])
    rows = {r["component"]: r for r in operations.usage_rows(["kueue", "kube-scheduler", "slurmctld"], usage, 30.0)}
    assert rows["kueue"]["CPU (s)"] == 1.5 and rows["kueue"]["CPU (cores, mean)"] == 0.05
    assert rows["kueue"]["memory peak (MiB)"] == 100.0
    assert rows["kube-scheduler"]["CPU (s)"] == operations.NOT_MEASURED
    assert set(rows["slurmctld"].values()) == {"slurmctld", operations.NOT_MEASURED}


def test_a_real_clusters_component_finds_the_scrape_job_named_after_it() -> None:
    jobs = {"kueue-controller-manager-metrics-service", "kube-state-metrics"}
    assert operations.scrape_job("kueue-system/kueue-controller-manager", jobs) == \
        "kueue-controller-manager-metrics-service"
    assert operations.scrape_job("volcano-system/volcano-scheduler", jobs) is None


def test_failures_show_up_as_their_events_warnings_first() -> None:
    record = load_record(NEW)
    signs = operations.failure_signs([r for r in record.results if r.backend == "default"])
    assert signs["cases"] == ["FAIL training.gang_admission"]
    assert signs["events"] and signs["events"][0].startswith("Warning ")
    clean = operations.failure_signs([r for r in record.results if r.backend == "kueue"])
    assert clean["cases"] == [] and clean["events"] == []


def test_amended_samples_survive_a_round_trip(tmp_path: Path) -> None:
    record = load_record(NEW)
    result: Result = copy.deepcopy(record.results[0])
    assert result.samples and all("manifest" in s and s["count"] >= 1 for s in result.samples)
    record.write(tmp_path / "record.json")
    assert load_record(tmp_path / "record.json").results[0].samples == result.samples


def test_a_list_the_runner_may_not_make_is_said_not_fatal() -> None:
    from kubernetes import client

    from harness.run.collect import readable

    def refused() -> list[str]:
        raise client.ApiException(status=403, reason="Forbidden")
    assert readable(refused) == ([], "not readable by the runner: 403 Forbidden")
    assert readable(lambda: ["x"]) == (["x"], "")


def test_operations_answers_come_from_what_the_run_measured() -> None:
    """When restarted: the recovery case's values; failures located by their captured events; who shared the
    cluster: the backend's part, side by side, else the whole run."""
    check = {"name": "first_admission_after_restart_s", "measured": 3.2, "threshold": 30, "comparison": "<=",
             "unit": " s", "not_checked": "", "passed": True}
    record = copy.deepcopy(load_record(NEW))
    record.results += [
        Result("r[kueue]", "training.control_plane_recovery", "kueue", "PASS", evidence=[{"checks": [check]}]),
        Result("f[kueue]", "training.queue_fairness", "kueue", "FAIL", "late tenant waited",
               evidence=[{"diagnostics": ["12:00:01 Warning FailedScheduling pod/x: 0/4 nodes"]}]),
        Result("g[kueue]", "training.queue_wait", "kueue", "FAIL", "no detail")]
    got = operations.answers(record, "kueue")
    assert got["when restarted"] == "PASS: first_admission_after_restart_s 3.2 s (wanted <= 30)"
    assert got["failures located"] == ("1 of 2 located by events, logs or a reason string; not located: "
                                       "training.queue_wait")
    assert set(got["shared its cluster with"].split(", ")) == {b for b in {r.backend for r in record.results}
                                                              if b not in ("kueue", "-")}
    record.target["parts"] = [{"name": n, "run_id": n, "target": {}, "backends": b}
                              for n, b in (("kueue", ["kueue"]), ("x", ["volcano", "kai"]))]
    assert operations.answers(record, "kai")["shared its cluster with"] == "volcano"
    assert operations.answers(record, "kueue")["shared its cluster with"] == "no other backend"
    assert "not measured: the control-plane recovery case did not run" in operations.answers(record, "kai")[
        "when restarted"]
    assert "when restarted" in sections(load_record(NEW)) and "shared its cluster with" in sections(load_record(NEW))


def test_the_inventory_is_summed_by_gpu_model_most_gpus_first() -> None:
    record = load_record(NEW)
    [shown] = record.nodes[:1] or [{}]
    record.nodes = [{**shown, "node": name, "model": model, "resource": "nvidia.com/gpu", "count": count,
                     "simulated": True}
                    for name, model, count in (("h0", "NVIDIA-H100-80GB-HBM3", 8), ("l0", "NVIDIA-L40S", 4),
                                               ("h1", "NVIDIA-H100-80GB-HBM3", 8))]
    assert [(m["model"], m["nodes"], m["gpus"]) for m in record.models()] == [("NVIDIA-H100-80GB-HBM3", 2, 16),
                                                                              ("NVIDIA-L40S", 1, 4)]
    html = sections(record)
    assert "By model: <b>NVIDIA-H100-80GB-HBM3</b> 16 GPUs on 2 nodes (nvidia.com/gpu, simulated); " \
           "<b>NVIDIA-L40S</b> 4 GPUs on 1 node (nvidia.com/gpu, simulated)." in html
    record.nodes = [{**shown, "node": f"{part}: gpu-node-{i}", "part": part, "model": "NVIDIA-H100-80GB-HBM3",
                     "count": 8} for part in ("kueue-kube-gang", "slurm-default") for i in range(4)]  # side by side
    assert "By model: <b>NVIDIA-H100-80GB-HBM3</b> 32 GPUs on 4 nodes in each of 2 clusters" in sections(record)


"""The workload sample in this process (NumPy, a few steps): its summary, its metrics, a kill honoured once and the
resumption from its last checkpoint; and how a pod runs it (Guaranteed, restarted in place, its volume)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from harness.cluster.manifests import dressed
from harness.config.profile import load_profile, parse_profile
from harness.config.workloads import SAMPLE_CONTAINER, SAMPLE_DATA_DIR, EXIT_REQUEST_ANNOTATION
from harness.core.errors import ConfigError
from harness.core.paths import REPO_ROOT
from harness.jobs.model import GangJob
from harness.sample import train

pytest.importorskip("numpy")
REAL_NODES = load_profile(REPO_ROOT / "profiles" / "sim-real-nodes.yaml")


def args(tmp_path: Path, *extra: str) -> argparse.Namespace:
    parsed = train.arguments(argparse.ArgumentParser()).parse_args([
        "--steps", "30", "--warmup", "5", "--checkpoint-every", "10", "--batch", "16", "--features", "32",
        "--width", "64", "--dataset-mb", "0.1", "--port", "0", "--framework", "numpy", "--data-dir",
        str(tmp_path / "data"), "--podinfo", str(tmp_path / "podinfo"), "--log-every", "5", *extra])
    train.check(parsed)
    return parsed


def test_summarize_gives_nearest_rank_percentiles_and_the_coefficient_of_variation() -> None:
    stats = train.summarize([0.01] * 18 + [0.02, 0.04])
    assert stats["p50_s"] == 0.01 and stats["p95_s"] == 0.02
    assert stats["cov"] == pytest.approx(0.5652, abs=1e-3)
    assert train.summarize([]) == {}


def test_a_run_logs_its_summary_and_the_loss_falls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = train.train(args(tmp_path, "--steps", "60"))
    logged = train.parse_summary(capsys.readouterr().out)
    assert logged == json.loads(json.dumps(summary))
    assert summary["measured_steps"] == 55 and len(summary["step_s"]) == 55
    assert summary["resumed_from_step"] == 0 and summary["checkpoints"] == 6
    assert summary["data_read_mb_s"] > 0 and summary["cpu_threads"] >= 1
    assert summary["loss"] < 2.77  # below ln(16): it learns


def test_an_exit_request_is_honoured_once_and_the_restart_resumes_from_the_last_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "podinfo").mkdir()
    (tmp_path / "podinfo" / "annotations").write_text(f'{EXIT_REQUEST_ANNOTATION}="137"\nother="x"\n')
    with pytest.raises(SystemExit) as killed:
        train.train(args(tmp_path))
    assert killed.value.code == 137
    assert not (tmp_path / "data" / train.PROGRESS).exists()  # asked before its first step
    (tmp_path / "podinfo" / "annotations").write_text("")
    first = train.train(args(tmp_path, "--steps", "25"))
    (tmp_path / "data" / train.PROGRESS).write_text(json.dumps({"step": 27}))  # it got to 27, checkpointed at 20
    (tmp_path / "podinfo" / "annotations").write_text(f'{EXIT_REQUEST_ANNOTATION}="137"\n')  # honoured already
    resumed = train.train(args(tmp_path, "--steps", "40"))
    assert first["resumed_from_step"] == 0
    assert (resumed["resumed_from_step"], resumed["steps_before_restart"], resumed["steps_redone"]) == (25, 27, 2)
    assert resumed["measured_steps"] == 40 - 25 - 5


def test_the_metrics_use_the_same_names_everywhere() -> None:
    metrics = train.Metrics({"framework": "numpy", "device": "cpu"})
    metrics.observe_step(0.02)
    metrics.set(data_read_bytes_total=1e6, samples_per_second=800.0)
    text = metrics.text()
    assert 'gpupoc_sample_step_seconds_bucket{device="cpu",framework="numpy",le="0.025"} 1' in text
    assert "gpupoc_sample_steps_total" in text and "# TYPE gpupoc_sample_data_read_bytes_total counter" in text
    assert "# TYPE gpupoc_sample_samples_per_second gauge" in text


def test_the_sample_pod_is_guaranteed_restarted_in_place_and_keeps_its_checkpoints() -> None:
    job = GangJob("s", REAL_NODES.tenants[0], 1, 1, container=SAMPLE_CONTAINER, node_selector={"k": "v"})
    [obj] = dressed(job_manifest(job), REAL_NODES.workloads)
    pod = obj["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["image"] == "gpupoc.local/sample:1"
    assert container["resources"]["requests"]["cpu"] == container["resources"]["limits"]["cpu"] == "1"
    assert container["args"][:2] == ["--steps", "240"] and SAMPLE_DATA_DIR in container["args"]
    assert container["args"][container["args"].index("--batch") + 1] == "1024"
    assert pod["restartPolicy"] == "OnFailure" and pod["nodeSelector"]["k"] == "v"
    assert {"name": "gpupoc-sample-data", "emptyDir": {}} in pod["volumes"]


def job_manifest(job: GangJob) -> list[dict[str, object]]:
    return [{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": job.name},
             "spec": {"template": job.pod_template()}}]


def test_a_profile_without_a_sample_image_runs_no_sample_and_errors_name_their_field() -> None:
    data = json.loads(json.dumps(REAL_NODES_DATA))
    assert load_profile(REPO_ROOT / "profiles" / "sim.yaml").workloads.sample.image is None
    data["workloads"]["sample"]["warmup"] = 600
    with pytest.raises(ConfigError, match=r"workloads\.sample\.warmup: must be fewer than steps \(240\)"):
        parse_profile(data, "p.yaml")
    data["workloads"]["sample"].update(warmup=1, antagonist={"cpu": "lots"})
    with pytest.raises(ConfigError, match=r"workloads\.sample\.antagonist\.cpu: must be a Kubernetes quantity"):
        parse_profile(data, "p.yaml")


REAL_NODES_DATA = __import__("yaml").safe_load((REPO_ROOT / "profiles" / "sim-real-nodes.yaml").read_text())

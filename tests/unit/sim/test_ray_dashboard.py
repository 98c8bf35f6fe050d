"""The sim's Ray dashboard stand-in: the job API as KubeRay's operator uses it (HTTPMode: 404, submit, poll, stop,
delete), a Ray cluster's failed pod failing its running job, and the data plane's proxy reading Service URLs."""

from __future__ import annotations

import json

import pytest

from harness.sim import dataplane
from harness.sim.ray_dashboard import RayDashboard, failure


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def submit(dashboard: RayDashboard, submission_id: str) -> tuple[int, object]:
    body = json.dumps({"entrypoint": "python train.py", "submission_id": submission_id, "metadata": {"a": "b"}})
    return dashboard.answer("POST", "/api/jobs/", body.encode())


def test_a_job_kuberay_submits_runs_its_time_then_succeeds() -> None:
    clock = Clock()
    dashboard = RayDashboard("poc-team-a/job-raycluster", 30.0, clock)
    assert dashboard.answer("GET", "/api/jobs/job-x", b"")[0] == 404  # KubeRay submits on a 404 (HTTPMode)
    status, body = submit(dashboard, "job-x")
    assert status == 200 and isinstance(body, dict) and body["submission_id"] == "job-x" and body["job_id"]
    assert submit(dashboard, "job-x")[0] == 500  # the text KubeRay looks for: "Please use a different submission_id"
    status, job = dashboard.answer("GET", "/api/jobs/job-x", b"")
    assert status == 200 and isinstance(job, dict) and job["status"] == "RUNNING" and job["metadata"] == {"a": "b"}
    assert dashboard.answer("DELETE", "/api/jobs/job-x", b"")[0] == 500  # not terminal yet (Ray's 500)
    clock.now += 30
    _, job = dashboard.answer("GET", "/api/jobs/job-x", b"")
    assert isinstance(job, dict) and job["status"] == "SUCCEEDED" and job["end_time"] - job["start_time"] == 30_000
    assert dashboard.answer("POST", "/api/jobs/job-x/stop", b"") == (200, {"stopped": False})
    assert dashboard.answer("DELETE", "/api/jobs/job-x", b"") == (200, {"deleted": True})
    assert dashboard.answer("GET", "/api/jobs/", b"") == (200, [])
    assert dashboard.answer("POST", "/api/jobs/", b"not json")[0] == 400


def test_a_job_without_a_duration_runs_until_stopped_or_a_node_fails() -> None:
    dashboard = RayDashboard("ns/c", None, Clock())
    submit(dashboard, "a")
    assert dashboard.answer("POST", "/api/jobs/a/stop", b"") == (200, {"stopped": True})
    submit(dashboard, "b")
    dashboard.fail("pod c-workers-worker-x: container worker exited 137 (Error)")
    _, job = dashboard.answer("GET", "/api/jobs/b", b"")
    assert isinstance(job, dict) and job["status"] == "FAILED" and "exited 137" in job["message"]
    _, stopped = dashboard.answer("GET", "/api/jobs/a", b"")
    assert isinstance(stopped, dict) and stopped["status"] == "STOPPED"  # a terminal job stays as it ended


def test_a_failed_container_of_a_ray_pod_is_a_failure_and_a_running_one_is_not() -> None:
    def pod(state: dict[str, object], phase: str = "Running", last: dict[str, object] | None = None) -> dict:
        return {"metadata": {"name": "c-head-x"}, "status": {"phase": phase, "containerStatuses": [
            {"name": "ray-head", "state": state, "lastState": last or {}}]}}
    assert failure(pod({"running": {}})) is None
    assert failure(pod({"terminated": {"exitCode": 137, "reason": "Error"}}, "Failed")) == \
        "pod c-head-x: container ray-head exited 137 (Error)"
    assert "exited 1 " in (failure(pod({"running": {}}, last={"terminated": {"exitCode": 1}})) or "")
    assert failure(pod({"terminated": {"exitCode": 0}}, "Succeeded")) is None


def test_the_proxy_takes_service_names_over_plain_http_only() -> None:
    assert dataplane.service_address("http://job-head-svc.poc-team-a.svc.cluster.local:8265/api/jobs/x") == \
        ("job-head-svc", "poc-team-a", 8265, "/api/jobs/x")
    for url in ("https://job-head-svc.poc-team-a.svc.cluster.local:8265/", "http://10.244.0.3:8265/api/jobs/",
                "http://job-head-svc.poc-team-a.svc.cluster.local/api/jobs/"):
        with pytest.raises(ValueError):
            dataplane.service_address(url)


def test_serve_applications_deploy_and_run_once_the_clusters_servers_answer() -> None:
    """KubeRay's RayService: GET before a deploy (no application), PUT the serveConfigV2, then DEPLOYING until the
    cluster's model servers answer /health, RUNNING after (the only status the operator takes as ready)."""
    ready = [False]
    dashboard = RayDashboard("poc-team-a/llm-raycluster", None, Clock(), serving_ready=lambda: ready[0])
    path = "/api/serve/applications/"
    status, details = dashboard.answer("GET", path, b"")
    assert status == 200 and isinstance(details, dict) and details["applications"] == {}
    config = {"applications": [{"name": "llm", "route_prefix": "/", "import_path": "ray.serve.llm:build_openai_app"}]}
    assert dashboard.answer("PUT", path, json.dumps(config).encode())[0] == 200
    _, details = dashboard.answer("GET", path, b"")
    assert isinstance(details, dict) and details["applications"]["llm"]["status"] == "DEPLOYING"
    ready[0] = True
    _, details = dashboard.answer("GET", path.rstrip("/"), b"")
    assert isinstance(details, dict)
    app = details["applications"]["llm"]
    assert app["status"] == "RUNNING" and app["deployments"]["llm"]["status"] == "HEALTHY"
    assert dashboard.answer("PUT", path, b"{}")[0] == 400  # no applications: not a Serve config

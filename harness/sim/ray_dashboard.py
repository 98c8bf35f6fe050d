"""A Ray dashboard stand-in for the sim's Ray head pods (simulated): the job and Serve APIs KubeRay's operator calls.

KubeRay submits a RayJob's entrypoint to the head's dashboard (`POST /api/jobs/`, HTTPMode) and polls
`GET /api/jobs/<submission_id>` until the job is terminal; it stops (`POST .../stop`) and deletes jobs too. No Ray
runs on a kwok pod, so the sim's data plane answers on the head pod's IP, port 8265, with Ray's JSON shapes
(checked against a real Ray head by tests/contract/test_ray_dashboard.py's recorded answers). A job runs for the
head pod's `sim.gpupoc.io/run-for` (the sim's trainer duration) from its submission, then SUCCEEDED; without it,
until stopped. For a RayService the operator deploys its `serveConfigV2` (`PUT /api/serve/applications/`) and
reads each application's status (`GET`, Ray's ServeInstanceDetails): an application is RUNNING once every serving
pod of the cluster answers /health (the model-server stand-ins on its workers), DEPLOYING until then. Timing is
simulated; nothing else is.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Callable
from contextlib import suppress
from http import HTTPStatus
from typing import Any

from harness.sim import standin

DASHBOARD_PORT = 8265
HEAD_LABEL = ("ray.io/node-type", "head")  # set by KubeRay on the head pod
CLUSTER_LABEL = "ray.io/cluster"  # set by KubeRay on every pod of a RayCluster
JOB_PATH = "/api/jobs/"
SERVE_PATH = "/api/serve/applications/"
RAY_VERSION = "2.60.0"  # the Ray whose answers the contract test recorded
TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")
log = logging.getLogger("gpupoc.ray-dashboard")


def cluster_of(pod: Any) -> str:
    """namespace/name of the Ray cluster a pod (the API client's object) belongs to; "" for none."""
    cluster = (pod.metadata.labels or {}).get(CLUSTER_LABEL)
    return f"{pod.metadata.namespace}/{cluster}" if cluster else ""


def serves(labels: dict[str, str]) -> bool:
    return labels.get(HEAD_LABEL[0]) == HEAD_LABEL[1]


def failure(pod: dict[str, Any]) -> str | None:
    """Pure: why a Ray cluster's pod failed (a container that exited non-zero, now or before a restart), or None.
    A training program loses its gang with it: the cluster's running job fails, as Ray Train's does by default."""
    status = pod.get("status") or {}
    for container in status.get("containerStatuses") or []:
        for state in (container.get("state") or {}, container.get("lastState") or {}):
            ended = state.get("terminated") or {}
            if ended.get("exitCode"):
                return (f"pod {pod['metadata']['name']}: container {container.get('name')} exited "
                        f"{ended['exitCode']} ({ended.get('reason') or 'Error'})")
    if status.get("phase") == "Failed":
        return f"pod {pod['metadata']['name']} failed ({status.get('reason') or 'Failed'})"
    return None


class RayDashboard:
    """The jobs of one Ray head; `answer` is the API, `handle` a connection."""

    def __init__(self, pod_ref: str, run_for_s: float | None, clock: Callable[[], float] = time.time,
                 serving_ready: Callable[[], bool] = lambda: False) -> None:
        self.pod_ref, self.run_for_s, self.clock, self.serving_ready = pod_ref, run_for_s, clock, serving_ready
        self.jobs: dict[str, dict[str, Any]] = {}
        self.serve_config: dict[str, Any] = {}
        self._deployed_at = 0.0
        self._next_job = 1
        self._node_id = hashlib.sha256(pod_ref.encode()).hexdigest()[:56]  # Ray's node ids: 28 bytes in hex

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _current(self, job: dict[str, Any]) -> dict[str, Any]:
        """The job, moved on to SUCCEEDED once it has run its time."""
        if job["status"] == "RUNNING" and self.run_for_s is not None and \
                self._now_ms() >= job["start_time"] + self.run_for_s * 1000:
            job.update(status="SUCCEEDED", message="Job finished successfully.",
                       end_time=job["start_time"] + int(self.run_for_s * 1000), driver_exit_code=0)
        return job

    def answer(self, method: str, path: str, body: bytes) -> tuple[int, Any]:
        """(status, JSON body or text) for one request, as Ray's job head answers it."""
        if path == "/api/version" and method == "GET":
            return 200, {"version": "4", "ray_version": RAY_VERSION, "ray_commit": "simulated",
                         "session_name": f"session-{self.pod_ref}"}
        if path.rstrip("/") == SERVE_PATH.rstrip("/"):
            return self._serve(method, body)
        if not path.startswith(JOB_PATH.rstrip("/")):
            return 404, "404: Not Found"
        rest = path[len(JOB_PATH):].strip("/") if path.startswith(JOB_PATH) else ""
        if not rest:
            if method == "GET":
                return 200, [dict(self._current(j)) for j in self.jobs.values()]
            if method == "POST":
                return self._submit(body)
            return 405, "405: Method Not Allowed"
        name, _, action = rest.partition("/")
        job = self.jobs.get(name) or next((j for j in self.jobs.values() if j["job_id"] == name), None)
        if job is None:
            return 404, f"Job {name} does not exist"
        job = self._current(job)
        if method == "GET" and not action:
            return 200, dict(job)  # a copy: the answer as of now
        if method == "GET" and action == "logs":
            return 200, {"logs": f"(simulated) {job['entrypoint']}\n"}
        if method == "POST" and action == "stop":
            stopped = job["status"] not in TERMINAL
            if stopped:
                job.update(status="STOPPED", message="Job was intentionally stopped.", end_time=self._now_ms())
            return 200, {"stopped": stopped}
        if method == "DELETE" and not action:
            if job["status"] not in TERMINAL:
                return 500, f"Attempted to delete job '{name}', but it is in a non-terminal state {job['status']}."
            del self.jobs[job["submission_id"]]
            return 200, {"deleted": True}
        return 405, "405: Method Not Allowed"

    def _serve(self, method: str, body: bytes) -> tuple[int, Any]:
        """Ray Serve's declarative API: the config deployed (PUT) and each application's status (GET)."""
        if method == "PUT":
            try:
                config = json.loads(body or b"{}")
                names = [str(app.get("name") or "default") for app in config["applications"]]
            except (ValueError, KeyError, TypeError, AttributeError):
                return 400, "the request body must be a Serve config: JSON with a list of applications"
            self.serve_config, self._deployed_at = config, self.clock()
            log.info("%s: Serve applications deployed: %s", self.pod_ref, ", ".join(names))
            return 200, ""
        if method != "GET":
            return 405, "405: Method Not Allowed"
        return 200, serve_details(self.serve_config, self._deployed_at, self.serving_ready())

    def fail(self, reason: str) -> None:
        """The running jobs fail: a node of the cluster was lost."""
        for job in self.jobs.values():
            if self._current(job)["status"] not in TERMINAL:
                job.update(status="FAILED", error_type="JOB_ENTRYPOINT_COMMAND_ERROR",
                           message=f"(simulated) {reason}", end_time=self._now_ms(), driver_exit_code=1)
                log.info("%s: job %s failed: %s", self.pod_ref, job["submission_id"], reason)

    def _submit(self, body: bytes) -> tuple[int, Any]:
        try:
            request = json.loads(body or b"{}")
            entrypoint = request["entrypoint"]
        except (ValueError, KeyError, TypeError):
            return 400, "the request body must be JSON with an entrypoint"
        submission_id = request.get("submission_id") or f"raysubmit_{self._next_job:016d}"
        if submission_id in self.jobs:
            return 500, (f"Job with submission_id {submission_id} already exists. "
                         "Please use a different submission_id.")
        job_id = f"{self._next_job:02x}000000"
        self._next_job += 1
        now = self._now_ms()
        self.jobs[submission_id] = {
            "type": "SUBMISSION", "job_id": job_id, "submission_id": submission_id, "driver_info": None,
            "status": "RUNNING", "entrypoint": entrypoint, "message": "Job is currently running.",
            "error_type": None, "start_time": now, "end_time": None, "metadata": request.get("metadata") or {},
            "runtime_env": request.get("runtime_env"), "driver_agent_http_address": "http://127.0.0.1:52365",
            "driver_node_id": self._node_id, "driver_exit_code": None}
        log.info("%s: job %s submitted: %s", self.pod_ref, submission_id, entrypoint)
        return 200, {"job_id": job_id, "submission_id": submission_id}

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    request = await standin.read_request(reader, writer)
                except standin.BadRequest as exc:
                    await _send(writer, exc.status, str(exc), keep_alive=False)
                    return
                if request is None:
                    return
                status, payload = self.answer(request.method, request.path, request.body)
                await _send(writer, status, payload, request.keep_alive)
                if not request.keep_alive:
                    return
        except (ConnectionError, EOFError):
            pass
        finally:
            writer.close()
            with suppress(Exception):
                await writer.wait_closed()


def serve_details(config: dict[str, Any], deployed_at: float, ready: bool) -> dict[str, Any]:
    """Pure: Ray's ServeInstanceDetails for a deployed config (its keys as Ray 2.60 answers them, recorded in
    tests/contract/ray-serve-2.60.0.json); each deployment HEALTHY and its application RUNNING once the cluster's
    serving pods are ready, else UPDATING and DEPLOYING. Before a deploy, Ray's four keys and no application."""
    controller = {"actor_id": None, "actor_name": None, "log_file_path": None, "node_id": None,
                  "node_instance_id": None, "node_ip": None, "worker_id": None}
    if not config.get("applications"):
        return {"applications": {}, "controller_info": {}, "proxies": {}, "target_capacity": None}
    apps = {}
    for app in config["applications"]:
        name = str(app.get("name") or "default")
        deployments = {str(d.get("name")): {
            "name": d.get("name"), "status": "HEALTHY" if ready else "UPDATING",
            "status_trigger": "CONFIG_UPDATE_COMPLETED" if ready else "CONFIG_UPDATE_STARTED", "message": "",
            "deployment_config": d, "target_num_replicas": d.get("num_replicas", 1), "required_resources": {},
            "replicas": [], "recent_dead_replicas": []}
            for d in app.get("deployments") or [{"name": name}]}
        apps[name] = {"name": name, "route_prefix": app.get("route_prefix", "/"), "docs_path": None,
                      "status": "RUNNING" if ready else "DEPLOYING", "message": "",
                      "last_deployed_time_s": deployed_at, "deployed_app_config": app, "source": "declarative",
                      "deployments": deployments, "external_scaler_enabled": False, "deployment_topology": None}
    return {"applications": apps, "controller_health_metrics": {}, "controller_info": controller,
            "grpc_options": {}, "http_options": config.get("http_options") or {"host": "0.0.0.0", "port": 8000},
            "proxies": {}, "proxy_location": "EveryNode", "restores_unset_config_options": False,
            "target_capacity": config.get("target_capacity"), "target_groups": []}


async def _send(writer: asyncio.StreamWriter, status: int, payload: Any, keep_alive: bool) -> None:
    is_text = isinstance(payload, str)
    body = payload.encode() if is_text else json.dumps(payload).encode()
    head = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
            f"content-type: {'text/plain; charset=utf-8' if is_text else 'application/json'}",
            f"content-length: {len(body)}", f"connection: {'keep-alive' if keep_alive else 'close'}"]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
    await writer.drain()

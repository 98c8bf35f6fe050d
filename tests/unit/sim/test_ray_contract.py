"""The sim's Ray dashboard stand-in answers KubeRay's calls as a real Ray head does: the calls recorded from Ray
2.60.0 (tests/contract/record_ray_dashboard.py, from PyPI) replayed against the stand-in, each answer's status and
JSON shape compared (keys, value types; the job's status and the ids as given). Where Ray answered null (a
driver that never called ray.init has no job_id), any value passes."""

from __future__ import annotations

import json
from typing import Any

from harness.core.paths import REPO_ROOT
from harness.sim import ray_dashboard
from harness.sim.ray_dashboard import RayDashboard
from tests.contract.record_ray_dashboard import shape

RECORDED = REPO_ROOT / "tests" / "contract" / "ray-dashboard-2.60.0.json"
SHAPE = json.loads(RECORDED.read_text())
ENTRYPOINT = "python -c 'import time; time.sleep(4)'"


def differences(real: Any, ours: Any, where: str = "") -> list[str]:
    if real == "NoneType":
        return []
    if isinstance(real, dict) and isinstance(ours, dict):
        missing = [f"{where}.{k}: missing" for k in real if k not in ours]
        extra = [f"{where}.{k}: not in Ray's answer" for k in ours if k not in real]
        return missing + extra + [d for k in real if k in ours for d in differences(real[k], ours[k], f"{where}.{k}")]
    if isinstance(real, list) and isinstance(ours, list):
        return [d for r, o in zip(real, ours) for d in differences(r, o, f"{where}[]")] + (
            [f"{where}: {len(ours)} items, Ray {len(real)}"] if len(real) != len(ours) else [])
    if real in ("<text>", "<string>") and ours in ("<text>", "<string>"):
        return []
    return [] if real == ours else [f"{where}: ours {ours!r}, Ray's {real!r}"]


class Clock:
    now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def replay() -> list[tuple[str, int, Any]]:
    """The recorder's calls, in its order, against the stand-in (its clock moved on where Ray's job ran)."""
    clock = Clock()
    dashboard = RayDashboard("poc-team-a/contract", 4.0, clock)

    def call(method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        return dashboard.answer(method, path, json.dumps(body).encode() if body is not None else b"")

    answers = [("get an unknown job", *call("GET", "/api/jobs/gpupoc-unknown")),
               ("submit", *call("POST", "/api/jobs/", {"entrypoint": ENTRYPOINT, "submission_id": "gpupoc-a",
                                                        "metadata": {"gpupoc": "contract"}})),
               ("submit the same id", *call("POST", "/api/jobs/", {"entrypoint": ENTRYPOINT,
                                                                    "submission_id": "gpupoc-a"})),
               ("get while running", *call("GET", "/api/jobs/gpupoc-a")),
               ("delete while running", *call("DELETE", "/api/jobs/gpupoc-a"))]
    clock.now += 4
    answers += [("get once ended", *call("GET", "/api/jobs/gpupoc-a")),
                ("stop an ended job", *call("POST", "/api/jobs/gpupoc-a/stop")),
                ("list", *call("GET", "/api/jobs/")),
                ("delete an ended job", *call("DELETE", "/api/jobs/gpupoc-a")),
                ("submit another", *call("POST", "/api/jobs/", {"entrypoint": "sleep 60",
                                                                 "submission_id": "gpupoc-b"})),
                ("stop a running job", *call("POST", "/api/jobs/gpupoc-b/stop")),
                ("get once stopped", *call("GET", "/api/jobs/gpupoc-b"))]
    return answers


def test_the_stand_in_answers_kuberays_calls_as_ray_does() -> None:
    recorded = SHAPE["steps"]
    ours = replay()
    assert [s["call"] for s in recorded] == [name for name, _, _ in ours]
    problems = [f"{name}: status {status}, Ray's {real['status']}" for real, (name, status, _) in zip(recorded, ours)
                if real["status"] != status]
    problems += [f"{name}{d}" for real, (name, _, body) in zip(recorded, ours)
                 for d in differences(real["body"], shape(body))]
    assert not problems, "\n".join(problems)
    assert SHAPE["ray_version"] == ray_dashboard.RAY_VERSION


SERVE = json.loads((REPO_ROOT / "tests" / "contract" / "ray-serve-2.60.0.json").read_text())


def serve_keys(body: Any) -> dict[str, Any]:
    """What KubeRay's RayService reads, and the keys around it: the answer's, each application's and each
    deployment's keys, and the statuses (the values below them are Ray's own objects, not read)."""
    if not isinstance(body, dict):
        return {"body": type(body).__name__}
    apps = body.get("applications") or {}
    deployments = [d for a in apps.values() for d in (a.get("deployments") or {}).values()]
    return {"keys": sorted(body), "app keys": sorted({k for a in apps.values() for k in a}),
            "deployment keys": sorted({k for d in deployments for k in d}),
            "statuses": sorted(str(a.get("status")) for a in apps.values()),
            "deployment statuses": sorted(str(d.get("status")) for d in deployments)}


def test_the_stand_in_answers_a_rayservices_serve_calls_as_ray_does() -> None:
    """Ray 2.60.0's answers (tests/contract/record_ray_serve.py): no application before a deploy, the PUT of a
    declarative config accepted, RUNNING and HEALTHY once its replicas run; the stand-in's with its servers ready."""
    config = {"applications": [{"name": "llm", "route_prefix": "/", "import_path": "gpupoc_contract_app:app",
                                "deployments": [{"name": "Echo", "num_replicas": 1}]}]}
    dashboard = RayDashboard("poc-team-a/contract", None, Clock(), serving_ready=lambda: True)
    path = "/api/serve/applications/"
    ours = [dashboard.answer("GET", path, b""), dashboard.answer("PUT", path, json.dumps(config).encode()),
            dashboard.answer("GET", path, b"")]
    for real, (status, body) in zip(SERVE["steps"], ours):
        assert status == real["status"], real["call"]
        assert serve_keys(shape(body)) == serve_keys(real["body"]), real["call"]
    assert SERVE["ray_version"] == ray_dashboard.RAY_VERSION

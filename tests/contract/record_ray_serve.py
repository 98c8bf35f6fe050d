"""Record a real Ray head's answers to the Serve calls KubeRay's operator makes for a RayService, for the sim's
stand-in's contract test (tests/unit/sim/test_ray_contract.py). Run once per Ray version, by hand:

    python3.11 -m venv /tmp/ray && /tmp/ray/bin/pip install "ray[serve]==2.60.0"
    /tmp/ray/bin/python tests/contract/record_ray_serve.py tests/contract/ray-serve-2.60.0.json

It starts a Ray head on 127.0.0.1 (one CPU, no GPU) whose workers can import a one-deployment application written
to a temporary directory, then makes KubeRay's calls: the applications before any deploy, the PUT of a declarative
config, the applications until RUNNING, and the Serve proxy's /-/healthz on port 8000. It writes each answer's
status and JSON shape (tests/contract/record_ray_dashboard.py's `shape`) and stops Ray.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.contract.record_ray_dashboard import call, recorded_on_a_head, shape  # noqa: E402

APP = '''from ray import serve


@serve.deployment
class Echo:
    def __call__(self, request):
        return "ok"


app = Echo.bind()
'''
CONFIG = {"applications": [{"name": "llm", "route_prefix": "/", "import_path": "gpupoc_contract_app:app",
                            "deployments": [{"name": "Echo", "num_replicas": 1}]}]}
SERVE_PATH = "/api/serve/applications/"
KEPT_APP_FIELDS = ("status",)


def until_running(timeout_s: float = 120) -> tuple[int, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        answer = call("GET", SERVE_PATH + "?api_type=declarative")
        apps = answer[1].get("applications") if isinstance(answer[1], dict) else None
        if apps and all(a.get("status") == "RUNNING" for a in apps.values()) or time.monotonic() > deadline:
            return answer
        time.sleep(1)


def healthz() -> tuple[int, str]:
    try:
        with urllib.request.urlopen("http://127.0.0.1:8000/-/healthz", timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def record() -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []

    def note(name: str, answer: tuple[int, Any]) -> None:
        steps.append({"call": name, "status": answer[0], "body": shape(answer[1])})

    note("applications before a deploy", call("GET", SERVE_PATH + "?api_type=declarative"))
    note("deploy", call("PUT", SERVE_PATH, CONFIG))
    note("applications once running", until_running())
    note("proxy health", healthz())
    return steps


def main() -> int:
    out = Path(sys.argv[1])
    with tempfile.TemporaryDirectory() as app_dir:
        Path(app_dir, "gpupoc_contract_app.py").write_text(APP)
        version, steps = recorded_on_a_head(record, {**os.environ, "PYTHONPATH": app_dir})
    out.write_text(json.dumps({"ray_version": version.get("ray_version") if isinstance(version, dict) else version,
                               "steps": steps}, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

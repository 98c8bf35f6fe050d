"""Record a real Ray head's answers to the job API calls KubeRay's operator makes (HTTPMode), for the sim's
stand-in's contract test (tests/unit/sim/test_ray_contract.py). Run once per Ray version, by hand:

    python3.11 -m venv /tmp/ray && /tmp/ray/bin/pip install "ray[default]==2.60.0"
    /tmp/ray/bin/python tests/contract/record_ray_dashboard.py tests/contract/ray-dashboard-2.60.0.json

It starts a Ray head on 127.0.0.1 (one CPU, no GPU), makes the calls in CALLS order, writes each answer's status
and JSON shape (keys and value types; the values of `status` and of the fields KubeRay reads), and stops Ray.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from collections.abc import Callable
from typing import Any

PORT = 28265
BASE = f"http://127.0.0.1:{PORT}"
ENTRYPOINT = "python -c 'import time; time.sleep(4)'"
KEPT = ("status", "entrypoint", "submission_id", "type", "stopped", "deleted")  # values compared, not only types


def call(method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(BASE + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


def shape(value: Any) -> Any:
    """Keys and JSON types, with the values of KEPT."""
    if isinstance(value, dict):
        return {k: (v if k in KEPT else shape(v)) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [shape(v) for v in value[:1]]
    if isinstance(value, str):
        return "<text>" if " " in value or len(value) > 40 else "<string>"
    return type(value).__name__


def until(path: str, statuses: tuple[str, ...], timeout_s: float = 60) -> tuple[int, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        answer = call("GET", path)
        if isinstance(answer[1], dict) and answer[1].get("status") in statuses or time.monotonic() > deadline:
            return answer
        time.sleep(0.5)


def record() -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []

    def note(name: str, answer: tuple[int, Any]) -> None:
        steps.append({"call": name, "status": answer[0], "body": shape(answer[1])})

    note("get an unknown job", call("GET", "/api/jobs/gpupoc-unknown"))
    note("submit", call("POST", "/api/jobs/", {"entrypoint": ENTRYPOINT, "submission_id": "gpupoc-a",
                                               "metadata": {"gpupoc": "contract"}}))
    note("submit the same id", call("POST", "/api/jobs/", {"entrypoint": ENTRYPOINT, "submission_id": "gpupoc-a"}))
    note("get while running", until("/api/jobs/gpupoc-a", ("RUNNING",)))
    note("delete while running", call("DELETE", "/api/jobs/gpupoc-a"))
    note("get once ended", until("/api/jobs/gpupoc-a", ("SUCCEEDED", "FAILED")))
    note("stop an ended job", call("POST", "/api/jobs/gpupoc-a/stop"))
    note("list", call("GET", "/api/jobs/"))
    note("delete an ended job", call("DELETE", "/api/jobs/gpupoc-a"))
    note("submit another", call("POST", "/api/jobs/", {"entrypoint": "sleep 60", "submission_id": "gpupoc-b"}))
    until("/api/jobs/gpupoc-b", ("RUNNING",))
    note("stop a running job", call("POST", "/api/jobs/gpupoc-b/stop"))
    note("get once stopped", until("/api/jobs/gpupoc-b", ("STOPPED",)))
    return steps


def recorded_on_a_head(steps: Callable[[], list[dict[str, Any]]],
                       env: dict[str, str] | None = None) -> tuple[Any, list[dict[str, Any]]]:
    """(Ray's version answer, the steps' answers) from a Ray head on 127.0.0.1 (one CPU, no GPU), stopped after."""
    ray = str(Path(sys.executable).with_name("ray"))
    subprocess.run([ray, "start", "--head", "--num-cpus=1", "--num-gpus=0", "--include-dashboard=true",
                    "--dashboard-host=127.0.0.1", f"--dashboard-port={PORT}", "--port=26379",
                    "--node-ip-address=127.0.0.1", "--disable-usage-stats"], check=True, env=env)
    try:
        return call("GET", "/api/version")[1], steps()
    finally:
        subprocess.run([ray, "stop", "--force"], check=False)


def main() -> int:
    out = Path(sys.argv[1])
    version, steps = recorded_on_a_head(record)
    out.write_text(json.dumps({"ray_version": version.get("ray_version") if isinstance(version, dict) else version,
                               "version": shape(version), "steps": steps}, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A Prometheus behind basic auth (the real Prometheus 2.42 of the sim's packages, `--web.config.file`, on
127.0.0.1): the harness asks it with the user and password from the environment (the password from a file), a
run refuses to start without them naming what to set, and the password never reaches the output."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest

from harness.setup.preflight import MISSING, OK, prometheus_checks
from harness.cluster.prometheus import Prometheus
from harness.sim.components import prometheus_binary
from harness.core.paths import REPO_ROOT

USER, PASSWORD = "poc-reader", "correct-horse-battery-staple"
READY_WITHIN_S = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Prometheus scraping itself, behind basic auth; stopped at the end (nothing left running)."""
    root = tmp_path_factory.mktemp("prometheus-auth")
    port = free_port()
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    (root / "web.yml").write_text(f"basic_auth_users:\n  {USER}: '{hashed}'\n")
    (root / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s}\nscrape_configs:\n- job_name: self\n"
        f"  basic_auth: {{username: {USER}, password: {PASSWORD}}}\n"
        f"  static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n")
    process = subprocess.Popen([prometheus_binary(), f"--config.file={root / 'prometheus.yml'}",
                                f"--web.config.file={root / 'web.yml'}", f"--web.listen-address=127.0.0.1:{port}",
                                f"--storage.tsdb.path={root / 'data'}"],
                               stdout=subprocess.DEVNULL, stderr=(root / "prometheus.log").open("w"))
    url = f"http://127.0.0.1:{port}"
    deadline, status = time.monotonic() + READY_WITHIN_S, "not asked"
    while time.monotonic() < deadline and status != "200":
        try:
            urllib.request.urlopen(f"{url}/-/ready", timeout=2)
            status = "200"
        except urllib.error.HTTPError as exc:
            status = str(exc.code)  # 401 without credentials: up, and guarded
            if exc.code == 401:
                break
        except OSError as exc:
            status = str(exc)
            time.sleep(0.2)
    try:
        assert status == "401", f"Prometheus behind basic auth not up within {READY_WITHIN_S:.0f}s: {status}"
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_basic_auth_from_the_environment_and_a_clear_refusal_without_it(guarded: str, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUPOC_PROMETHEUS_TOKEN", raising=False)
    refused = prometheus_checks(guarded, ["kueue"])
    assert refused[0].status == MISSING and "refuses the credentials" in refused[0].fix
    password = tmp_path / "password"
    password.write_text(PASSWORD + "\n")
    monkeypatch.setenv("GPUPOC_PROMETHEUS_USER", USER)
    monkeypatch.setenv("GPUPOC_PROMETHEUS_PASSWORD_FILE", str(password))
    assert Prometheus(guarded).instant("vector(1)")[0].value == 1.0
    assert prometheus_checks(guarded, [])[0].status == OK
    with_url_credentials = guarded.replace("http://", f"http://{USER}:{PASSWORD}@")
    monkeypatch.delenv("GPUPOC_PROMETHEUS_USER")
    monkeypatch.delenv("GPUPOC_PROMETHEUS_PASSWORD_FILE")
    prometheus = Prometheus(with_url_credentials)
    assert prometheus.url == guarded and prometheus.instant("vector(1)")


def test_a_run_without_the_credentials_stops_at_once_and_no_output_holds_the_password(guarded: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUPOC_PROMETHEUS_")}
    without = subprocess.run([sys.executable, "-m", "harness.cli", "run", f"--prometheus-url={guarded}"],
                             cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert without.returncode == 2 and "refuses the credentials" in without.stderr, without.stderr
    assert len(without.stderr.strip().splitlines()) == 1, without.stderr
    env.update(GPUPOC_PROMETHEUS_USER=USER, GPUPOC_PROMETHEUS_PASSWORD=PASSWORD)
    preflight = subprocess.run([sys.executable, "-m", "harness.cli", "preflight", f"--prometheus-url={guarded}"],
                               cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert f"OK       prometheus   {guarded} answers" in preflight.stdout, preflight.stdout + preflight.stderr
    assert PASSWORD not in preflight.stdout + preflight.stderr + without.stdout + without.stderr

"""Two runs against one cluster: the second refuses at once naming the holder, or waits with --wait-lock;
the lock (a Lease) goes at the end of the run and on Ctrl-C, and a dead holder's lock is taken over."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from harness.cluster.runlock import EXIT_LOCKED, HOLDER_ENV
from tests.fixtures.interrupt import interruptible

INNER = '''
import time
from pathlib import Path


def test_holds_the_cluster(api):
    Path("holding-" + __import__("os").environ["WHO"]).write_text("")
    deadline = time.monotonic() + 60
    while not Path("go").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
'''


@pytest.fixture()
def lock_name(sim_api: client.ApiClient) -> str:
    """A lock of these tests' own: the session running them holds the default one."""
    name = f"gpupoc-test-lock-{uuid.uuid4().hex[:6]}"
    yield name
    try:
        client.CoordinationV1Api(sim_api).delete_namespaced_lease(name, "default")
    except ApiException:
        pass


def start(tmp_path: Path, who: str, lock: str, *options: str) -> subprocess.Popen[str]:
    (tmp_path / "test_hold.py").write_text(INNER)
    env = {k: v for k, v in os.environ.items() if k != HOLDER_ENV} | {"WHO": who}
    return subprocess.Popen([sys.executable, "-m", "pytest", "-p", "harness.plugin", "-q", "-p", "no:cacheprovider",
                             "test_hold.py", f"--run-id={who}", f"--reports-dir={tmp_path}", "--queue-model=keep",
                             f"--run-lock=default/{lock}", *options], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=interruptible)


def wait_for(path: Path, proc: subprocess.Popen[str], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert proc.poll() is None, proc.communicate()[0][-2000:]
        assert time.monotonic() < deadline, f"{path.name} not there after {timeout_s}s"
        time.sleep(0.1)


def lease(api: client.ApiClient, name: str) -> client.V1Lease | None:
    try:
        return client.CoordinationV1Api(api).read_namespaced_lease(name, "default")
    except ApiException as exc:
        assert exc.status == 404
        return None


def test_a_second_run_refuses_naming_the_holder_or_waits_and_the_lock_goes_with_the_run(
        tmp_path: Path, sim_api: client.ApiClient, lock_name: str) -> None:
    first = start(tmp_path, "first", lock_name)
    wait_for(tmp_path / "holding-first", first)
    assert "run first by " in lease(sim_api, lock_name).spec.holder_identity

    second = subprocess.run(start(tmp_path, "second", lock_name).args, cwd=tmp_path, capture_output=True, text=True,
                            env={k: v for k, v in os.environ.items() if k != HOLDER_ENV} | {"WHO": "second"},
                            timeout=120)
    assert second.returncode == EXIT_LOCKED, second.stdout[-2000:]
    assert "another gpupoc run holds this cluster" in second.stdout and "run first by " in second.stdout
    assert "--wait-lock SECONDS" in second.stdout
    assert not (tmp_path / "holding-second").exists()
    clean = subprocess.run([sys.executable, "-m", "harness.cli", "clean", f"--run-lock=default/{lock_name}"],
                           capture_output=True, text=True, timeout=120,
                           env={k: v for k, v in os.environ.items() if k != HOLDER_ENV})
    assert clean.returncode == 1 and "a run holds this cluster (run first by " in clean.stderr, clean.stderr

    third = start(tmp_path, "third", lock_name, "--wait-lock=60")
    time.sleep(1)
    (tmp_path / "go").write_text("")  # the first run ends; the waiting one goes on
    assert first.wait(60) == 0
    wait_for(tmp_path / "holding-third", third)
    assert third.wait(60) == 0, third.communicate()[0][-2000:]
    assert lease(sim_api, lock_name) is None


def test_ctrl_c_releases_the_lock_and_a_dead_holders_lock_is_taken_over(
        tmp_path: Path, sim_api: client.ApiClient, lock_name: str) -> None:
    interrupted = start(tmp_path, "interrupted", lock_name)
    wait_for(tmp_path / "holding-interrupted", interrupted)
    interrupted.send_signal(signal.SIGINT)
    interrupted.wait(60)
    assert lease(sim_api, lock_name) is None

    stale = datetime.now(timezone.utc) - timedelta(minutes=2)  # a holder killed with -9 two minutes ago
    client.CoordinationV1Api(sim_api).create_namespaced_lease("default", client.V1Lease(
        metadata=client.V1ObjectMeta(name=lock_name),
        spec=client.V1LeaseSpec(holder_identity="run dead by someone@elsewhere pid 1", acquire_time=stale,
                                renew_time=stale, lease_duration_seconds=30)))
    (tmp_path / "go").write_text("")
    taker = start(tmp_path, "taker", lock_name)
    assert taker.wait(60) == 0, taker.communicate()[0][-2000:]
    assert lease(sim_api, lock_name) is None

"""Where requests to an inference Service come from, and what the probe saw.

On the sim, Service and pod addresses exist only inside the sim's network namespace: the probe and the
load generator run there (their process joins it before it execs), like a client pod. On a real cluster
they go to the URL the profile names (an ingress or gateway), from the host.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client

from harness.core.errors import HarnessError
from harness.jobs.service import SERVICE_PORT
from harness.targets.target import DataPlane
from harness.cluster.wait import poll

UNSEEN_PROXY_SYNC_S = 2.0
PROXY_WATCH_SKEW_S = 1.0


@dataclass(frozen=True)
class Sample:
    """One probe request: when it was sent (epoch s), its status (0: no answer), who served it."""

    t: float
    ok: bool
    status: int
    pod: str = ""
    version: str = ""
    latency_s: float = 0.0
    error: str = ""

    @property
    def answered_at(self) -> float:
        return self.t + self.latency_s


@dataclass
class Probe:
    process: subprocess.Popen[str]
    out: Path
    netns_inode: int | None = None

    def stop(self) -> None:
        """End the probe early: it sends nothing more, and the requests already out finish."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def samples(self, timeout_s: float) -> list[Sample]:
        """Wait for the probe to end (it is bounded by its own count and duration); its samples in order."""
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise HarnessError(f"the probe did not end within {timeout_s:.0f}s (killed); output in {self.out}")
        lines = [json.loads(line) for line in self.out.read_text().splitlines() if line.strip()]
        if not lines or "error" in lines[0]:
            why = lines[0].get("error") if lines else f"no output (exit {self.process.returncode})"
            raise HarnessError(f"the probe did not run: {why}")
        self.netns_inode = int(lines[0]["netns"])
        return sorted((Sample(float(s["t"]), bool(s["ok"]), int(s["status"]), str(s.get("pod", "")),
                              str(s.get("version", "")), float(s.get("latency_s", 0.0)), str(s.get("error", "")))
                       for s in lines[1:]), key=lambda s: s.t)


@dataclass(frozen=True)
class Traffic:
    """`netns`: the sim's namespace (None: the host, to `base_url`, a real cluster's ingress). `proxy_metrics`: the
    sim's kube-proxy metrics (127.0.0.1), where it says when it last programmed the rules."""

    netns: str | None
    base_url: str | None = None
    proxy_metrics: str | None = None
    enter: Callable[[], None] | None = None  # moves a client process into `netns` before it runs

    def wait_programmed(self, since: float, timeout_s: float = 10.0) -> float:
        """Until kube-proxy has programmed every change it had queued, one of them queued at `since` or later (epoch
        s, minus a second: its watch and ours see the EndpointSlices change at about the same time); the time it
        did. Where its metrics cannot be read (a real cluster's kube-proxy), its usual minimum sync period (1 s)
        plus a margin is waited instead."""
        url = self.proxy_metrics
        if url is None:
            time.sleep(UNSEEN_PROXY_SYNC_S)
            return time.time()

        def reading() -> tuple[float, float]:
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    text = response.read().decode()
            except OSError:
                return 0.0, 0.0
            found = {name: float(value) for name, value in re.findall(
                r'^kubeproxy_sync_proxy_rules_(last_timestamp|last_queued_timestamp)_seconds\{ip_family="IPv4"\} (\S+)$',
                text, re.M)}
            return found.get("last_timestamp", 0.0), found.get("last_queued_timestamp", 0.0)

        def done(r: tuple[float, float]) -> bool:
            synced, queued = r
            return queued >= since - PROXY_WATCH_SKEW_S and synced >= queued

        synced, queued = poll(reading, done, timeout_s, poll_s=0.1)
        if not done((synced, queued)):
            raise HarnessError(f"kube-proxy did not program the EndpointSlices' change within {timeout_s:.0f}s (last "
                               f"change queued {queued - since:+.1f}s, last sync {synced - since:+.1f}s from the change)")
        return synced

    @property
    def where(self) -> str:
        return f"inside the sim's network namespace {self.netns}" if self.netns else f"from this host to {self.base_url}"

    def service_url(self, api: client.ApiClient, namespace: str, service: str, port: int = SERVICE_PORT) -> str:
        if self.netns is None:
            return str(self.base_url)
        svc = client.CoreV1Api(api).read_namespaced_service(service, namespace)
        return f"http://{svc.spec.cluster_ip}:{port}"

    def start(self, argv: Sequence[str], out: Path, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> subprocess.Popen[str]:
        """Start a client process where the traffic must come from; stdout to `out`."""
        with out.open("w") as sink:
            process = subprocess.Popen(list(argv), stdout=sink, stderr=subprocess.STDOUT, text=True,
                                       preexec_fn=self.enter,
                                       env=env, cwd=cwd)
        _STARTED.append(process)
        return process

    def probe(self, url: str, rate: float, duration_s: float, out: Path, model: str = "sim-llm",
              stop_after_ok: int = 0, timeout_s: float = 5.0) -> Probe:
        """`timeout_s`: how long one request may take (a request given up on may stay queued in the server)."""
        argv = [sys.executable, "-m", "harness.serving.availability_probe", f"--url={url}", f"--rate={rate:g}",
                f"--duration={duration_s:g}", f"--model={model}", f"--stop-after-ok={stop_after_ok}",
                f"--timeout={timeout_s:g}"]
        return Probe(self.start(argv, out), out)


_STARTED: list[subprocess.Popen[str]] = []  # the clients this process started: stopped when their test ends
CLIENT_STOP_S = 5.0


def stop_clients() -> None:
    """End every client a test started that is still running (a case that failed before reading its probe's samples
    leaves it sending)."""
    for process in _STARTED:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(CLIENT_STOP_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    _STARTED.clear()


def inside(plane: DataPlane) -> Traffic:
    """Traffic from inside the sim's data plane (its network namespace)."""
    return Traffic(plane.netns, proxy_metrics=plane.proxy_metrics_url, enter=plane.enter)

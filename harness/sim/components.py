"""The processes of the sim: how each is started and how its health is probed."""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import ConfigError
from harness.core import paths
from harness.sim.config import Ports

SERVICE_CIDR = "10.96.0.0/12"
POD_CIDR = "10.244.0.1/16"
HEALTH_TIMEOUT_S = 2.0
# The controller-manager's and the scheduler's client rate (defaults 20 and 50 requests/s): at the scale suite's 50
# jobs/s the Job controller alone creates 50 pods/s, so the defaults, not the scheduler, would set the pace.
CLIENT_RATE = ("--kube-api-qps=300", "--kube-api-burst=600")


@dataclass(frozen=True)
class Layout:
    """Where one sim instance keeps its files."""

    root: Path

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def state(self) -> Path:
        return self.root / "state.json"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def audit_log(self) -> Path:
        return self.root / "logs" / "audit.log"

    @property
    def audit_policy(self) -> Path:
        """The API server's audit policy: a copy of sim/audit-policy.yaml made by `sim up` (a test may change it
        and restart the API server; the next `sim up` restores it)."""
        return self.root / "audit-policy.yaml"

    def component_kubeconfig(self, name: str) -> Path:
        return self.root / f"{name}.kubeconfig"

    def log(self, name: str) -> Path:
        return self.logs / f"{name}.log"


# The sim's Go programs collect garbage less often than Go's default (GOGC=100): kube-apiserver spent a third of
# its CPU in the collector while the CRDs were installed. Measured on this 2-core host, sim up with every
# scheduler: 18.4 -> 14.7 CPU-s and 13.0 -> 11.4 s; kube-apiserver's resident memory 0.85 -> 1.07 GB, bounded
# by GOMEMLIMIT. It changes when memory is reclaimed, never what a program does.
GO_GC = {"GOGC": "400", "GOMEMLIMIT": "1GiB"}


def _loopback_tls() -> ssl.SSLContext:
    """TLS to the sim's loopback endpoints, whose serving certificates are self-signed: nothing verified, so no CA
    loaded (ssl.create_default_context() loads the system's, 20 ms a probe: 0.5 s of every run's environment)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


_LOOPBACK_TLS = _loopback_tls()


@dataclass(frozen=True)
class Component:
    name: str
    argv: tuple[str, ...]
    health_url: str
    port: int
    bearer_token_file: Path | None = None  # for health probes that need credentials
    known_version: str | None = None  # for binaries without a harmless --version flag
    env: tuple[tuple[str, str], ...] = ()  # added to the environment it starts with
    netns: str | None = None  # runs inside this network namespace of the sim (kube-proxy)
    prefix: tuple[str, ...] = ()  # run through this (`nice -n 5`); `binary` stays argv[0], what the process runs

    @property
    def binary(self) -> str:
        return self.argv[0]

    def environment(self) -> dict[str, str]:
        """What it starts with: the Go runtime's collector at GO_GC (a user's own GOGC or GOMEMLIMIT wins), then
        the component's own additions."""
        return {**GO_GC, **os.environ, **dict(self.env)}

    def healthy(self) -> bool:
        """An HTTP 200 from `health_url`; for daemons without HTTP (Slurm's, munge, MariaDB) `tcp://host:port` or
        `unix:///path` is healthy once it accepts a connection."""
        if self.health_url.startswith(("tcp://", "unix://")):
            return _accepts(self.health_url)
        request = urllib.request.Request(self.health_url)
        if self.bearer_token_file is not None:
            request.add_header("Authorization", f"Bearer {self.bearer_token_file.read_text().strip()}")
        try:
            with urllib.request.urlopen(request, timeout=HEALTH_TIMEOUT_S, context=_LOOPBACK_TLS) as response:
                return bool(response.status == 200)
        except (OSError, ValueError):
            return False

    def version(self) -> str:
        if self.known_version is not None:
            return self.known_version
        try:
            out = subprocess.run([self.binary, "--version"], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return "unknown"
        first = (out.stdout or out.stderr).strip().splitlines()
        return first[0] if first else "unknown"


def _accepts(url: str) -> bool:
    scheme, _, where = url.partition("://")
    family = socket.AF_UNIX if scheme == "unix" else socket.AF_INET
    address: str | tuple[str, int] = where
    if scheme == "tcp":
        host, _, port = where.rpartition(":")
        address = (host, int(port))
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(HEALTH_TIMEOUT_S)
        try:
            sock.connect(address)
        except OSError:
            return False
    return True


def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        raise ConfigError("Prometheus not found on PATH: install it with `apt-get install -y prometheus` "
                          "(the sim runs it as a plain process with its own config)")
    return found


def binary(name: str, build_command: str = "gpupoc sim build") -> str:
    path = paths.bin_dir() / name
    if not path.exists():
        raise ConfigError(f"{name} is not built ({path} missing): run `{build_command}` first")
    return str(path)


# kube-scheduler's own gang (the kube-gang backend, harness/backends/kube_gang.py): alpha in v1.36, off by default. On
# the API server (the PodGroup API, a pod's schedulingGroup, the PodGroupProtection finalizer), the controller
# manager (which removes that finalizer) and the scheduler (the GangScheduling plugin). WorkloadWithJob stays off: it
# would gang every Indexed Job, and `default` is kube-scheduler without a gang. TopologyAwareWorkloadScheduling (alpha
# in v1.36): a PodGroup's schedulingConstraints.topology, one node label its pods share (the topology case).
WORKLOAD_GATES = "--feature-gates=GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true"
WORKLOAD_API = "--runtime-config=scheduling.k8s.io/v1alpha2=true"
# The API server's histograms that nothing of gpupoc's reads, off (its documented --disabled-metrics): 20 k of the
# 34 k samples of every 5-s scrape, which rendering, compressing and ingesting made half an idle sim's API server's
# CPU and most of its Prometheus' (2026-12-07). apiserver_request_duration_seconds stays (the scale suite's p99).
UNREAD_APISERVER_METRICS = ",".join((
    "etcd_request_duration_seconds", "apiserver_request_sli_duration_seconds", "apiserver_request_body_size_bytes",
    "apiserver_watch_list_duration_seconds", "apiserver_watch_cache_read_wait_seconds", "apiserver_response_sizes",
    "apiserver_watch_events_sizes", "apiserver_admission_controller_admission_duration_seconds"))


def control_plane(layout: Layout, ports: Ports, apiserver_extra: tuple[str, ...] = ()) -> list[Component]:
    """etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, Prometheus, in start order.
    `apiserver_extra`: the API server's flags for the real nodes (harness/sim/realnodes.py)."""
    pki, always_allowed = layout.pki, "/healthz,/readyz,/livez,/metrics"
    admin_token = layout.root / "admin.token"
    return [
        Component("etcd", (
            binary("etcd"), "--name=sim", f"--data-dir={layout.data / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{ports.etcd}",
            f"--advertise-client-urls=http://127.0.0.1:{ports.etcd}",
            f"--listen-peer-urls=http://127.0.0.1:{ports.etcd_peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{ports.etcd_peer}",
            f"--initial-cluster=sim=http://127.0.0.1:{ports.etcd_peer}",
            "--unsafe-no-fsync=true",  # throwaway data: a simulated cluster lives for one session
            "--quota-backend-bytes=4294967296",
        ), f"http://127.0.0.1:{ports.etcd}/health", ports.etcd),
        Component("kube-apiserver", (
            binary("kube-apiserver"), f"--etcd-servers=http://127.0.0.1:{ports.etcd}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={ports.apiserver}",
            f"--tls-cert-file={pki / 'kube-apiserver.crt'}", f"--tls-private-key-file={pki / 'kube-apiserver.key'}",
            f"--client-ca-file={pki / 'gpupoc-sim-ca.crt'}",
            f"--token-auth-file={layout.root / 'tokens.csv'}", "--authorization-mode=RBAC",
            "--anonymous-auth=false",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki / 'service-account.key'}",
            f"--service-account-signing-key-file={pki / 'service-account.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--endpoint-reconciler-type=none",
            f"--audit-policy-file={layout.audit_policy}",
            f"--audit-log-path={layout.audit_log}", "--audit-log-maxsize=200", "--audit-log-maxbackup=1",
            "--allow-privileged=true",
            # The aggregation layer (the metrics adapter the HPA reads): the API server proxies as front-proxy-client.
            f"--requestheader-client-ca-file={pki / 'gpupoc-sim-ca.crt'}", "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
            WORKLOAD_GATES, WORKLOAD_API, f"--disabled-metrics={UNREAD_APISERVER_METRICS}",
            *apiserver_extra,
        ), f"https://127.0.0.1:{ports.apiserver}/readyz", ports.apiserver, bearer_token_file=admin_token),
        Component("kube-controller-manager", (
            binary("kube-controller-manager"),
            f"--kubeconfig={layout.component_kubeconfig('kube-controller-manager')}",
            "--bind-address=127.0.0.1", f"--secure-port={ports.controller_manager}", "--leader-elect=false",
            f"--root-ca-file={pki / 'gpupoc-sim-ca.crt'}",
            f"--service-account-private-key-file={pki / 'service-account.key'}",
            f"--authorization-always-allow-paths={always_allowed}",
            f"--cert-dir={layout.pki / 'kube-controller-manager'}",
            # Elasticity in tens of seconds, not minutes (the defaults are 15 s and 5 min); an HPA's own
            # `behavior` may set its own window.
            "--horizontal-pod-autoscaler-sync-period=2s",
            "--horizontal-pod-autoscaler-downscale-stabilization=30s",
            WORKLOAD_GATES,
            *CLIENT_RATE,
        ), f"https://127.0.0.1:{ports.controller_manager}/healthz", ports.controller_manager),
        Component("kube-scheduler", (
            binary("kube-scheduler"), f"--kubeconfig={layout.component_kubeconfig('kube-scheduler')}",
            "--bind-address=127.0.0.1", f"--secure-port={ports.scheduler}", "--leader-elect=false",
            f"--authorization-always-allow-paths={always_allowed}",
            f"--cert-dir={layout.pki / 'kube-scheduler'}",
            WORKLOAD_GATES,
            *CLIENT_RATE,
        ), f"https://127.0.0.1:{ports.scheduler}/healthz", ports.scheduler),
        Component("kwok-controller", (
            binary("kwok"), f"--kubeconfig={layout.component_kubeconfig('kwok-controller')}",
            f"--config={paths.SIM_RECIPES / 'kwok' / 'stages.yaml'}",
            "--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            f"--server-address=127.0.0.1:{ports.kwok}", f"--cidr={POD_CIDR}", "--node-ip=10.240.0.1",
            "--node-lease-duration-seconds=40",
        ), f"http://127.0.0.1:{ports.kwok}/healthz", ports.kwok),
        Component("prometheus", (
            prometheus_binary(), f"--config.file={layout.root / 'prometheus.yml'}",
            f"--storage.tsdb.path={layout.data / 'prometheus'}", "--storage.tsdb.retention.time=1d",
            f"--web.listen-address=127.0.0.1:{ports.prometheus}",
        ), f"http://127.0.0.1:{ports.prometheus}/-/ready", ports.prometheus),
    ]

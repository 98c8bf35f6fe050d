"""The sim's data plane process: model-server stand-ins on pod IPs, and relays across the namespace line.

One asyncio process (2 cores: one process serves every pod):
- for each Running pod that asks for it (`sim.gpupoc.io/model-server: "true"`) and has an IP, a model-server
  stand-in listening on the pod IP inside the sim's network namespace, and on a 127.0.0.1 port of the host
  for Prometheus (file-based discovery: `model-servers.json`); once its `/health` answers, the pod is
  annotated `sim.gpupoc.io/server-ready` and a kwok stage makes it Ready. Stopped when the pod goes.
- relays: kube-proxy and the real nodes' kubelets (inside the namespace) reach the API server on the host's
  127.0.0.1, and the host reaches kube-proxy's and the kubelets' health and metrics ports inside the namespace.
- for each Running Ray head pod (KubeRay's `ray.io/node-type: head`), a Ray dashboard stand-in on its IP, port 8265
  (harness/sim/ray_dashboard.py), and a forward proxy on a 127.0.0.1 port of the host that KubeRay's operator
  uses as HTTP_PROXY: it resolves `<service>.<namespace>.svc.<domain>` to the Service's cluster IP and connects
  from inside the namespace, so kube-proxy routes it to the pod as in a cluster.
- with real nodes, the API server's `cluster` egress: an HTTP CONNECT proxy on a unix socket that dials node and
  pod addresses inside the namespace (the kubelets' pods/log, exec, port-forward) and 127.0.0.1 on the host (the
  webhooks and aggregated APIs, which the same egress carries). Nothing else crosses.

Run by `gpupoc sim up` as `python -m harness.sim.dataplane --config FILE`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import socket
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client, config as kube_config, watch

from harness.sim import netns, ray_dashboard, standin
from harness.config.workloads import RUN_FOR_ANNOTATION

log = logging.getLogger("gpupoc.dataplane")
READY_ANNOTATION = "sim.gpupoc.io/server-ready"
ERROR_ANNOTATION = "sim.gpupoc.io/server-error"
HEALTH_POLL_S = 0.1
WATCH_TIMEOUT_S = 300
HOST = "host"


@dataclass(frozen=True)
class Relay:
    """Accept on (listen_ns, 127.0.0.1:listen_port); connect to (target_ns, 127.0.0.1:target_port).
    A namespace of HOST means the host's own."""

    listen_ns: str
    listen_port: int
    target_ns: str
    target_port: int


def _socket_in(ns: str) -> socket.socket:
    if ns == HOST:
        return socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    with netns.entered(ns):
        return socket.socket(socket.AF_INET, socket.SOCK_STREAM)


def listening_socket(ns: str, address: str, port: int) -> socket.socket:
    sock = _socket_in(ns)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((address, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def start_relay(relay: Relay) -> asyncio.Server:
    loop = asyncio.get_running_loop()

    async def connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream = _socket_in(relay.target_ns)
        upstream.setblocking(False)
        try:
            await loop.sock_connect(upstream, ("127.0.0.1", relay.target_port))
        except OSError:
            upstream.close()
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection(sock=upstream)
        await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))

    return await asyncio.start_server(connect, sock=listening_socket(relay.listen_ns, "127.0.0.1", relay.listen_port))


def service_address(url: str) -> tuple[str, str, int, str]:
    """('ray-head-svc', 'poc-team-a', 8265, '/api/jobs/x') from 'http://ray-head-svc.poc-team-a.svc.cluster.local:8265
    /api/jobs/x'; ValueError for anything but a Service's name over plain HTTP."""
    scheme, _, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    host, _, port = authority.rpartition(":")
    labels = host.split(".")
    if scheme != "http" or len(labels) < 3 or labels[2] != "svc" or not port.isdigit():
        raise ValueError(f"not http://<service>.<namespace>.svc.<domain>:<port>/...: {url[:120]}")
    return labels[0], labels[1], int(port), slash + path


def service_endpoint(core: client.CoreV1Api, name: str, namespace: str, port: int) -> tuple[str, int]:
    """Where a connection to the Service goes: its cluster IP (kube-proxy routes it), or for a headless Service
    (KubeRay's head Service is one), the address of a ready endpoint and the port's target, as its DNS would."""
    service = core.read_namespaced_service(name, namespace)
    if service.spec.cluster_ip and service.spec.cluster_ip != "None":
        return service.spec.cluster_ip, port
    target = next((p.target_port for p in service.spec.ports or [] if p.port == port), port)
    slices = client.DiscoveryV1Api(core.api_client).list_namespaced_endpoint_slice(
        namespace, label_selector=f"kubernetes.io/service-name={name}").items
    ready = [a for s in slices for e in s.endpoints or [] if (e.conditions is None or e.conditions.ready)
             for a in e.addresses]
    if not ready:
        raise ValueError(f"service {namespace}/{name} has no ready endpoint")
    return ready[0], target if isinstance(target, int) else port


async def start_service_proxy(core: client.CoreV1Api, port: int, sim_ns: str) -> asyncio.Server:
    """A forward HTTP proxy for Service names (KubeRay's operator's HTTP_PROXY): one request per connection, sent
    from inside the namespace to the Service's cluster IP, the answer streamed back."""
    loop = asyncio.get_running_loop()

    async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await standin.read_request(reader, writer)
            if request is None:
                writer.close()
                return
            name, namespace, target_port, path = service_address(request.target)
            address = await asyncio.to_thread(service_endpoint, core, name, namespace, target_port)
            upstream = _socket_in(sim_ns)
            upstream.setblocking(False)
            await asyncio.wait_for(loop.sock_connect(upstream, address), 5)
        except (ValueError, standin.BadRequest, client.ApiException, OSError, asyncio.TimeoutError) as exc:
            reason = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
            writer.write(f"HTTP/1.1 502 Bad Gateway\r\ncontent-length: {len(reason)}\r\nconnection: close\r\n\r\n"
                         f"{reason}".encode())
            writer.close()
            return
        headers = {k: v for k, v in request.headers.items() if not k.startswith("proxy-")}
        headers.update(connection="close", host=f"{name}.{namespace}.svc:{target_port}")
        up_reader, up_writer = await asyncio.open_connection(sock=upstream)
        up_writer.write((f"{request.method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                         + "\r\n").encode("latin-1") + request.body)
        await asyncio.gather(_pump(up_reader, writer), _pump(reader, up_writer))

    return await asyncio.start_server(forward, sock=listening_socket(HOST, "127.0.0.1", port))


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")
CONNECT_HEADER_LIMIT = 16384


def egress_namespace(host: str, sim_ns: str) -> str:
    """Where the API server's `cluster` egress dials `host`: 127.0.0.1 is the host's own (webhooks, aggregated
    APIs); any other address is a node or pod of the sim, inside its namespace."""
    return HOST if host in LOOPBACK_NAMES else sim_ns


def parse_connect(head: bytes) -> tuple[str, int]:
    """('10.240.1.1', 10250) from 'CONNECT 10.240.1.1:10250 HTTP/1.1\r\n...'; ValueError when it is not one."""
    method, target, _ = head.split(b"\r\n", 1)[0].decode("ascii").split(" ", 2)
    host, _, port = target.rpartition(":")
    if method != "CONNECT" or not host or not port.isdigit():
        raise ValueError(f"not an HTTP CONNECT: {method} {target}")
    return host.strip("[]"), int(port)


async def start_egress_proxy(path: str, sim_ns: str) -> asyncio.Server:
    """The API server's `cluster` egress (EgressSelectorConfiguration, HTTPConnect over a unix socket)."""
    loop = asyncio.get_running_loop()

    async def connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            host, port = parse_connect(head[:CONNECT_HEADER_LIMIT])
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, UnicodeDecodeError) as exc:
            log.warning("egress: bad request: %s", exc)
            writer.close()
            return
        upstream = _socket_in(egress_namespace(host, sim_ns))
        upstream.setblocking(False)
        try:
            await loop.sock_connect(upstream, (host, port))
        except OSError as exc:
            upstream.close()
            writer.write(f"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nX-Error: {exc}\r\n\r\n".encode())
            writer.close()
            return
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        up_reader, up_writer = await asyncio.open_connection(sock=upstream)
        await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))

    if os.path.exists(path):
        os.unlink(path)
    server = await asyncio.start_unix_server(connect, path=path)
    os.chmod(path, 0o600)  # the API server runs as the same user
    return server


def _route_of(spec: standin.ServerSpec) -> str:
    return f"{spec.namespace}/{spec.prefix_route}" if spec.prefix_route else ""


@dataclass
class Serving:
    server: standin.ModelServer
    listeners: list[asyncio.Server]
    metrics_port: int
    uid: str
    ip: str
    cluster: str = ""  # the Ray cluster (namespace/name) of a Ray Serve worker's pod
    ready: bool = False  # its /health answered


@dataclass
class Dashboard:
    dashboard: ray_dashboard.RayDashboard
    listener: asyncio.Server | None  # None while the cluster has no running head
    uid: str  # the head pod it listens for


class StandIns:
    """The model servers of the sim's serving pods and the dashboards of its Ray heads, kept in step with the
    pods' watch events."""

    def __init__(self, core: client.CoreV1Api, ns: str, file_sd: Path) -> None:
        self.core, self.ns, self.file_sd = core, ns, file_sd
        self.serving: dict[str, Serving] = {}
        self.dashboards: dict[str, Dashboard] = {}
        self.routers: dict[str, standin.PrefixRouter] = {}  # by namespace/route: the servers' prefix-aware routes
        self._write_targets()

    async def on_event(self, kind: str, pod: Any) -> None:
        key = f"{pod.metadata.namespace}/{pod.metadata.name}"
        if ray_dashboard.cluster_of(pod):
            await self._ray_pod(kind, pod)  # and a Ray Serve worker's model server below, where it asks for one
        annotations = pod.metadata.annotations or {}
        current = self.serving.get(key)
        moved = current is not None and pod.status.pod_ip and current.ip != pod.status.pod_ip
        if current is not None and (kind == "DELETED" or current.uid != pod.metadata.uid or moved):
            if moved:
                log.info("%s: its IP changed from %s to %s: serving it there", key, current.ip, pod.status.pod_ip)
            await self._stop(key)
            current = None
        if current is not None and pod.metadata.deletion_timestamp:
            current.ready = False  # draining: its Service has dropped it, and so does a prefix-aware route
        if kind == "DELETED" or current is not None or not standin.serves(annotations):
            return
        if pod.status.phase != "Running" or not pod.status.pod_ip or pod.metadata.deletion_timestamp:
            return
        try:
            spec = standin.spec_from_pod(pod.metadata.name, pod.metadata.namespace, annotations,
                                         pod.metadata.labels or {})
        except ValueError as exc:
            log.warning("%s: not served: %s", key, exc)
            await asyncio.to_thread(self._annotate, pod, {ERROR_ANNOTATION: str(exc)})
            return
        await self._start(key, pod, spec)

    async def _ray_pod(self, kind: str, pod: Any) -> None:
        """A pod of a Ray cluster: its head serves the cluster's dashboard (the jobs outlive a head pod replaced,
        as with Ray's GCS fault tolerance); any of its pods failing fails the cluster's running jobs."""
        key = ray_dashboard.cluster_of(pod)
        failure = ray_dashboard.failure(self.core.api_client.sanitize_for_serialization(pod))
        if failure and key in self.dashboards:
            self.dashboards[key].dashboard.fail(failure)
        if not ray_dashboard.serves(pod.metadata.labels or {}):
            return
        current = self.dashboards.get(key)
        up = kind != "DELETED" and pod.status.phase == "Running" and pod.status.pod_ip and \
            not pod.metadata.deletion_timestamp
        if current is not None and current.listener is not None and (not up or current.uid != pod.metadata.uid):
            current.listener.close()
            current.listener = None
            log.info("%s: Ray dashboard stopped (head pod %s)", key, pod.metadata.name)
        if not up or (current is not None and current.listener is not None):
            return
        if current is None:
            run_for = (pod.metadata.annotations or {}).get(RUN_FOR_ANNOTATION)
            try:
                current = Dashboard(ray_dashboard.RayDashboard(
                    key, standin.parse_duration(run_for) if run_for else None,
                    serving_ready=lambda: self.cluster_serving_ready(key)), None, "")
            except ValueError as exc:
                log.warning("%s: no Ray dashboard: %s", key, exc)
                return
            self.dashboards[key] = current
        try:
            sock = listening_socket(self.ns, pod.status.pod_ip, ray_dashboard.DASHBOARD_PORT)
        except OSError as exc:
            log.warning("%s: cannot listen on %s:%d: %s", key, pod.status.pod_ip, ray_dashboard.DASHBOARD_PORT, exc)
            return
        current.listener = await asyncio.start_server(current.dashboard.handle, sock=sock)
        current.uid = pod.metadata.uid
        log.info("%s: Ray dashboard on %s:%d (head pod %s)", key, pod.status.pod_ip, ray_dashboard.DASHBOARD_PORT,
                 pod.metadata.name)

    def cluster_serving_ready(self, cluster: str) -> bool:
        """Every model server on the Ray cluster's pods answers /health (Ray Serve's replicas are up)."""
        servers = [s for s in self.serving.values() if s.cluster == cluster]
        return bool(servers) and all(s.ready for s in servers)

    def forget_dashboard(self, key: str) -> None:
        """The cluster has no pod left: its dashboard and its jobs go."""
        dashboard = self.dashboards.pop(key)
        if dashboard.listener is not None:
            dashboard.listener.close()

    async def _start(self, key: str, pod: Any, spec: standin.ServerSpec) -> None:
        server = standin.ModelServer(spec)
        try:
            on_pod = listening_socket(self.ns, pod.status.pod_ip, spec.port)
        except OSError as exc:
            log.warning("%s: cannot listen on %s:%d in %s: %s", key, pod.status.pod_ip, spec.port, self.ns, exc)
            return
        if spec.prefix_route:  # a request it receives goes to the replica the route picks among those Ready
            route = _route_of(spec)
            router = self.routers.setdefault(route, standin.PrefixRouter())
            server.route = lambda words: router.pick(self._replicas(route) or [server], words)
        on_host = listening_socket(HOST, "127.0.0.1", 0)
        port = on_host.getsockname()[1]
        listeners = [await asyncio.start_server(server.handle, sock=s) for s in (on_pod, on_host)]
        self.serving[key] = Serving(server, listeners, port, pod.metadata.uid, pod.status.pod_ip,
                                    ray_dashboard.cluster_of(pod))
        self._write_targets()
        log.info("%s: serving %s on %s:%d (metrics on 127.0.0.1:%d), version %s", key, spec.model,
                 pod.status.pod_ip, spec.port, port, spec.version)
        asyncio.create_task(self._mark_ready_when_healthy(key, pod, port))

    def _replicas(self, route: str) -> list[standin.ModelServer]:
        return [s.server for s in self.serving.values() if s.ready and _route_of(s.server.spec) == route]

    async def _mark_ready_when_healthy(self, key: str, pod: Any, port: int) -> None:
        started = time.monotonic()
        while key in self.serving and self.serving[key].metrics_port == port:
            if await asyncio.to_thread(_answers_health, port):
                self.serving[key].ready = True
                await asyncio.to_thread(self._annotate, pod, {READY_ANNOTATION: "true"})
                log.info("%s: /health answers after %.2fs: annotated", key, time.monotonic() - started)
                return
            await asyncio.sleep(HEALTH_POLL_S)

    def _annotate(self, pod: Any, annotations: dict[str, str]) -> None:
        try:
            self.core.patch_namespaced_pod(pod.metadata.name, pod.metadata.namespace,
                                           {"metadata": {"annotations": annotations}})
        except client.ApiException as exc:
            if exc.status != 404:
                log.warning("annotating %s/%s failed: %s", pod.metadata.namespace, pod.metadata.name, exc.reason)

    async def _stop(self, key: str) -> None:
        serving = self.serving.pop(key)
        serving.server.close()  # keep-alive connections too: a deleted pod answers nothing
        route = _route_of(serving.server.spec)
        if route in self.routers:
            self.routers[route].forget(serving.server.spec.pod_ref)
            if not any(_route_of(s.server.spec) == route for s in self.serving.values()):
                del self.routers[route]
        for listener in serving.listeners:
            listener.close()
        self._write_targets()
        log.info("%s: stopped serving", key)

    def _write_targets(self) -> None:
        targets = [{"targets": [f"127.0.0.1:{s.metrics_port}"], "labels": {"sim_pod": key}}
                   for key, s in sorted(self.serving.items())]
        tmp = self.file_sd.with_suffix(".tmp")
        tmp.write_text(json.dumps(targets, indent=1))
        os.replace(tmp, self.file_sd)


def _answers_health(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _watch_pods(core: client.CoreV1Api, loop: asyncio.AbstractEventLoop, handler: StandIns,
                stopping: threading.Event) -> None:
    """Pod events (all namespaces) into the loop; a relist after every expired watch."""
    while not stopping.is_set():
        try:
            listed = core.list_pod_for_all_namespaces()
            for pod in listed.items:
                asyncio.run_coroutine_threadsafe(handler.on_event("MODIFIED", pod), loop).result()
            known = {f"{p.metadata.namespace}/{p.metadata.name}" for p in listed.items}
            for key in [k for k in handler.serving if k not in known]:
                asyncio.run_coroutine_threadsafe(handler._stop(key), loop).result()
            clusters = {ray_dashboard.cluster_of(p) for p in listed.items}
            for key in [k for k in handler.dashboards if k not in clusters]:
                loop.call_soon_threadsafe(handler.forget_dashboard, key)
            stream = watch.Watch().stream(core.list_pod_for_all_namespaces,
                                          resource_version=listed.metadata.resource_version,
                                          timeout_seconds=WATCH_TIMEOUT_S)
            for event in stream:
                if stopping.is_set():
                    return
                asyncio.run_coroutine_threadsafe(handler.on_event(event["type"], event["object"]), loop).result()
        except Exception as exc:  # noqa: BLE001 - the API server restarts in fault tests; relist and go on
            log.warning("pod watch ended (%s); relisting", exc)
            time.sleep(1)


async def _health_server(port: int) -> asyncio.Server:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
        await writer.drain()
        writer.close()

    return await asyncio.start_server(answer, sock=listening_socket(HOST, "127.0.0.1", port))


async def serve(cfg: dict[str, Any]) -> None:
    relays = [Relay(**r) for r in cfg["relays"]]
    servers = [await start_relay(r) for r in relays]
    servers.append(await _health_server(cfg["health_port"]))
    if cfg.get("egress_socket"):
        servers.append(await start_egress_proxy(cfg["egress_socket"], cfg["netns"]))
    core = client.CoreV1Api(kube_config.new_client_from_config(config_file=cfg["kubeconfig"]))
    if cfg.get("service_proxy_port"):
        servers.append(await start_service_proxy(core, cfg["service_proxy_port"], cfg["netns"]))
    handler = StandIns(core, cfg["netns"], Path(cfg["file_sd"]))
    stopping = threading.Event()
    watcher = threading.Thread(target=_watch_pods, args=(core, asyncio.get_running_loop(), handler, stopping),
                               daemon=True)
    watcher.start()
    log.info("data plane up: netns %s, %d relay(s), health on 127.0.0.1:%d", cfg["netns"], len(relays),
             cfg["health_port"])
    try:
        await asyncio.Event().wait()
    finally:
        stopping.set()
        for server in servers:
            server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description="gpupoc sim data plane (started by `gpupoc sim up`)")
    parser.add_argument("--config", required=True, help="JSON written by `gpupoc sim up`")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        asyncio.run(serve(json.loads(Path(args.config).read_text())))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

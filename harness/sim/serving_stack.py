"""The sim's serving stack: a network namespace, kube-proxy in it, the data plane process, the metrics adapter.

Services route like on a real node: the real kube-proxy (nftables mode) programs the sim's network
namespace from EndpointSlices, and requests to a Service IP made inside that namespace reach the
model-server stand-ins on the pod IPs that kube-proxy picked. The HorizontalPodAutoscaler of the real
controller-manager reads Prometheus through an external-metrics adapter registered as an APIService.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import sys
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from harness.cluster.apply import apply_objects
from harness.sim import files, netns, pki
from harness.sim.components import POD_CIDR, SERVICE_CIDR, Component, Layout, binary
from harness.sim.config import Ports
from harness.sim.nodes import NODE_NAME_PREFIX

# Inside the namespace kube-proxy keeps its usual ports; the host reaches them through the data plane's relays.
KUBE_PROXY_HEALTH = 10256
KUBE_PROXY_METRICS = 10249
# The model servers' series the HPA may scale on, as external metrics (':' becomes '_': vllm_num_requests_waiting),
# summed over the series the HPA's selector picks in its namespace.
EXTERNAL_METRICS = ("vllm:num_requests_waiting", "vllm:num_requests_running")
ADAPTER_SERVICE = "gpupoc-metrics-adapter"
# kube-proxy needs a Node to run on (it waits for it); it plays the first simulated GPU node's.
KUBE_PROXY_NODE = f"{NODE_NAME_PREFIX}0"
# Where a client in the namespace (probe, load generator) comes from: an address of the pod range that kwok,
# which hands pod IPs out in order from the bottom, does not reach.
CLIENT_IP = "10.244.255.254"


def netns_name(ports: Ports) -> str:
    return netns.name_for(ports.base)


def file_sd(layout: Layout) -> Path:
    """Prometheus's file-based discovery of the stand-ins' 127.0.0.1 metrics ports (written by the data plane)."""
    return layout.root / "model-servers.json"


def prepare(layout: Layout, ports: Ports, extra_relays: list[dict[str, Any]] | None = None,
            egress_socket: Path | None = None) -> None:
    """The namespace (pod and Service ranges local to its loopback) and the data plane's configuration; with real
    nodes, their kubelets' health relays and the API server's egress socket."""
    name = netns_name(ports)
    netns.create(name, _network(POD_CIDR), SERVICE_CIDR, CLIENT_IP)
    relays = [
        {"listen_ns": name, "listen_port": ports.apiserver, "target_ns": "host", "target_port": ports.apiserver},
        {"listen_ns": "host", "listen_port": ports.kai_podgroupcontroller_health, "target_ns": name,
         "target_port": ports.kai_podgroupcontroller_health},  # KAI's pod-group controller runs in the namespace
        {"listen_ns": "host", "listen_port": ports.kube_proxy_health, "target_ns": name,
         "target_port": KUBE_PROXY_HEALTH},
        {"listen_ns": "host", "listen_port": ports.kube_proxy_metrics, "target_ns": name,
         "target_port": KUBE_PROXY_METRICS},
        *(extra_relays or []),
    ]
    config = {"kubeconfig": str(layout.component_kubeconfig("dataplane")), "netns": name,
              "file_sd": str(file_sd(layout)), "health_port": ports.dataplane_health, "relays": relays,
              "egress_socket": str(egress_socket) if egress_socket else None,
              "service_proxy_port": ports.service_proxy}
    (layout.root / "dataplane.json").write_text(json.dumps(config, indent=2))
    file_sd(layout).write_text("[]")
    (layout.root / "metrics-adapter-rules.yaml").write_text(yaml.safe_dump({"metrics": [
        {"name": name.replace(":", "_"), "query": f'sum({name}{{namespace="{{{{.Namespace}}}}", {{{{.Selector}}}}}})'}
        for name in EXTERNAL_METRICS]}))
    ca = pki.KeyPair(layout.pki / "gpupoc-sim-ca.crt", layout.pki / "gpupoc-sim-ca.key")
    pki.make_serving_cert(ca, layout.pki, "metrics-adapter", dns=("localhost", f"{ADAPTER_SERVICE}.kube-system.svc"))


def teardown(ports: Ports) -> None:
    netns.delete(netns_name(ports))


def _network(cidr: str) -> str:
    """'10.244.0.1/16' -> '10.244.0.0/16' (the route wants the network address)."""
    return str(ipaddress.ip_network(cidr, strict=False))


def components(layout: Layout, ports: Ports, cluster_cidr: str = POD_CIDR) -> list[Component]:
    """The data plane (with the API server); kube-proxy (once the nodes exist: it waits for its own) and the
    metrics adapter (after Prometheus). `cluster_cidr`: every pod address (kwok's, and the real nodes' with them)."""
    return [
        Component("sim-dataplane", (
            sys.executable, "-m", "harness.sim.dataplane", f"--config={layout.root / 'dataplane.json'}",
        ), f"http://127.0.0.1:{ports.dataplane_health}/healthz", ports.dataplane_health,
            known_version="gpupoc sim data plane (model-server stand-ins: simulated)"),
        Component("kube-proxy", (
            binary("kube-proxy"), f"--kubeconfig={layout.component_kubeconfig('kube-proxy')}",
            "--proxy-mode=nftables", f"--hostname-override={KUBE_PROXY_NODE}",
            "--bind-address=127.0.0.1",  # its node IP: no Node object to wait for
            f"--cluster-cidr={_network(cluster_cidr)}",
            f"--healthz-bind-address=127.0.0.1:{KUBE_PROXY_HEALTH}",
            f"--metrics-bind-address=127.0.0.1:{KUBE_PROXY_METRICS}",
            "--conntrack-max-per-core=0",  # leave the kernel's conntrack table alone
            "--config-sync-period=15m",
        ), f"http://127.0.0.1:{ports.kube_proxy_health}/livez", ports.kube_proxy_health, netns=netns_name(ports)),
        Component("metrics-adapter", (
            binary("gpupoc-metrics-adapter"), f"--rules={layout.root / 'metrics-adapter-rules.yaml'}",
            f"--prometheus-url=http://127.0.0.1:{ports.prometheus}", f"--secure-port={ports.metrics_adapter}",
            "--bind-address=127.0.0.1", f"--tls-cert-file={layout.pki / 'metrics-adapter.crt'}",
            f"--tls-private-key-file={layout.pki / 'metrics-adapter.key'}",
            f"--kubeconfig={layout.component_kubeconfig('metrics-adapter')}",
        ), f"https://127.0.0.1:{ports.metrics_adapter}/healthz", ports.metrics_adapter,
            known_version="gpupoc-metrics-adapter (sigs.k8s.io/custom-metrics-apiserver v1.36.0)"),
    ]


def register_adapter(api: client.ApiClient, layout: Layout, ports: Ports) -> None:
    """external.metrics.k8s.io served by the adapter on 127.0.0.1: an APIService on an ExternalName Service (the
    aggregator dials <externalName>:<APIService port> and checks the name <service>.<namespace>.svc)."""
    ca = base64.b64encode((layout.pki / "gpupoc-sim-ca.crt").read_bytes()).decode()
    apply_objects(api, [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": ADAPTER_SERVICE, "namespace": "kube-system"},
         "spec": {"type": "ExternalName", "externalName": "127.0.0.1"}},
        {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
         "metadata": {"name": "v1beta1.external.metrics.k8s.io"},
         "spec": {"group": "external.metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100,
                  "versionPriority": 100, "caBundle": ca,
                  "service": {"name": ADAPTER_SERVICE, "namespace": "kube-system", "port": ports.metrics_adapter}}}])


def extra_ports(ports: Ports) -> dict[str, int]:
    return {"kube-proxy metrics relay": ports.kube_proxy_metrics, "service proxy": ports.service_proxy}


def scrape_jobs(layout: Layout, ports: Ports) -> list[dict[str, Any]]:
    """kube-proxy through its relay; every stand-in on its 127.0.0.1 port (never on a pod IP)."""
    return [
        files.http_job("kube-proxy", ports.kube_proxy_metrics),
        # The series carry their own pod/namespace labels. Every 2 s (the rest: 5 s): the HPA and the latency
        # cross-check read these, and a stand-in answers /metrics from memory.
        {"job_name": "model-servers", "honor_labels": True, "scrape_interval": "2s",
         "file_sd_configs": [{"files": [str(file_sd(layout))], "refresh_interval": "2s"}]},
    ]

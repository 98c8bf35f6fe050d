"""The scheduler stack on the sim: Kueue, Volcano, KubeRay, KAI-Scheduler (+ kube-state-metrics), as real controllers.

Each runs out of cluster with the sim's kubeconfig, leader election off, on its own 127.0.0.1
ports. CRDs come from the controllers' own Go modules (the module cache), never from this repo.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from harness.cluster.apply import apply_objects
from harness.core.errors import ConfigError
from harness.sim import crds, files, kai_sharing, karpenter, kueue, pki
from harness.core import paths
from harness.sim.components import CLIENT_RATE, Component, Layout, binary
from harness.sim.config import Ports
from harness.config.reference_schedulers import VOLCANO_SCHEDULER_CONF
from harness.config.versions import Pins, load_pins

# What the POC needs; the job-flow controllers wait for CRDs (flow.volcano.sh) the sim does not install.
VOLCANO_CONTROLLERS = "job-controller,pg-controller,queue-controller,gc-controller"


def crd_sources(pins: Pins) -> dict[str, tuple[tuple[str, str, str], ...]]:
    """scheduler -> (module, pinned version, CRD directory in the module) of each of its CRD directories."""
    return {
        "kueue": (("sigs.k8s.io/kueue", pins.kueue, "config/components/crd/bases"),),
        "volcano": (("volcano.sh/volcano", pins.volcano, "config/crd/volcano/bases"),),
        "kuberay": (("github.com/ray-project/kuberay/ray-operator", pins.kuberay, "config/crd/bases"),),
        "kai": ((pins.kai_scheduler_module, pins.kai_scheduler, "deployments/kai-scheduler/crds"),),
        "karpenter": (("sigs.k8s.io/karpenter", pins.karpenter, "pkg/apis/crds"),
                      ("sigs.k8s.io/karpenter", pins.karpenter, "kwok/apis/crds")),
    }


KUEUE_WEBHOOKS = ("sigs.k8s.io/kueue", "config/components/webhook/manifests.yaml")
# Namespaces KAI's scheduler and binder work in (its own, and where it would put GPU-sharing reservation pods).
KAI_NAMESPACES = ("kai-scheduler", "kai-resource-reservation")
KAI_SCHEDULER_NAME = "kai-scheduler"
# KAI's pod-grouper puts a workload without a queue label in `default-queue`; KAI's quick start creates it
# under a parent queue. Quota 0, unlimited: it only borrows what no other queue uses.
KAI_DEFAULT_QUEUES = (("default-parent-queue", None), ("default-queue", "default-parent-queue"))


def _module_dir(scheduler_module: str, pin: str) -> Path:
    return crds.module_dir(scheduler_module, pin, paths.build_root())


# What the suites read of kube-state-metrics: at 10,000 pods (the scale suite) the rest would only be load.
KUBE_STATE_RESOURCES = "pods,jobs"
KUBE_STATE_METRICS = ("kube_pod_status_phase", "kube_pod_start_time", "kube_pod_completion_time",
                      "kube_pod_container_resource_requests", "kube_pod_container_state_started",
                      "kube_pod_deletion_timestamp", "kube_job_status_succeeded")


def components(layout: Layout, ports: Ports, schedulers: tuple[str, ...], netns: str | None = None) -> list[Component]:
    """The processes of the requested schedulers, plus kube-state-metrics whenever any is asked for; `netns`: the
    sim's network namespace, where a process that binds a fixed host port runs (so several sims share a host)."""
    pins = load_pins()
    result: list[Component] = []
    if "kai" in schedulers:
        result += kai_components(layout, ports, pins.kai_scheduler, netns)
    if "kueue" in schedulers:
        result.append(Component("kueue", (
            binary("kueue"), f"--config={layout.root / 'kueue-config.yaml'}",
            f"--kubeconfig={layout.component_kubeconfig('kueue')}",
            "--feature-gates=VisibilityOnDemand=false",  # its API server needs certs under /visibility; not used
        ), f"http://127.0.0.1:{ports.kueue_health}/readyz", ports.kueue_health, known_version=f"kueue {pins.kueue}"))
    if "volcano" in schedulers:
        result.append(Component("volcano-scheduler", (
            binary("volcano-scheduler"), f"--kubeconfig={layout.component_kubeconfig('volcano')}",
            f"--scheduler-conf={layout.root / 'volcano-scheduler.conf'}", "--scheduler-name=volcano",
            "--default-queue=default", "--leader-elect=false", "--enable-healthz=true", "--enable-metrics=true",
            f"--healthz-address=127.0.0.1:{ports.volcano_scheduler_health}",
            f"--listen-address=127.0.0.1:{ports.volcano_scheduler_metrics}",
            f"--cache-dump-dir={layout.root}",
        ), f"http://127.0.0.1:{ports.volcano_scheduler_health}/healthz", ports.volcano_scheduler_health,
            known_version=f"volcano {pins.volcano}"))
        result.append(Component("volcano-controller-manager", (
            binary("volcano-controller-manager"), f"--kubeconfig={layout.component_kubeconfig('volcano')}",
            f"--controllers={VOLCANO_CONTROLLERS}", "--scheduler-name=volcano", "--leader-elect=false", "--enable-healthz=true", "--enable-metrics=true",
            *CLIENT_RATE,  # its default 50 requests/s would pace the scale suite's 50 jobs/s
            f"--healthz-address=127.0.0.1:{ports.volcano_controllers_health}",
            f"--listen-address=127.0.0.1:{ports.volcano_controllers_metrics}",
        ), f"http://127.0.0.1:{ports.volcano_controllers_health}/healthz", ports.volcano_controllers_health,
            known_version=f"volcano {pins.volcano}"))
    if "kuberay" in schedulers:
        result.append(Component("kuberay-operator", (
            binary("ray-operator"), f"--kubeconfig={layout.component_kubeconfig('kuberay')}",
            "--enable-leader-election=false", "--enable-metrics=true",
            f"--metrics-addr=127.0.0.1:{ports.kuberay_metrics}",
            f"--health-probe-bind-address=127.0.0.1:{ports.kuberay_health}",
        ), f"http://127.0.0.1:{ports.kuberay_health}/readyz", ports.kuberay_health,
            known_version=f"kuberay {pins.kuberay}",
            # its dashboard client (Go's default transport) sends http:// requests to the Ray heads' Services
            # through the data plane's proxy; the API server (https, 127.0.0.1) is never proxied
            env=(("HTTP_PROXY", f"http://127.0.0.1:{ports.service_proxy}"),) if netns else ()))
    if "karpenter" in schedulers:
        result.append(karpenter.component(layout, ports, pins.karpenter))
    if schedulers:
        result.append(Component("kube-state-metrics", (
            binary("kube-state-metrics"), f"--kubeconfig={layout.component_kubeconfig('kube-state-metrics')}",
            "--host=127.0.0.1", f"--port={ports.kube_state_metrics}",
            "--telemetry-host=127.0.0.1", f"--telemetry-port={ports.kube_state_metrics_telemetry}",
            f"--resources={KUBE_STATE_RESOURCES}", f"--metric-allowlist={','.join(KUBE_STATE_METRICS)}",
        ), f"http://127.0.0.1:{ports.kube_state_metrics}/healthz", ports.kube_state_metrics,
            known_version=f"kube-state-metrics {pins.kube_state_metrics}"))
    return result


def kai_components(layout: Layout, ports: Ports, version: str, netns: str | None = None) -> list[Component]:
    """KAI-Scheduler's five processes, its admission webhook (GPU sharing) and the simulated device side of its
    GPU reservations. They read the kubeconfig from KUBECONFIG (not all parse --kubeconfig); the queue and
    pod-group validation webhooks are off, as nothing here needs them."""
    env = (("KUBECONFIG", str(layout.component_kubeconfig("kai-scheduler"))),)
    known = f"kai-scheduler {version}"

    def metrics(port: int) -> str:
        return f"http://127.0.0.1:{port}/metrics"

    def ready(port: int) -> str:
        return f"http://127.0.0.1:{port}/readyz"

    def kai(name: str) -> str:
        return binary(name, "gpupoc sim build --with kai")

    return [
        Component("kai-queuecontroller", (
            kai("kai-queuecontroller"), "--leader-elect=false", "--enable-webhook=false",
            f"--metrics-listen-address=127.0.0.1:{ports.kai_queuecontroller_metrics}",
        ), metrics(ports.kai_queuecontroller_metrics), ports.kai_queuecontroller_metrics, known_version=known, env=env),
        Component("kai-podgroupcontroller", (
            kai("kai-podgroupcontroller"), "--leader-elect=false", "--enable-podgroup-webhook=false",
            f"--metrics-bind-address=127.0.0.1:{ports.kai_podgroupcontroller_metrics}",
            f"--health-probe-bind-address=127.0.0.1:{ports.kai_podgroupcontroller_health}",
        ), ready(ports.kai_podgroupcontroller_health), ports.kai_podgroupcontroller_health, known_version=known,
            env=env, netns=netns),  # v0.12.0 ignores --metrics-bind-address and binds :8080: in the namespace,
        #                            reached through the data plane's relays (API server in, health probe out)
        Component("kai-podgrouper", (
            kai("kai-podgrouper"), "--leader-elect=false", f"--scheduler-name={KAI_SCHEDULER_NAME}",
            f"--metrics-bind-address=127.0.0.1:{ports.kai_podgrouper_metrics}",
            f"--health-probe-bind-address=127.0.0.1:{ports.kai_podgrouper_health}",
        ), ready(ports.kai_podgrouper_health), ports.kai_podgrouper_health, known_version=known, env=env),
        Component("kai-binder", (
            kai("kai-binder"), "--leader-elect=false", f"--scheduler-name={KAI_SCHEDULER_NAME}",
            f"--metrics-bind-address=127.0.0.1:{ports.kai_binder_metrics}",
            f"--health-probe-bind-address=127.0.0.1:{ports.kai_binder_health}",
        ), metrics(ports.kai_binder_metrics), ports.kai_binder_metrics, known_version=known, env=env),
        *kai_sharing.components(layout, ports, kai("kai-admission"), KAI_SCHEDULER_NAME, known, env),
        Component("kai-scheduler", (
            kai("kai-scheduler"), "--leader-elect=false", f"--scheduler-name={KAI_SCHEDULER_NAME}",
            f"--namespace={KAI_NAMESPACES[0]}", f"--listen-address=127.0.0.1:{ports.kai_scheduler_metrics}",
            f"--plugin-server-port={ports.kai_scheduler_plugins}",  # binds all interfaces: KAI takes a port only
            "--update-pod-eviction-condition",  # an evicted pod says why (DisruptionTarget) before KAI deletes it
        ), metrics(ports.kai_scheduler_metrics), ports.kai_scheduler_metrics, known_version=known, env=env),
    ]


def extra_ports(ports: Ports, schedulers: tuple[str, ...]) -> dict[str, int]:
    """Ports the stack listens on besides each component's health port (checked free before start)."""
    wanted: dict[str, int] = {}
    if "kueue" in schedulers:
        wanted |= {"kueue webhook": ports.kueue_webhook, "kueue metrics": ports.kueue_metrics}
    if "volcano" in schedulers:
        wanted |= {"volcano metrics": ports.volcano_scheduler_metrics,
                   "volcano controllers metrics": ports.volcano_controllers_metrics}
    if "kuberay" in schedulers:
        wanted |= {"kuberay metrics": ports.kuberay_metrics}
    if "karpenter" in schedulers:
        wanted |= {"karpenter metrics": ports.karpenter_metrics}
    if "kai" in schedulers:
        wanted |= {"kai admission webhook": ports.kai_admission_webhook,
                   "kai admission metrics": ports.kai_admission_metrics,
                   "kai scheduler plugins": ports.kai_scheduler_plugins,
                   "kai binder health": ports.kai_binder_health,
                   "kai podgrouper metrics": ports.kai_podgrouper_metrics,
                   "kai podgroupcontroller metrics": ports.kai_podgroupcontroller_metrics}
    return wanted


def scrape_jobs(ports: Ports, schedulers: tuple[str, ...], token_path: Path) -> list[dict[str, Any]]:
    """Prometheus jobs for the stack: Kueue over HTTPS with a bearer token, the rest plain HTTP."""
    jobs = []
    if "kueue" in schedulers:
        jobs.append(files.https_job("kueue", ports.kueue_metrics, token_path))
    if "volcano" in schedulers:
        jobs += [files.http_job("volcano-scheduler", ports.volcano_scheduler_metrics),
                 files.http_job("volcano-controller-manager", ports.volcano_controllers_metrics)]
    if "kuberay" in schedulers:
        jobs.append(files.http_job("kuberay-operator", ports.kuberay_metrics))
    if "karpenter" in schedulers:
        jobs.append(files.http_job("karpenter", ports.karpenter_metrics))
    if "kai" in schedulers:
        jobs += [files.http_job("kai-scheduler", ports.kai_scheduler_metrics),
                 files.http_job("kai-queuecontroller", ports.kai_queuecontroller_metrics)]
    if schedulers:
        jobs.append(files.http_job("kube-state-metrics", ports.kube_state_metrics))
    return jobs


def write_configs(layout: Layout, ports: Ports, schedulers: tuple[str, ...]) -> None:
    """Configuration files and certificates the controllers read at start."""
    if "kueue" in schedulers:
        cert_dir = layout.pki / "kueue-webhook"
        cert_dir.mkdir(exist_ok=True)
        ca = pki.KeyPair(layout.pki / "gpupoc-sim-ca.crt", layout.pki / "gpupoc-sim-ca.key")
        serving = pki.make_serving_cert(ca, cert_dir, "tls")
        _install_kueue_metrics_cert(serving)
        config = kueue.configuration(ports.kueue_webhook, ports.kueue_metrics, ports.kueue_health, cert_dir)
        (layout.root / "kueue-config.yaml").write_text(yaml.safe_dump(config))
    if "volcano" in schedulers:
        (layout.root / "volcano-scheduler.conf").write_text(VOLCANO_SCHEDULER_CONF)
    if "kai" in schedulers:
        kai_sharing.prepare(layout)


def _install_kueue_metrics_cert(serving: pki.KeyPair) -> None:
    target = kueue.METRICS_CERT_DIR
    try:
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(serving.cert, target / "tls.crt")
        shutil.copyfile(serving.key, target / "tls.key")
        (target / "tls.key").chmod(0o600)
    except OSError as exc:
        raise ConfigError(f"Kueue reads its metrics certificate from {target} (fixed in Kueue): make that "
                          f"directory writable by this user, or drop kueue from --schedulers ({exc})") from exc


def install_crds(api: client.ApiClient, schedulers: tuple[str, ...]) -> None:
    sources = crd_sources(load_pins())
    docs: list[dict[str, Any]] = []
    for scheduler in schedulers:
        for module, version, sub in sources.get(scheduler, ()):
            docs += crds.cached_documents(module, version, sub, paths.build_root())
    crds.apply_crds(api, docs)


def create_kai_defaults(api: client.ApiClient) -> None:
    """KAI's namespaces, its default queue and its reservation pods' ServiceAccount, before its processes start."""
    objects: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
                                     for name in KAI_NAMESPACES]
    unlimited = {"quota": 0, "limit": -1, "overQuotaWeight": 1}
    for name, parent in KAI_DEFAULT_QUEUES:
        spec: dict[str, Any] = {"resources": {r: dict(unlimited) for r in ("cpu", "gpu", "memory")}}
        if parent:
            spec["parentQueue"] = parent
        objects.append({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name},
                        "spec": spec})
    # the binder's reservation pods run as this ServiceAccount (--resource-reservation-service-account)
    objects.append({"apiVersion": "v1", "kind": "ServiceAccount",
                    "metadata": {"name": KAI_NAMESPACES[1], "namespace": KAI_NAMESPACES[1]}})
    apply_objects(api, objects)


def register_kueue_webhooks(api: client.ApiClient, layout: Layout, ports: Ports, version: str | None = None) -> None:
    """After Kueue serves: its webhooks by URL, so a queued Job is suspended at creation (those of `version`'s
    manifest; the pinned one's by default)."""
    module, manifest = KUEUE_WEBHOOKS
    shipped = list(yaml.safe_load_all((_module_dir(module, version or load_pins().kueue) / manifest).read_text()))
    ca_pem = (layout.pki / "gpupoc-sim-ca.crt").read_bytes()
    apply_objects(api, kueue.webhook_configurations([d for d in shipped if d], ports.kueue_webhook, ca_pem))


def register_kai_webhooks(api: client.ApiClient, layout: Layout, ports: Ports) -> None:
    """After KAI's admission serves: its pod webhooks by URL, so a fractional pod gets what the binder needs."""
    ca_pem = (layout.pki / "gpupoc-sim-ca.crt").read_bytes()
    apply_objects(api, kai_sharing.webhook_configurations(ports.kai_admission_webhook, ca_pem,
                                                          ("kube-system", KAI_NAMESPACES[0])))

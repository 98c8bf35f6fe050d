"""Kueue out of cluster: its configuration, and its webhooks registered by URL on 127.0.0.1.

Without kube-proxy the API server cannot reach a Service-backed webhook, so the webhook
configurations shipped in Kueue's module are rewritten to `https://127.0.0.1:<port>/<path>`
with the sim's CA bundle, keeping only the webhooks of the integrations the sim enables.
"""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

from harness.config.reference_schedulers import KUEUE_SETTINGS, merged
from harness.sim import dra
from harness.sim.nodes import GPU_RESOURCE

# (apiGroup, resource) pairs whose webhooks the enabled integrations and Kueue's own API need.
WEBHOOK_RESOURCES = {("batch", "jobs"), ("ray.io", "rayjobs"), ("ray.io", "rayclusters"), ("", "pods"),
                     ("apps", "deployments")}
# managedJobsNamespaceSelector stays Kueue's default (every namespace but kube-system and kueue-system): Kueue v0.19
# applies it to every integration, batch Jobs included, so narrowing it to the serving namespaces would leave the
# training namespaces' Jobs unmanaged. The pod-based webhooks are narrowed instead (below).
# Kueue's pod-based integrations (a model service's Deployment and its pods) act only in namespaces with this label:
# its pod webhook never sees a training pod.
SERVING_NAMESPACES = {"matchLabels": {"gpupoc.io/serving": "true"}}
POD_BASED = {("", "pods"), ("apps", "deployments")}
KUEUE_GROUP = "kueue.x-k8s.io"
MULTIKUEUE_WORKER_LOST_TIMEOUT = "15s"
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")  # fixed in Kueue's main.go when internal certs are off


def configuration(webhook_port: int, metrics_port: int, health_port: int, cert_dir: Path) -> dict[str, Any]:
    """The POC's reference settings (harness/config/reference_schedulers.py) for a Kueue running as a process."""
    return merged({
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        # MultiKueue (operations.multicluster): the workers' kubeconfigs are Secrets in this namespace (out of a pod,
        # Kueue has no ServiceAccount namespace to take); a worker unreachable for 15 s is lost and its jobs are
        # dispatched again (Kueue's default waits 15 min; the case's threshold on a real cluster is its own)
        "namespace": "kueue-system",
        "multiKueue": {"workerLostTimeout": MULTIKUEUE_WORKER_LOST_TIMEOUT, "gcInterval": "1m"},
        "internalCertManagement": {"enable": False},
        # DRA (KueueDRAIntegration, on by default since v0.18): a claim's devices of the sim's GPU DeviceClass
        # count as the device plugin's GPUs, so the tenants' GPU quotas hold for both (harness/sim/dra.py)
        "resources": {"deviceClassMappings": [{"name": GPU_RESOURCE, "deviceClassNames": [dra.DEVICE_CLASS]}]},
    }, KUEUE_SETTINGS)


def _wanted(webhook: dict[str, Any]) -> bool:
    pairs = {(group, resource) for rule in webhook.get("rules", [])
             for group in rule.get("apiGroups", []) for resource in rule.get("resources", [])}
    return any(g == KUEUE_GROUP or (g, r) in WEBHOOK_RESOURCES for g, r in pairs)


def webhook_configurations(shipped: list[dict[str, Any]], port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    """Kueue's webhook configurations pointed at 127.0.0.1:`port`, only for what the sim enables."""
    ca_bundle = base64.b64encode(ca_pem).decode()
    result = []
    for doc in shipped:
        if doc.get("kind") not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            continue
        config = copy.deepcopy(doc)
        config["metadata"] = {"name": f"kueue-{doc['metadata']['name']}"}
        config["webhooks"] = [_by_url(w, port, ca_bundle) for w in doc.get("webhooks", []) if _wanted(w)]
        result.append(config)
    return result


def _by_url(webhook: dict[str, Any], port: int, ca_bundle: str) -> dict[str, Any]:
    rewritten = copy.deepcopy(webhook)
    path = webhook["clientConfig"]["service"]["path"]
    rewritten["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}
    pairs = {(group, resource) for rule in webhook.get("rules", [])
             for group in rule.get("apiGroups", []) for resource in rule.get("resources", [])}
    if pairs & POD_BASED:
        rewritten["namespaceSelector"] = copy.deepcopy(SERVING_NAMESPACES)
    return rewritten

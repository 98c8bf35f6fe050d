"""KAI's GPU sharing on the sim: its admission webhook with sharing on, registered by URL on 127.0.0.1, and the
simulated device side of its reservation pods (harness/sim/gpu_reservations.py).

The webhook is what a KAI install runs (the operator's `admission` operand, `--gpu-sharing-enabled` when
gpuSharing is on): it validates fractional requests and gives each fractional pod the
`runai/shared-gpu-configmap` annotation the binder needs. The operator registers it for every pod outside
kube-system and KAI's namespace; the sim narrows it to pods with a KAI queue label (KAI's podLabelSelector
setting), so no other backend's pod creation depends on it.
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Any

from harness.sim import pki
from harness.sim.components import Component, Layout
from harness.sim.config import Ports

QUEUE_LABEL = "kai.scheduler/queue"
WEBHOOK_NAME = "gpupoc-kai-admission"
# controller-runtime's default certificate directory under TMPDIR (KAI's admission has no flag for it)
CERT_SUBDIR = ("k8s-webhook-server", "serving-certs")


def tmp_dir(layout: Layout) -> Path:
    return layout.root / "kai-admission"


def prepare(layout: Layout) -> None:
    """The webhook's serving certificate, signed by the sim's CA, where the admission process looks for it."""
    cert_dir = tmp_dir(layout).joinpath(*CERT_SUBDIR)
    cert_dir.mkdir(parents=True, exist_ok=True)
    ca = pki.KeyPair(layout.pki / "gpupoc-sim-ca.crt", layout.pki / "gpupoc-sim-ca.key")
    pki.make_serving_cert(ca, cert_dir, "tls")


def components(layout: Layout, ports: Ports, admission: str, scheduler_name: str, known: str,
               env: tuple[tuple[str, str], ...]) -> list[Component]:
    return [
        Component("kai-admission", (
            admission, "--leader-elect=false", f"--scheduler-name={scheduler_name}", "--gpu-sharing-enabled=true",
            "--gpu-pod-runtime-class-name=",  # no runtime class: kwok runs no container
            f"--webhook-addr={ports.kai_admission_webhook}",  # binds all interfaces: KAI takes a port only
            f"--metrics-bind-address=127.0.0.1:{ports.kai_admission_metrics}",
            f"--health-probe-bind-address=127.0.0.1:{ports.kai_admission_health}",
        ), f"http://127.0.0.1:{ports.kai_admission_health}/readyz", ports.kai_admission_health, known_version=known,
            env=(*env, ("TMPDIR", str(tmp_dir(layout))))),
        Component("kai-gpu-reservations", (
            sys.executable, "-m", "harness.sim.gpu_reservations", f"--health-port={ports.kai_reservations_health}",
        ), f"http://127.0.0.1:{ports.kai_reservations_health}/healthz", ports.kai_reservations_health,
            known_version="gpupoc GPU reservations (the device side of KAI's GPU sharing: simulated)", env=env),
    ]


def webhook_configurations(port: int, ca_pem: bytes, excluded_namespaces: tuple[str, ...]) -> list[dict[str, Any]]:
    """KAI's pod webhooks (mutate on create, validate on create and update) by URL, failing closed as KAI's."""
    bundle = base64.b64encode(ca_pem).decode()

    def hook(path: str, operations: list[str]) -> dict[str, Any]:
        return {"name": f"{path.strip('/').split('-')[0]}.{WEBHOOK_NAME}.kai.scheduler",
                "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
                "clientConfig": {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle},
                "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                                            "values": list(excluded_namespaces)}]},
                "objectSelector": {"matchExpressions": [{"key": QUEUE_LABEL, "operator": "Exists"}]},
                "rules": [{"operations": operations, "apiGroups": [""], "apiVersions": ["v1"],
                           "resources": ["pods"], "scope": "Namespaced"}]}

    mutate = {**hook("/mutate--v1-pod", ["CREATE"]), "reinvocationPolicy": "IfNeeded"}
    return [{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
             "metadata": {"name": WEBHOOK_NAME}, "webhooks": [mutate]},
            {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
             "metadata": {"name": WEBHOOK_NAME}, "webhooks": [hook("/validate--v1-pod", ["CREATE", "UPDATE"])]}]

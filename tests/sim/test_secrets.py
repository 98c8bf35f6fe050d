"""Secrets stay out: recognisable values planted where a run can meet them (a Secret in a tenant namespace, a
Prometheus bearer token, a kubeconfig with a token and a client key, a secret-named environment variable) never
appear in the record, JUnit, the terminal or the comparison page of a run that fails and dumps events and logs."""

from __future__ import annotations

import base64
import datetime
import os
import subprocess
import sys
import uuid
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from kubernetes import client

from harness.config.profile import Profile
from harness.sim import cluster

INNER = '''
import os
from pathlib import Path

from kubernetes import client

from harness.jobs.model import GangJob


def test_fails_and_dumps(api, workloads, queue_model, evidence):
    ev = evidence("training.gang_admission")
    tenant = queue_model.tenants[0]
    workloads.submit(GangJob("leaky", tenant, 1, 1, run_for_s=1))
    client.CoreV1Api(api).create_namespaced_event(tenant.namespace, client.CoreV1Event(
        metadata=client.V1ObjectMeta(generate_name="leak-", labels={{"gpupoc.io/run": "leak"}}),
        involved_object=client.V1ObjectReference(kind="Namespace", name=tenant.namespace, namespace=tenant.namespace),
        reason="Leak", type="Warning", message="the app logged its database secret {secret}"))
    print("environment:", dict(os.environ))
    print("kubeconfig:", Path(os.environ["PLANTED_KUBECONFIG"]).read_text())
    ev.note("the app logged its database secret {secret}")
    assert False, "boom: {secret} and " + os.environ["MY_SERVICE_API_TOKEN"]
'''


def client_key_and_cert() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "planted")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    pem_key = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return (base64.b64encode(pem_key).decode(),
            base64.b64encode(cert.public_bytes(serialization.Encoding.PEM)).decode())


def test_planted_secrets_never_reach_any_output(tmp_path: Path, sim_api: client.ApiClient,
                                                queue_model: Profile) -> None:
    marker = uuid.uuid4().hex[:12]
    secret_value, prometheus_token, env_value = (f"planted-secret-{marker}", f"planted-prom-{marker}",
                                                 f"planted-env-{marker}")
    core = client.CoreV1Api(sim_api)
    namespace = queue_model.tenants[0].namespace
    core.create_namespaced_secret(namespace, client.V1Secret(
        metadata=client.V1ObjectMeta(name=f"db-{marker}"), string_data={"password": secret_value}))
    key_data, cert_data = client_key_and_cert()
    kubeconfig = yaml.safe_load(cluster.layout().kubeconfig.read_text())
    kubeconfig["users"][0]["user"].update({"client-key-data": key_data, "client-certificate-data": cert_data})
    token = kubeconfig["users"][0]["user"]["token"]
    planted_kubeconfig = tmp_path / "kubeconfig"
    planted_kubeconfig.write_text(yaml.safe_dump(kubeconfig))
    (tmp_path / "test_leak.py").write_text(INNER.format(secret=secret_value))
    env = {**os.environ, "GPUPOC_IDENTITY": "admin",  # its planting (an Event) is an admin's, not the runner's
           "GPUPOC_PROMETHEUS_TOKEN": prometheus_token, "MY_SERVICE_API_TOKEN": env_value,
           "PLANTED_KUBECONFIG": str(planted_kubeconfig)}
    try:
        run = subprocess.run([sys.executable, "-m", "pytest", "-p", "harness.plugin", "-p", "no:cacheprovider", "-rA",
                              "test_leak.py", "--run-id=leak", f"--reports-dir={tmp_path}", "--backends=default",
                              f"--kubeconfig={planted_kubeconfig}", f"--prometheus-url={cluster.prometheus_url()}",
                              "--queue-model=keep"], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=300)
        compare = subprocess.run([sys.executable, "-m", "harness.cli", "compare", str(tmp_path / "leak" / "record.json"),
                                  "--output", str(tmp_path / "comparison.html")], env=env, capture_output=True,
                                 text=True, timeout=120)
    finally:
        core.delete_namespaced_secret(f"db-{marker}", namespace)
    assert run.returncode == 1 and "boom: [REDACTED]" in run.stdout, run.stdout[-3000:]
    outputs = {"terminal": run.stdout + run.stderr + compare.stdout + compare.stderr,
               **{name: (tmp_path / "leak" / name).read_text() for name in ("record.html", "record.json", "junit.xml")},
               "comparison.html": (tmp_path / "comparison.html").read_text()}
    record = outputs["record.json"]
    assert "Leak" in record or "leaky" in record, "the failure dumped the events of the run"
    planted = {"Secret value": secret_value, "Prometheus token": prometheus_token, "environment variable": env_value,
               "kubeconfig token": token, "kubeconfig client key": key_data, "kubeconfig client certificate": cert_data}
    leaks = [f"{what} in {where}" for where, text in outputs.items() for what, value in planted.items() if value in text]
    assert not leaks, leaks

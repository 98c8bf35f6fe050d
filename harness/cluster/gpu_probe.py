"""Opt-in, real clusters only: a probe Pod per GPU node runs nvidia-smi and reports what the driver says."""

from __future__ import annotations

from kubernetes import client

from harness.cluster.manifests import dressed
from harness.config.workloads import WorkloadSpec
from harness.core.errors import HarnessError
from harness.cluster.inventory import parse_nvidia_smi
from harness.cluster.wait import wait_for

QUERY = ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv"]


def probe_node(core: client.CoreV1Api, namespace: str, node: str, gpu_resource: str, timeout_s: float,
               workloads: WorkloadSpec) -> list[tuple[str, str, str]]:
    """Run nvidia-smi on `node` in a one-GPU Pod of `namespace` (the profile's probe image and pod defaults); (name,
    driver, memory) per GPU it sees."""
    name = f"gpupoc-probe-{node}"[:63].rstrip("-.")
    core.create_namespaced_pod(namespace, dressed([{
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "gpupoc"}},
        "spec": {"nodeName": node, "restartPolicy": "Never", "containers": [{
            "name": "nvidia-smi", "image": workloads.gpu_probe_image, "command": QUERY,
            "resources": {"limits": {gpu_resource: "1"}}}]}}], workloads)[0])
    try:
        pod = wait_for(core.list_namespaced_pod, f"probe Pod {namespace}/{name}",
                       lambda p: p.status.phase == "Succeeded", failed=lambda p: p.status.phase == "Failed",
                       describe=lambda p: str(p.status.phase), timeout_s=timeout_s, namespace=namespace,
                       field_selector=f"metadata.name={name}")
        rows = parse_nvidia_smi(core.read_namespaced_pod_log(pod.metadata.name, namespace))
        if not rows:
            raise HarnessError(f"probe Pod {namespace}/{name}: nvidia-smi printed no GPU")
        return rows
    finally:
        core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)

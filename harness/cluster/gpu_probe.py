"""Opt-in, real clusters only: a probe Pod per accelerator node runs the driver's own tool (nvidia-smi, amd-smi,
npu-smi: harness/config/accelerators.py) and reports what the driver says."""

from __future__ import annotations

from kubernetes import client

from harness.cluster.manifests import dressed
from harness.config.workloads import WorkloadSpec
from harness.core.errors import HarnessError
from harness.cluster.wait import wait_for
from harness.config.accelerators import Accelerator, ProbeRows


def probe_node(core: client.CoreV1Api, namespace: str, node: str, accelerator: Accelerator, timeout_s: float,
               workloads: WorkloadSpec) -> ProbeRows:
    """Run the accelerator's probe on `node` in a one-device Pod of `namespace` (the profile's probe image and pod
    defaults); (name, driver, memory) per device it sees."""
    name = f"gpupoc-probe-{node}"[:63].rstrip("-.")
    core.create_namespaced_pod(namespace, dressed([{
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "gpupoc"}},
        "spec": {"nodeName": node, "restartPolicy": "Never", "containers": [{
            "name": "probe", "image": workloads.gpu_probe_image, "command": list(accelerator.probe),
            "resources": {"limits": {accelerator.resource: "1"}}}]}}], workloads)[0])
    try:
        pod = wait_for(core.list_namespaced_pod, f"probe Pod {namespace}/{name}",
                       lambda p: p.status.phase == "Succeeded", failed=lambda p: p.status.phase == "Failed",
                       describe=lambda p: str(p.status.phase), timeout_s=timeout_s, namespace=namespace,
                       field_selector=f"metadata.name={name}")
        rows = accelerator.parse_probe(core.read_namespaced_pod_log(pod.metadata.name, namespace))
        if not rows:
            raise HarnessError(f"probe Pod {namespace}/{name}: {accelerator.probe_tool} printed no device")
        return rows
    finally:
        core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)

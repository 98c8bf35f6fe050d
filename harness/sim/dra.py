"""The sim's GPUs as Dynamic Resource Allocation devices (resource.k8s.io/v1, served by default since 1.34).

What a DRA driver's kubelet plugin publishes, the sim publishes itself, under the same names as NVIDIA's DRA driver
(driver and DeviceClass `gpu.nvidia.com`): one ResourceSlice per simulated GPU node (its own pool, owned by the Node,
so it goes with it) listing each GPU with the driver's attributes, and the DeviceClass that selects them. No driver
runs: the scheduler allocates claims from the slices, and a kwok node prepares nothing. Both are labelled simulated.
The sim's nodes also keep the device plugin's `nvidia.com/gpu`: the same GPUs booked two ways, so a case uses one.
"""

from __future__ import annotations

import uuid
from typing import Any

from kubernetes import client

from harness.cluster.apply import dynamic_client
from harness.cluster.inventory import SIMULATED_LABEL
from harness.config.accelerators import NVIDIA
from harness.sim.config import GpuSpec

DRIVER = DEVICE_CLASS = str(NVIDIA.dra_driver)  # the sim publishes its GPUs as NVIDIA's DRA driver would
SELECTOR = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].type == "gpu"'


def resource_slice(node: str, node_uid: str, gpu: GpuSpec) -> dict[str, Any]:
    """The ResourceSlice of `node`'s GPUs: gpu-0..gpu-N-1 with NVIDIA's driver's attributes and memory."""
    driver, cuda = gpu.driver_version, gpu.cuda_version

    def device(index: int) -> dict[str, Any]:
        return {"name": f"gpu-{index}",
                "attributes": {"type": {"string": "gpu"}, "index": {"int": index},
                               "uuid": {"string": f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{node}.{index}.gpupoc')}"},
                               "productName": {"string": gpu.product},
                               "driverVersion": {"version": _semver(driver)},
                               "cudaDriverVersion": {"version": _semver(cuda)}},
                "capacity": {"memory": {"value": f"{gpu.memory}Mi"}}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{DRIVER}", "labels": {SIMULATED_LABEL: "true"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}]},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [device(i) for i in range(gpu.count)]}}


def device_class(expression: str = SELECTOR) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": DEVICE_CLASS, "labels": {SIMULATED_LABEL: "true"}},
            "spec": {"selectors": [{"cel": {"expression": expression}}]}}


def publish(api: client.ApiClient, nodes: list[tuple[str, str]], gpu: GpuSpec) -> None:
    """The DeviceClass (replaced: a sensitivity test may have changed its selector) and the slices of `nodes`
    ((name, uid) pairs)."""
    dynamic = dynamic_client(api)
    try:
        dynamic.resources.get(api_version="resource.k8s.io/v1", kind="DeviceClass").create(body=device_class())
    except client.ApiException as exc:
        if exc.status != 409:
            raise
        set_selector(api, SELECTOR)
    slices = dynamic.resources.get(api_version="resource.k8s.io/v1", kind="ResourceSlice")
    for name, uid in nodes:
        slices.create(body=resource_slice(name, uid, gpu))


def set_selector(api: client.ApiClient, expression: str) -> None:
    """Replace the DeviceClass's selector (the sensitivity test's: one that matches nothing)."""
    dynamic_client(api).resources.get(api_version="resource.k8s.io/v1", kind="DeviceClass").patch(
        name=DEVICE_CLASS, body=device_class(expression), content_type="application/merge-patch+json")


def _semver(version: str) -> str:
    """550.90.07 -> 550.90.7, 12.4 -> 12.4.0: a version attribute must be semantic versioning."""
    parts = [str(int(p)) for p in version.split(".")]
    return ".".join((parts + ["0", "0"])[:3])

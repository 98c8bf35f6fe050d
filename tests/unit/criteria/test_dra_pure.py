"""DRA GPUs' pure parts: a job's claim template and pod template, the sim's ResourceSlice and DeviceClass, Kueue's
mapping of the class onto the GPU quota, and the criterion's reading of pods and claims."""

from __future__ import annotations

import re
from pathlib import Path

from harness.config.profile import Tenant, load_profile
from harness.core.paths import REPO_ROOT
from harness.criteria.training.dra_allocation import count_mismatch, devices_shared, pod_claims, unallocated
from harness.jobs.model import GPU_CLAIM, GangJob
from harness.sim import dra, kueue
from harness.sim.config import GpuSpec

TENANT = Tenant("team-b", "poc-team-b", "team-b-submitter", 1, 8, {})


def test_a_dra_job_claims_its_gpus_from_the_device_class_not_the_device_plugin() -> None:
    job = GangJob("j", TENANT, 2, 4, device_class="gpu.nvidia.com")
    template = job.claim_template()
    assert template is not None and template["metadata"]["name"] == "j-gpus"
    [request] = template["spec"]["spec"]["devices"]["requests"]
    assert request == {"name": GPU_CLAIM, "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                      "allocationMode": "ExactCount", "count": 4}}
    pod = job.pod_template()["spec"]
    assert pod["resourceClaims"] == [{"name": GPU_CLAIM, "resourceClaimTemplateName": "j-gpus"}]
    [container] = pod["containers"]
    assert "nvidia.com/gpu" not in container["resources"]["limits"]
    assert container["resources"]["claims"] == [{"name": GPU_CLAIM}]
    plain = GangJob("p", TENANT, 1, 2)
    assert plain.claim_template() is None and "resourceClaims" not in plain.pod_template()["spec"]


def test_the_sims_slice_lists_each_gpu_with_nvidias_attributes_in_a_pool_of_its_node() -> None:
    body = dra.resource_slice("gpu-node-0", "uid-0", GpuSpec(count=2, driver_version="550.90.07",
                                                              cuda_version="12.4"))
    spec = body["spec"]
    assert spec["driver"] == "gpu.nvidia.com" and spec["nodeName"] == "gpu-node-0"
    assert spec["pool"] == {"name": "gpu-node-0", "generation": 1, "resourceSliceCount": 1}
    assert [d["name"] for d in spec["devices"]] == ["gpu-0", "gpu-1"]
    first = spec["devices"][0]["attributes"]
    assert first["driverVersion"] == {"version": "550.90.7"} and first["cudaDriverVersion"] == {"version": "12.4.0"}
    assert first["index"] == {"int": 0} and first["type"] == {"string": "gpu"}
    assert re.fullmatch(r"GPU-[0-9a-f-]{36}", first["uuid"]["string"])
    assert spec["devices"][1]["attributes"]["uuid"] != first["uuid"]  # each device its own
    assert body["metadata"]["ownerReferences"][0] == {"apiVersion": "v1", "kind": "Node", "name": "gpu-node-0",
                                                      "uid": "uid-0"}  # removed with its node
    assert body["metadata"]["labels"] == {"gpupoc.io/simulated": "true"}
    assert dra.device_class()["spec"]["selectors"][0]["cel"]["expression"].startswith(
        'device.driver == "gpu.nvidia.com"')


def test_kueue_counts_the_sims_dra_gpus_against_the_gpu_quota(tmp_path: Path) -> None:
    assert kueue.configuration(1, 2, 3, tmp_path)["resources"] == {
        "deviceClassMappings": [{"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]}]}
    gpu = load_profile(REPO_ROOT / "profiles" / "sim.yaml").gpu
    assert gpu.dra is not None and (gpu.dra.device_class, gpu.dra.driver) == ("gpu.nvidia.com", "gpu.nvidia.com")
    assert load_profile(REPO_ROOT / "profiles" / "kind.yaml").gpu.dra is None  # a cluster without DRA: SKIP


def pod(name: str, claim: str | None) -> dict[str, object]:
    statuses = [{"name": GPU_CLAIM, "resourceClaimName": claim}] if claim else []
    return {"metadata": {"name": name}, "status": {"resourceClaimStatuses": statuses}}


def claim(name: str, count: int, devices: list[str]) -> dict[str, object]:
    results = [{"request": GPU_CLAIM, "driver": "gpu.nvidia.com", "pool": "n0", "device": d} for d in devices]
    return {"metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": GPU_CLAIM, "exactly": {"count": count}}]}},
            "status": {"allocation": {"devices": {"results": results}}} if devices else {}}


def test_claims_are_read_per_pod_and_shared_short_and_missing_allocations_are_counted() -> None:
    pods = [pod("a", "a-gpus-1"), pod("b", "b-gpus-1"), pod("c", "c-gpus-1"), pod("d", None)]
    claims = [claim("a-gpus-1", 2, ["gpu-0", "gpu-1"]), claim("b-gpus-1", 2, ["gpu-1"]), claim("c-gpus-1", 2, [])]
    found = pod_claims(pods, claims, GPU_CLAIM)  # type: ignore[arg-type]
    assert [(c.pod, c.claim, c.asked, len(c.devices)) for c in found] == [
        ("a", "a-gpus-1", 2, 2), ("b", "b-gpus-1", 2, 1), ("c", "c-gpus-1", 2, 0), ("d", "", 0, 0)]
    assert unallocated(found) == 2  # c (not allocated) and d (no claim yet)
    assert count_mismatch(found) == 1  # b: 1 of 2
    assert devices_shared(found) == ["gpu.nvidia.com/n0/gpu-1"]

"""GPU sharing granularity's arithmetic on objects recorded from KAI v0.12 on the sim: fractional pods, their
BindRequests and the reservation pods of their device groups; and the sim's device side choosing UUIDs."""

from __future__ import annotations

from typing import Any

import pytest

from harness.backends import kai
from harness.criteria.governance.sharing_granularity import (Share, device_commit, grant_error, jobs_per_device,
                                                             quota_error, tenants_per_device)
from harness.jobs.model import GangJob, GpuShare
from harness.config.profile import Tenant
from harness.core.errors import ConfigError
from harness.sim import gpu_reservations

GROUP_A, GROUP_B = "8faf8717-dae0-45cc-8721-df5031eda6f7", "8db61b12-597a-49c0-8b87-5ae0e7643ecd"
UUID_A, UUID_B = "GPU-5a75457c-76bb-591b-83b0-847cbf36ea06", "GPU-8f5ebdc7-72b0-5d4a-882c-039aaa7e310a"


def pod(name: str, namespace: str, annotations: dict[str, str], group: str = "") -> dict[str, Any]:
    labels = {"kai.scheduler/queue": "team-a", **({kai.GPU_GROUP_LABEL: group} if group else {})}
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels,
                         "annotations": {**annotations, "received-resource-type": "Fraction"}},
            "spec": {"nodeName": "gpu-node-0" if group else ""}}


def bind(portion: str, phase: str = "Succeeded") -> dict[str, Any]:
    return {"spec": {"receivedGPU": {"count": 1, "portion": portion}, "receivedResourceType": "Fraction"},
            "status": {"phase": phase}}


def reservation(group: str, uuid: str | None) -> dict[str, Any]:
    return {"metadata": {"name": f"gpu-reservation-gpu-node-0-{group[:5]}", "labels": {kai.GPU_GROUP_LABEL: group},
                         "annotations": {kai.DEVICE_ANNOTATION: uuid} if uuid else {}},
            "spec": {"nodeName": "gpu-node-0"}}


RECORDED = ([pod("a0", "poc-team-a", {"gpu-fraction": "0.5"}, GROUP_B),
             pod("a1", "poc-team-a", {"gpu-fraction": "0.25"}, GROUP_B),
             pod("b0", "poc-team-b", {"gpu-fraction": "0.5"}, GROUP_A),
             pod("b1", "poc-team-b", {"gpu-memory": "20000"}, GROUP_B),
             pod("whole", "poc-team-b", {})],  # no share asked: not a fractional pod
            {"a0": bind("0.50"), "a1": bind("0.25"), "b0": bind("0.50"), "b1": bind("0.25")},
            [reservation(GROUP_A, UUID_A), reservation(GROUP_B, UUID_B)])


def test_kais_placement_read_back_shares_devices_within_their_whole() -> None:
    shares = kai.gpu_shares(*RECORDED, device_memory_mib=81559)
    assert [(s.pod, s.granted, s.device) for s in shares] == [
        ("a0", 0.5, UUID_B), ("a1", 0.25, UUID_B), ("b0", 0.5, UUID_A), ("b1", 0.25, UUID_B)]
    assert shares[3].asked == pytest.approx(20000 / 81559)
    assert jobs_per_device(shares) == 3 and tenants_per_device(shares) == 2
    assert device_commit(shares) == 1.0
    assert grant_error(shares) == pytest.approx(0.25 - 20000 / 81559)  # KAI rounds memory up to 0.01 of a GPU
    # KAI charges the memory request as asked (0.2452), not as given (0.25)
    charged = {"poc-team-a": 0.75, "poc-team-b": 0.5 + 20000 / 81559}
    assert quota_error(charged, shares) == pytest.approx(0.0048, abs=1e-4)


def test_one_uuid_for_two_groups_is_a_device_given_out_beyond_its_whole() -> None:
    pods, binds, _ = RECORDED
    shares = kai.gpu_shares(pods, binds, [reservation(GROUP_A, UUID_A), reservation(GROUP_B, UUID_A)], 81559)
    assert device_commit(shares) == 1.5 and jobs_per_device(shares) == 4


def test_unbound_pods_count_no_grant_and_a_group_without_a_device_stands_for_one() -> None:
    pods, binds, _ = RECORDED
    shares = kai.gpu_shares(pods[:2], {"a0": bind("0.50", "Failed")}, [reservation(GROUP_B, None)], 81559)
    assert [s.granted for s in shares] == [None, None] and grant_error(shares) is None
    assert device_commit(shares) == 0.75  # what was asked, on the group's device
    assert quota_error({"poc-team-a": 0.0}, shares) == 0.0
    assert device_commit([]) == 0.0 and jobs_per_device([Share("p", "t", 0.5, None, "", None, "")]) == 0


def test_a_share_asks_a_fraction_or_memory_and_its_pods_ask_no_whole_gpu() -> None:
    with pytest.raises(ConfigError):
        GpuShare()
    with pytest.raises(ConfigError):
        GpuShare(0.5, 1000)
    tenant = Tenant("team-a", "poc-team-a", "team-a-submitter", 1.0, 8, {"kai": "team-a"})
    with pytest.raises(ConfigError):
        GangJob("j", tenant, 1, 1, gpu_share=GpuShare(0.5))
    job = GangJob("j", tenant, 1, 0, gpu_share=GpuShare(memory_mib=20000))
    manifests = kai.KaiBackend().manifests(job)
    assert manifests[1]["metadata"]["annotations"][kai.MEMORY_ANNOTATION] == "20000"
    assert "nvidia.com/gpu" not in manifests[1]["spec"]["containers"][0]["resources"]["limits"]
    assert str(GpuShare(0.25)) == "0.25 GPU"


def test_the_sims_device_side_gives_each_reservation_a_free_device_of_its_node() -> None:
    def res(name: str, node: str, uuid: str | None = None) -> dict[str, Any]:
        return {"metadata": {"name": name, "annotations": {gpu_reservations.UUID_ANNOTATION: uuid} if uuid else {}},
                "spec": {"nodeName": node}}
    first = gpu_reservations.device_uuid("n0", 0)
    chosen = gpu_reservations.assignments([res("r0", "n0", first), res("r1", "n0"), res("r2", "n1"),
                                           res("r3", "real-node")], {"n0": 2, "n1": 1})
    assert chosen == {"r1": gpu_reservations.device_uuid("n0", 1), "r2": gpu_reservations.device_uuid("n1", 0)}
    assert gpu_reservations.assignments([res("r4", "n0"), res("r0", "n0", first),
                                         res("r1", "n0", gpu_reservations.device_uuid("n0", 1))], {"n0": 2}) == {}
    same = gpu_reservations.assignments([res("r0", "n0", first), res("r1", "n0"), res("r2", "n1")],
                                        {"n0": 2, "n1": 1}, same_uuid=True)
    assert len(set(same.values())) == 1 and sorted(same) == ["r0", "r1", "r2"]  # r0's earlier UUID too
    assert gpu_reservations.assignments([res("r0", "n0", same["r0"])], {"n0": 2}, same_uuid=True) == {}

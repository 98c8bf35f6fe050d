"""Batch training 9 — GPUs claimed through Dynamic Resource Allocation: each pod's claim allocated as asked, no
device in two claims, and a tenant's claims beyond its GPU limit held by its queue."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from harness.criteria import AT_MOST, Criterion, Threshold, register

CRITERION = register(Criterion(
    "training.dra_allocation",
    "Jobs whose pods claim GPUs through a DRA DeviceClass (a ResourceClaimTemplate each) up to the capacity the "
    "DeviceClass selects: every pod's claim is allocated, with as many devices as it asked, and no device is "
    "allocated to two claims; a tenant's job beyond its GPU limit is held by its queue, its claim allocated no "
    "device.",
    (Threshold("max_unallocated_claims", "claims of pods that fit with no allocation", AT_MOST, " claims"),
     Threshold("max_count_mismatch", "claims allocated another number of devices than asked", AT_MOST, " claims"),
     Threshold("max_devices_shared", "devices allocated to more than one claim at once", AT_MOST, " devices"),
     Threshold("max_gpus_over_limit", "devices allocated to a tenant's job beyond its GPU limit", AT_MOST,
               " GPUs"))))


@dataclass(frozen=True)
class PodClaim:
    """One pod's GPU claim as the API server has it: the devices it asked for and those allocated to it."""

    pod: str
    claim: str          # '' while the claim controller has not made it
    asked: int
    devices: tuple[str, ...]  # driver/pool/device of each allocated device; () when not allocated

    @property
    def allocated(self) -> bool:
        return bool(self.devices)


def pod_claims(pods: list[dict[str, Any]], claims: list[dict[str, Any]], claim_name: str) -> list[PodClaim]:
    """Pure: each pod's claim named `claim_name` (pod.status.resourceClaimStatuses) with its allocation
    (claim.status.allocation.devices.results) and the devices its request asked for."""
    by_name = {c["metadata"]["name"]: c for c in claims}
    found = []
    for pod in pods:
        statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or []
        name = next((str(s.get("resourceClaimName") or "") for s in statuses if s.get("name") == claim_name), "")
        claim = by_name.get(name, {})
        requests = (((claim.get("spec") or {}).get("devices") or {}).get("requests")) or []
        asked = sum(int((r.get("exactly") or {}).get("count") or 1) for r in requests)
        results = ((((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")) or []
        found.append(PodClaim(pod["metadata"]["name"], name, asked,
                              tuple(f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}" for r in results)))
    return found


def unallocated(claims: list[PodClaim]) -> int:
    return sum(1 for c in claims if not c.allocated)


def count_mismatch(claims: list[PodClaim]) -> int:
    return sum(1 for c in claims if c.allocated and len(c.devices) != c.asked)


def devices_shared(claims: list[PodClaim]) -> list[str]:
    """Devices in more than one claim (each claim counted once per device)."""
    counts = Counter(d for c in claims for d in set(c.devices))
    return sorted(d for d, n in counts.items() if n > 1)

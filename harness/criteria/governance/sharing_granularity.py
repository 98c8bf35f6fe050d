"""Governance 8 — GPU sharing granularity (the Run:ai row): tenants' jobs ask for fractions of one GPU; the
scheduler puts several on one device, never gives out more of a device than it has, gives each job the fraction
it asked, and charges each tenant's queue the fractions its jobs hold. Which tenants share a device is the
isolation the scheduler's own assignment gives (fractions share a device's memory, not a hardware partition)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from harness.criteria import AT_LEAST, AT_MOST, Criterion, Threshold, register

CRITERION = register(Criterion(
    "governance.sharing_granularity",
    "Jobs that ask for a fraction of one GPU (by fraction or by memory) run with several on one device; no device "
    "is given out beyond its whole (the fractions on one device UUID sum to at most 1); each job is given the "
    "fraction it asked; at most the threshold's tenants share one device; each tenant's queue is charged the "
    "fractions its running jobs hold.",
    (Threshold("min_jobs_per_device", "the most fractional jobs on one device", AT_LEAST, " jobs"),
     Threshold("max_device_commit", "the largest sum of the fractions given on one device", AT_MOST, " GPU"),
     Threshold("max_grant_error", "the largest difference between a job's fraction given and asked", AT_MOST,
               " GPU"),
     Threshold("max_tenants_per_device", "the most tenants with fractions on one device", AT_MOST, " tenants"),
     Threshold("max_quota_error", "the largest difference between a tenant's queue charge and its jobs' fractions",
               AT_MOST, " GPU"))))


@dataclass(frozen=True)
class Share:
    """One fractional job's pod as the scheduler placed it: what it asked, what it was given, the scheduler's
    device group and the device the node reported for that group (its GPU UUID; None while none is reported)."""

    pod: str
    tenant: str
    asked: float
    granted: float | None
    group: str
    device: str | None
    node: str

    @property
    def device_key(self) -> str:
        return self.device or f"group {self.group} (no device reported)"


def by_device(shares: Iterable[Share]) -> dict[str, list[Share]]:
    """Pure: the placed shares by device (UUID); a group without a reported device stands for one."""
    devices: dict[str, list[Share]] = defaultdict(list)
    for share in shares:
        if share.group:
            devices[share.device_key].append(share)
    return dict(devices)


def device_commit(shares: Iterable[Share]) -> float:
    """Pure: the largest sum of given fractions on one device (asked, where the scheduler said nothing)."""
    return max((sum(s.granted if s.granted is not None else s.asked for s in on) for on in by_device(shares).values()),
               default=0.0)


def jobs_per_device(shares: Iterable[Share]) -> int:
    return max((len(on) for on in by_device(shares).values()), default=0)


def tenants_per_device(shares: Iterable[Share]) -> int:
    return max((len({s.tenant for s in on}) for on in by_device(shares).values()), default=0)


def grant_error(shares: Iterable[Share]) -> float | None:
    """Pure: the largest |given - asked|; None when the scheduler said what it gave for none of them."""
    errors = [abs(s.granted - s.asked) for s in shares if s.granted is not None]
    return max(errors) if errors else None


def quota_error(charged: dict[str, float], shares: Iterable[Share]) -> float:
    """Pure: the largest difference, per tenant, between what its queue was charged (its change over the case)
    and the fractions its jobs were given."""
    held: dict[str, float] = defaultdict(float)
    for share in shares:
        held[share.tenant] += share.granted if share.granted is not None else 0.0
    return max((abs(charged.get(t, 0.0) - held.get(t, 0.0)) for t in {*charged, *held}), default=0.0)

"""Governance 5 — monitoring coverage: the series a POC needs from each backend (queue wait, pending,
admitted, preempted, quota and usage per queue, requested vs granted GPUs, job outcomes, GPU requests,
GPU utilisation) exist in Prometheus, are scraped by a target that is up, are fresh, and agree with
the API (jobs waiting per queue)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.criteria import AT_MOST, Criterion, Threshold, register


@dataclass(frozen=True)
class Series:
    """A series a POC needs from a backend's monitoring: what it tells, its selector, and whether it appears only
    at its first event (a counter of preemptions, say; absent until then). No selector: the backend exports none."""

    need: str
    selector: str
    event: bool = False


CRITERION = register(Criterion(
    "governance.monitoring_coverage",
    "For each backend, the series a POC needs are present in Prometheus, scraped by a target that is up, fresh "
    "within the threshold, and agree with the API (jobs waiting per queue); counters that appear at their first "
    "event are not checked until one happened; GPU utilisation comes from a DCGM exporter where there is one.",
    (Threshold("max_missing_series", "needed series absent or scraped by a target that is down (0)", AT_MOST,
               " series"),
     Threshold("max_staleness_s", "age of the oldest last sample among the needed series", AT_MOST, " s"),
     Threshold("max_pending_mismatch", "|jobs waiting in the tenant's queue by the metric - by the API|", AT_MOST,
               " jobs"))))

# Every backend: what kube-state-metrics and a DCGM exporter say about the pods and GPUs themselves.
def ksm_resource(resource: str) -> str:
    """Pure: an extended resource as kube-state-metrics labels it (dots and slashes to underscores)."""
    return re.sub(r"[./]", "_", resource)


def pod_series(resource: str) -> tuple[Series, ...]:
    """What kube-state-metrics says of the pods: their requests of the accelerator's resource, their phases."""
    return (Series("GPU requests per pod", f'kube_pod_container_resource_requests{{resource="{ksm_resource(resource)}"}}'),
            Series("pod phases (success, failure)", "kube_pod_status_phase"))
GPU_UTILISATION = Series("GPU utilisation (DCGM)", "DCGM_FI_DEV_GPU_UTIL")
PRESENT, MISSING, NOT_YET, NOT_SCRAPED, NO_SERIES = (
    "present", "missing", "not checked", "target down", "not exported")


@dataclass(frozen=True)
class Found:
    """What Prometheus had for one needed series."""

    series: Series
    newest_at: float | None  # timestamp of its newest sample (None: no sample)
    targets_up: bool         # every target that exports it is up

    def state(self) -> str:
        if not self.series.selector:
            return NO_SERIES
        if self.newest_at is None:
            return NOT_YET if self.series.event else MISSING
        return PRESENT if self.targets_up else NOT_SCRAPED

    def row(self, now: float) -> dict[str, str]:
        age = f"{now - self.newest_at:.1f}" if self.newest_at is not None else "—"
        return {"need": self.series.need, "series": self.series.selector or "(none exported)",
                "state": self.state(), "age (s)": age,
                "verdict": "NOT as expected" if self.state() in (MISSING, NOT_SCRAPED, NO_SERIES) else "as expected"}


def missing(found: list[Found]) -> list[Found]:
    return [f for f in found if f.state() in (MISSING, NOT_SCRAPED, NO_SERIES)]


def staleness(found: list[Found], now: float) -> float | None:
    ages = [now - f.newest_at for f in found if f.newest_at is not None]
    return max(ages) if ages else None

"""Operations 1 — schedulers combined: one project's queue and admission in front of another's placement (Kueue in
front of Volcano): no pod bound before its job is admitted, no job admitted by one and left unplaced by the other,
and the record says which component owned the queue, the admission and the job's lifecycle."""

from __future__ import annotations

import math
from typing import Any

from harness.criteria import AT_MOST, Criterion, Threshold, register

CRITERION = register(Criterion(
    "operations.combined",
    "With one component's queue and admission in front of another's placement, no pod of a job is bound before "
    "the job is admitted, and every admitted job is placed whole within a threshold (none admitted by one and left "
    "unplaced by the other), also when the queue preempts a job the placing scheduler has taken in; who owned the "
    "queue, the admission and the lifecycle is read from the objects.",
    (Threshold("max_pods_bound_before_admission", "pods bound while their job was not admitted (or never was)",
               AT_MOST, " pods"),
     Threshold("max_admitted_unplaced_s", "seconds from a job's admission to its last pod bound (to the case's "
               "end for a job never placed whole)", AT_MOST, " s"),
     Threshold("max_preemptor_unplaced_s", "seconds from the admission of a job the queue admitted by preempting "
               "one the placing scheduler had taken in, to its pod bound (to the case's end if never)",
               AT_MOST, " s"))))


def bound_before(admitted: float | None, scheduled: list[float | None]) -> int:
    """Pure: pods bound while their job was not admitted. Server times have whole seconds: a bind that follows its
    admission never reads as earlier (both round down), so only a bind in an earlier second, or with no admission at
    all, counts."""
    bound = [s for s in scheduled if s is not None]
    if admitted is None:
        return len(bound)
    return sum(1 for s in bound if math.floor(s) < math.floor(admitted))


def unplaced_s(admitted: float | None, scheduled: list[float | None], pods: int, end: float) -> float | None:
    """Pure: seconds from admission to the last of `pods` bound, or to `end` when they never all were; None for a
    job never admitted."""
    if admitted is None:
        return None
    bound = [s for s in scheduled if s is not None]
    last = max(bound) if len(bound) >= pods else end
    return max(0.0, last - admitted)


def owners(workload: dict[str, Any] | None, pods: list[dict[str, Any]]) -> dict[str, str]:
    """Pure: who held the job, from the objects: the queue and the admission (the Workload), the placement (the
    pods' scheduler and pod group), the lifecycle (the pods' owner)."""
    if workload is None:
        queue = admission = "none: no Workload (the queue never saw the job)"
    else:
        admitted = ((workload.get("status") or {}).get("admission") or {}).get("clusterQueue", "")
        queue = f"Kueue LocalQueue {(workload.get('spec') or {}).get('queueName', '?')}" + (
            f" -> ClusterQueue {admitted}" if admitted else "")
        conditions = {c.get("type"): c for c in (workload.get("status") or {}).get("conditions") or []}
        state = next((t for t in ("Finished", "Admitted", "QuotaReserved") if (conditions.get(t) or {}).get(
            "status") == "True"), "not admitted")
        admission = f"Kueue: Workload {workload['metadata']['name']} ({state})"
    schedulers = sorted({(p.get("spec") or {}).get("schedulerName") or "default-scheduler" for p in pods})
    groups = sorted({g for p in pods if (g := ((p["metadata"].get("annotations") or {}).get(
        "scheduling.k8s.io/group-name")))})
    owner_kinds = sorted({f"{r.get('kind')} {r.get('name')}" for p in pods
                          for r in p["metadata"].get("ownerReferences") or [] if r.get("controller")})
    return {"queue": queue, "admission": admission,
            "placement": ", ".join(schedulers) + (f" (PodGroup {', '.join(groups)})" if groups else "")
            if pods else "no pods",
            "lifecycle": ", ".join(owner_kinds) or "no owner"}

"""Operations 2 — upgrade in place.

The busy queue of control-plane recovery: one tenant's job runs through, the other tenant fills the rest of the
cluster and has as many jobs again waiting. The backend's controllers are then replaced by their next release, as
each project documents: CRDs first, then the controllers; while the old ones are gone the fillers are deleted, so
only the new release can hand their capacity out. On the sim the case first installs the release before the pinned
one (Kueue v0.18.3, KubeRay v1.5.0: `gpupoc sim build --with upgrade`) and upgrades to the pinned one; the sim runs
the pinned one again at the end, whatever happened. On a real cluster it waits for the cluster's own upgrade (the
controllers' images changing) and reads what it did, only with --allow-destructive.

Measured: seconds without admissions (from the old release's controllers stopped to the first admission of a
waiting job); waiting jobs lost; jobs
admitted twice; the running job's pods replaced; the queues and jobs the new release refuses (their status); and the
CRDs the API server serves against the new release's own (missing, or lacking its fields or rules).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from harness.backends import Backend
from harness.backends.base import UPGRADE
from harness.backends.kueue import API_VERSION
from harness.cluster.apply import dynamic_client, served_crds
from harness.config.profile import Profile
from harness.criteria.operations.upgrade import CRITERION, crds_behind, refused, summary
from harness.jobs.system import JobSystem
from harness.record.evidence import Evidence
from harness.targets.target import Target
from harness.targets.upgrade import Upgrade, upgrade_of
from suites.training.busy_queue import BusyQueue
from suites.training.common import require


@pytest.mark.quiet  # the new release's start is the host's CPU (28.8 s with the host saturated, 2026-12-05)
def test_upgrade(target: Target, backend: Backend, workloads: JobSystem, queue_model: Profile,
                 destructive: Callable[[str], None], disrupts: Callable[[str], None],
                 evidence: Callable[[str], Evidence]) -> None:
    require(target, backend, UPGRADE)
    destructive(f"upgrade {backend.name}'s controllers in place")
    upgrade = upgrade_of(target, backend, queue_model.timeouts.run)
    for part in upgrade.parts:
        disrupts(part)
    upgrade_run(target, workloads, queue_model, upgrade, evidence(CRITERION.id))


def upgrade_run(target: Target, workloads: JobSystem, profile: Profile, upgrade: Upgrade, ev: Evidence) -> None:
    try:
        was = upgrade.prepare()
        busy = BusyQueue(workloads, profile, "upg")
        ev.note(f"{busy.describe('the upgrade')}; before it: {was}.")
        before = busy.fill()
        stopped_at = upgrade.stop()
        try:
            for job in busy.fillers:  # capacity frees that only the new release can hand out
                workloads.delete(job)
        finally:
            back_at = upgrade.start()
        ev.note(f"upgraded to {upgrade.upgraded_to()}: started "
                f"{back_at - stopped_at:.1f} s after the old release stopped; {len(busy.fillers)} fillers deleted "
                "meanwhile.")
        busy.wait_admitted("the upgrade", ev)
        busy.measure(ev, stopped_at, before, "the upgrade", resume="max_admission_gap_s")
        refusals = refused_objects(target.api, workloads, busy)
        ev.expect("max_objects_refused", len(refusals))
        if refusals:
            ev.note("refused by the new release: " + "; ".join(refusals))
        release = upgrade.release_crds()
        if release is None:
            ev.not_checked("max_crds_behind", "the new release's own CRDs are read from its Go module, only on the sim")
        else:
            behind = crds_behind(served_crds(target.api, [c["metadata"]["name"] for c in release]), release)
            ev.expect("max_crds_behind", len(behind))
            if behind:
                ev.note("CRDs behind the new release: " + summary(behind))
        ev.verdict()
    finally:
        left = upgrade.restore()
        if left:
            ev.note("not put back after the case: " + "; ".join(left))


def refused_objects(api: client.ApiClient, workloads: JobSystem, busy: BusyQueue) -> list[str]:
    """The case's tenants' queues (LocalQueue and its ClusterQueue) and the case's jobs that the new release
    refuses, with why."""
    objects: list[dict[str, Any]] = []
    resources = dynamic_client(api).resources
    for tenant in (busy.busy, busy.steady_tenant):
        name = tenant.queues.get("kueue")
        if not name:
            continue
        local = _read(resources.get(api_version=API_VERSION, kind="LocalQueue"), name, tenant.namespace)
        objects.append(local)
        queue = (local.get("spec") or {}).get("clusterQueue")
        if queue:
            objects.append(_read(resources.get(api_version=API_VERSION, kind="ClusterQueue"), queue, None))
    for namespace in sorted({busy.busy.namespace, busy.steady_tenant.namespace}):
        objects += list(workloads.jobs(namespace).objects.values())
    found = [(f"{o.get('kind', '?')} {o['metadata']['name']}", refused(o)) for o in objects]
    return sorted({f"{name}: {why}" for name, why in found if why})


def _read(resource: Any, name: str, namespace: str | None) -> dict[str, Any]:
    return dict(resource.get(name=name, namespace=namespace).to_dict())


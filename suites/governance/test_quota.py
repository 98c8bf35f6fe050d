"""Governance 1 — quota.

The borrowing tenant (reference profile: team-b, quota 8, limit 16 GPUs) submits its quota in
jobs, then up to its limit while the others are idle, then one job more. The jobs within quota
must start within the threshold; the one beyond the limit must stay held for the whole window
(held_for_s), with the scheduler's reason quoted, and the tenant must never hold more than its
limit. Once per cluster, a GPU ResourceQuota in the tenant's namespace must refuse, at creation, a
pod asking for more than it allows (403, no pod created).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kubernetes import client

from harness.cluster.apply import apply_objects
from harness.backends import Backend
from harness.backends.base import QUEUE_QUOTA
from harness.config.options import RunConfig
from harness.criteria.governance import quota
from harness.criteria.governance.quota import CRITERION, HOLD_PAST_S
from harness.jobs.system import JobSystem
from harness.cluster.manifests import dressed, labelled
from harness.config.workloads import TRAIN_CONTAINER
from harness.config.profile import Profile
from harness.cluster.wait import poll
from harness.record.evidence import Evidence
from harness.targets.target import Target
from suites.governance.common import (STARTED, borrower_and_lender, held_intervals, held_reason, job_size, started_within,
                                      submit_and_wait_running)
from suites.training.common import LONG_RUN_S, require, state_is

CHART_STEP_S = 1.0
HTTP_FORBIDDEN = 403


def run_quota(api: client.ApiClient, workloads: JobSystem, profile: Profile, ev: Evidence) -> None:
    tenant, _ = borrower_and_lender(profile)
    assert tenant.limit_gpus is not None
    size = job_size(profile, tenant)
    jobs = [workloads.gang(f"quota-{i}", tenant, 1, size, run_for_s=LONG_RUN_S)
            for i in range(tenant.limit_gpus // size + 1)]
    within, borrowing, beyond = (jobs[:tenant.quota_gpus // size], jobs[tenant.quota_gpus // size:-1], jobs[-1])
    ev.note(f"{tenant.name} (quota {tenant.quota_gpus}, limit {tenant.limit_gpus} GPUs) submits {len(within)} jobs "
            f"of {size} GPUs within its quota, {len(borrowing)} up to its limit, then 1 beyond it")
    started = time.time()
    took = submit_and_wait_running(workloads, within, f"{tenant.name}'s jobs within its quota start",
                                   profile.timeouts.admit)
    ev.expect("admit_within_s", round(took, 3))
    submit_and_wait_running(workloads, borrowing, f"{tenant.name} holds its limit", profile.timeouts.admit)
    window = profile.threshold(CRITERION.id, "held_for_s") + HOLD_PAST_S
    submitted = time.time()
    workloads.submit(beyond)
    started_at = started_within(workloads, [beyond], f"{beyond.name} stays held", window)
    ended = time.time()
    reason = held_reason(api, workloads, beyond)
    ev.note(f"the job beyond the limit: " + ("held through the window" if started_at is None
                                             else f"started {started_at - submitted:.1f}s after submission")
            + (f"; the scheduler's reason: {reason}" if reason else "; the scheduler gave no reason"))
    intervals = held_intervals(workloads, tenant, jobs, ended)
    objects = workloads.jobs(tenant.namespace).objects
    admitted = sum(j.gpus for j in jobs if state_is(workloads, j, *STARTED)(objects))  # pods may not run yet
    peak = max(quota.peak_gpus(intervals), admitted)
    ev.note(f"{tenant.name} held at most {peak} GPUs (running pods, or jobs admitted at the end: {admitted})")
    ev.expect("max_gpus_over_limit", max(0, peak - tenant.limit_gpus))
    ev.expect("held_for_s", round(quota.held_for(submitted, started_at, ended), 3))
    ev.series["gpus"] = {tenant.name: quota.gpus_over_time(intervals, started, ended, CHART_STEP_S)}
    ev.verdict()


def test_quota(target: Target, backend: Backend, workloads: JobSystem, queue_model: Profile,
               evidence: Callable[[str], Evidence]) -> None:
    require(target, backend, QUEUE_QUOTA)
    run_quota(target.api, workloads, queue_model, evidence(CRITERION.id))


def test_gpu_resource_quota_refuses_at_creation(target: Target, queue_model: Profile, gpupoc_config: RunConfig,
                                                evidence: Callable[[str], Evidence]) -> None:
    """A property of the cluster (kube-apiserver's ResourceQuota admission), checked once per target."""
    ev = evidence(CRITERION.id)
    tenant = queue_model.tenants[-1]
    allowed = 1
    tag = f"{gpupoc_config.run_id}"[-12:].lower().strip("-") or "run"
    quota_name = f"gpupoc-gpu-quota-{tag}"
    core = client.CoreV1Api(target.api)
    rq = labelled([{"apiVersion": "v1", "kind": "ResourceQuota",
                    "metadata": {"name": quota_name, "namespace": tenant.namespace},
                    "spec": {"hard": {f"requests.{queue_model.gpu.resource}": str(allowed)}}}],
                  gpupoc_config.run_id, "governance-quota")
    pod = dressed(labelled([{"apiVersion": "v1", "kind": "Pod",
                             "metadata": {"name": f"over-quota-{tag}", "namespace": tenant.namespace},
                             "spec": {"restartPolicy": "Never", "containers": [{
                                 "name": TRAIN_CONTAINER, "image": "",
                                 "resources": {"limits": {queue_model.gpu.resource: str(allowed + 1)}}}]}}],
                           gpupoc_config.run_id, "governance-quota"), queue_model.workloads)
    apply_objects(target.api, rq)
    try:
        quota_seen = wait_for_quota_status(core, tenant.namespace, quota_name)
        ev.note(f"ResourceQuota {quota_name} in {tenant.namespace}: requests.{queue_model.gpu.resource} = {allowed}"
                + ("" if quota_seen else " (its status was not computed yet)"))
        created = 0
        try:
            apply_objects(target.seam.as_tenant(tenant), pod)
            created = 1
            ev.note(f"{tenant.name} created a pod asking for {allowed + 1} GPUs: the quota did not refuse it")
        except client.ApiException as exc:
            ev.note(f"{tenant.name}'s pod asking for {allowed + 1} GPUs refused: HTTP {exc.status} "
                    f"{str(exc.body or exc.reason)[:300]}")
            if exc.status != HTTP_FORBIDDEN:
                raise
        ev.expect("max_pods_over_resourcequota", created)
    finally:
        for name, delete in ((pod[0]["metadata"]["name"], core.delete_namespaced_pod),
                             (quota_name, core.delete_namespaced_resource_quota)):
            try:
                delete(name, tenant.namespace, grace_period_seconds=0)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise
    ev.verdict()


def wait_for_quota_status(core: client.CoreV1Api, namespace: str, name: str, timeout_s: float = 10.0) -> bool:
    """The quota controller computes a new ResourceQuota's usage first; until then admission refuses everything."""
    return bool(poll(lambda: core.read_namespaced_resource_quota(name, namespace).status.hard, bool, timeout_s))

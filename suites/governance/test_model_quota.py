"""Governance — quota per GPU model.

The profile names the cluster's GPU models and each tenant's quota of each (gpu.models). The first tenant submits
one-GPU jobs of the model it has the least quota of, up to that quota: they must start within the threshold, each
pod on a node of that model. Then one job more of that model (it must stay held for the whole window although the
model still has free GPUs) and, at once, a job of another model (it must start within the threshold: a tenant at its
limit on one model is not charged against another). GPU-hours per model come from the pods' running intervals.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from harness.backends import Backend
from harness.backends.base import MODEL_QUOTA
from harness.cluster.inventory import cluster_inventory
from harness.config.profile import ModelQuota, Profile
from harness.criteria.governance import quota
from harness.criteria.governance.model_quota import CRITERION, misplaced, nodes_by_model
from harness.criteria.governance.quota import HOLD_PAST_S
from harness.jobs.model import GangJob, job_of
from harness.jobs.system import JobSystem
from harness.record.evidence import Evidence
from harness.targets.target import Target
from suites.governance.common import (STARTED, held_intervals, held_reason, started_within,
                                      submit_and_wait_running)
from suites.training.common import LONG_RUN_S, require, state_is


def models_to_compare(profile: Profile, tenant: str, present: dict[str, list[str]]) -> tuple[ModelQuota, ModelQuota]:
    """The model the tenant has the least quota of (it is held at that limit) and another it has quota of; SKIP
    where the profile names no models or the cluster lacks nodes of one."""
    if not profile.gpu.models:
        pytest.skip("the profile names no GPU models with a quota of their own (gpu.models)")
    absent = [m.model for m in profile.gpu.models if not present.get(m.model)]
    if absent:
        pytest.skip(f"no node of {', '.join(absent)} (the cluster's GPU models: {', '.join(present) or 'none'})")
    quotas = sorted((m for m in profile.gpu.models if m.of(tenant) > 0), key=lambda m: m.of(tenant))
    if len(quotas) < 2:
        pytest.skip(f"{tenant} has a quota of fewer than two GPU models (gpu.models)")
    return quotas[0], quotas[-1]


def test_model_quota(target: Target, backend: Backend, workloads: JobSystem, queue_model: Profile,
                     evidence: Callable[[str], Evidence]) -> None:
    require(target, backend, MODEL_QUOTA)
    profile, ev = queue_model, evidence(CRITERION.id)
    label = profile.gpu.accelerator.discovery.model
    inventory = cluster_inventory(target.api)
    model_of_node, gpus_of = {g.node: g.model for g in inventory}, {g.node: g.count for g in inventory}
    present = nodes_by_model(model_of_node)
    tenant = profile.tenants[0]
    limited, other = models_to_compare(profile, tenant.name, present)
    limit = limited.of(tenant.name)

    def job(name: str, model: ModelQuota) -> GangJob:
        return workloads.gang(name, tenant, 1, 1, run_for_s=LONG_RUN_S, node_selector={label: model.model},
                              gpu_model=model.model)
    within = [job(f"model-{i}", limited) for i in range(limit)]
    beyond, elsewhere = job(f"model-{limit}", limited), job("model-other", other)
    free = sum(gpus_of.get(name, 0) for name in present[limited.model]) - limit
    ev.note(f"{tenant.name} has {limit} GPU(s) of {limited.model} ({len(present[limited.model])} node(s)) and "
            f"{other.of(tenant.name)} of {other.model} ({len(present[other.model])} node(s)); it submits {limit} "
            f"one-GPU job(s) of {limited.model}, then one more ({free} GPU(s) of the model still free), and one of "
            f"{other.model}")
    took = submit_and_wait_running(workloads, within, f"{tenant.name}'s {limited.model} jobs within its quota start",
                                   profile.timeouts.admit)
    ev.expect("admit_within_s", round(took, 3))
    window = profile.threshold(CRITERION.id, "held_for_s") + HOLD_PAST_S
    submitted = time.time()
    workloads.submit(beyond)
    workloads.submit(elsewhere)
    other_at = started_within(workloads, [elsewhere], f"the {other.model} job starts", profile.timeouts.admit)
    ev.expect("other_model_admit_within_s", None if other_at is None else round(other_at - submitted, 3))
    beyond_at = started_within(workloads, [beyond], f"{beyond.name} stays held",
                               max(0.0, submitted + window - time.time()))
    ended = time.time()
    reason = held_reason(target.api, workloads, beyond)
    ev.note(f"the {limited.model} job beyond the quota: " + (
        "held through the window" if beyond_at is None else f"started {beyond_at - submitted:.1f}s after submission")
        + (f"; the scheduler's reason: {reason}" if reason else "; the scheduler gave no reason"))
    pods = [{"name": p["metadata"]["name"], "job": job_of(p), "node": (p.get("spec") or {}).get("nodeName")}
            for p in {**workloads.members(tenant.namespace).gone,
                      **workloads.members(tenant.namespace).objects}.values()]
    wanted = {**{j.name: limited.model for j in [*within, beyond]}, elsewhere.name: other.model}
    wrong = misplaced(pods, wanted, model_of_node)
    for line in wrong:
        ev.note(f"on another model: {line}")
    ev.expect("max_pods_on_other_model", len(wrong))
    of_limited = held_intervals(workloads, tenant, [*within, beyond], ended)
    objects = workloads.jobs(tenant.namespace).objects
    admitted = sum(j.gpus for j in [*within, beyond] if state_is(workloads, j, *STARTED)(objects))  # pods may not run yet
    ev.expect("max_gpus_over_model_limit", max(0, quota.peak_gpus(of_limited) - limit, admitted - limit))
    ev.expect("held_for_s", round(quota.held_for(submitted, beyond_at, ended), 3))
    hours = {limited.model: of_limited, other.model: held_intervals(workloads, tenant, [elsewhere], ended)}
    ev.tables["GPU-hours per model (this case's pods)"] = [
        {"model": m.model, "nodes": len(present[m.model]), f"{tenant.name}'s quota (GPUs)": m.of(tenant.name),
         "GPU-hours": round(sum((i.end - i.start) * i.gpus for i in hours.get(m.model, [])) / 3600, 5)}
        for m in profile.gpu.models]
    for j in [*within, beyond, elsewhere]:
        workloads.delete(j)
    ev.verdict()

"""Batch training 8 — the isolation boundary between tenants.

The workload sample runs alone on a node, then again on the same node beside another tenant's antagonist (the
profile's: CPU and memory hogs with no requests, BestEffort); the slowdown is its step time p50 beside the
antagonist over its p50 alone. On a node whose kubelet gives a Guaranteed pod cores of its own (the static CPU
manager) the antagonist stays off them; without that, the sample's threads share their cores with it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kubernetes import client

from harness.backends import Backend
from harness.core.estimate import ratio_of_medians
from harness.config.profile import Profile
from harness.criteria.training.isolation_boundary import CRITERION, slowdown
from harness.criteria.training.step_stability import step_series
from harness.jobs.kubernetes import Workloads
from harness.jobs.system import JobSystem
from harness.record.evidence import Evidence
from harness.targets.target import Target
from suites.training.sample import ANTAGONIST, antagonist_pod, record_run, require_sample, run_sample, sample_job


@pytest.mark.quiet  # its step times are the host's CPU: alone among the runs sharing the host
@pytest.mark.sample
def test_isolation_boundary(target: Target, backend: Backend, workloads: JobSystem, queue_model: Profile,
                            evidence: Callable[[str], Evidence]) -> None:
    require_sample(target, backend, queue_model)
    assert isinstance(workloads, Workloads)  # a backend that runs the sample runs it on Kubernetes
    ev = evidence(CRITERION.id)
    me, other = queue_model.tenants[0], queue_model.tenants[-1]
    alone = run_sample(workloads, queue_model, sample_job(workloads, queue_model, "alone", me))
    namespace = other.namespace
    workloads.apply(other, [{**antagonist_pod(queue_model, alone.node),
                             "metadata": {"name": ANTAGONIST, "namespace": namespace}}])
    pods = workloads.pods(namespace)
    pods.wait_until(f"{other.name}'s antagonist running on {alone.node}",
                    lambda o: (o.get(ANTAGONIST, {}).get("status") or {}).get("phase") == "Running",
                    queue_model.timeouts.run)
    try:
        beside = run_sample(workloads, queue_model, sample_job(workloads, queue_model, "beside", me, alone.node))
    finally:
        client.CoreV1Api(workloads.api).delete_namespaced_pod(ANTAGONIST, namespace,
                                                                           grace_period_seconds=0)
    record_run(ev, "alone", alone)
    record_run(ev, f"beside {other.name}'s antagonist", beside)
    a, b = alone.summary.get("p50_s"), beside.summary.get("p50_s")
    ev.note(f"node {alone.node}: step p50 {_ms(a)} ms alone, {_ms(b)} ms beside the antagonist; CPU threads "
            f"{alone.summary.get('cpu_threads')} and {beside.summary.get('cpu_threads')} (the CPUs each could use)")
    alone_steps, beside_steps = alone.summary.get("step_s") or [], beside.summary.get("step_s") or []
    if alone_steps and beside_steps:
        ev.expect("max_slowdown", ratio_of_medians(alone_steps, beside_steps).rounded(4))
    else:
        ev.expect("max_slowdown", round(slowdown(float(a), float(b)), 4) if a and b else None)
    ev.series["step_ms"] = {"alone": step_series(alone.summary.get("step_s") or []),
                            "beside the antagonist": step_series(beside.summary.get("step_s") or [])}
    ev.verdict()


def _ms(seconds: object) -> str:
    return f"{float(seconds) * 1000:.2f}" if isinstance(seconds, (int, float)) else "?"

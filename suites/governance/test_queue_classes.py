"""Governance 0 — queue model by workload class.

A tenant's low-priority training fills the cluster in medium jobs; then a one-GPU interactive session
(high priority) is submitted to the tenant's development queue (tenants[].dev_queues in the profile).
The session must run within the threshold, taken from the dev queue's reserved quota by the backend's
own mechanism: Kueue admits it on the dev ClusterQueue's quota and kube-scheduler preempts a training
pod of lower priority; Volcano and KAI reclaim for the dev queue from the training queue, which holds
more than its share. Training must keep the share of the cluster the model leaves it (the fewest GPUs
it held while the session ran, against capacity minus the session's GPU).
"""

from __future__ import annotations

import time
from typing import Any
from collections.abc import Callable
from dataclasses import replace

import pytest

from harness.backends import Backend
from harness.backends.base import QUEUE_QUOTA
from harness.criteria.governance import queue_classes as classes
from harness.criteria.governance.queue_classes import CRITERION
from harness.criteria.governance.quota import gpus_over_time, peak_gpus
from harness.criteria.training.queue_fairness import Interval
from harness.jobs.system import JobSystem
from harness.config.profile import Profile
from harness.record.evidence import Evidence
from harness.targets.target import Target
from suites.governance.common import held_intervals, started_within, submit_and_wait_running
from suites.training.common import LONG_RUN_S, gpu_nodes, require, wait_running_for_its_scheduler

SETTLE_S = 5.0  # after the session starts: the evictions it caused have happened (each is a watch event)
CHART_STEP_S = 1.0


def fewest_gpus(intervals: list[Interval], since: float, until: float) -> int:
    """The fewest GPUs held at once over [since, until) (at its start and at every start and end inside it)."""
    instants = [since] + [t for iv in intervals for t in (iv.start, iv.end) if since < t < until]
    return min(sum(iv.gpus for iv in intervals if iv.start <= t < iv.end) for t in instants)


def run_queue_classes(api: Any, workloads: JobSystem, backend: Backend, profile: Profile, ev: Evidence) -> None:
    tenant = profile.tenants[0]
    dev_queue = tenant.dev_queues.get(backend.queue_system)
    if not dev_queue:
        pytest.skip(f"tenant {tenant.name} has no {backend.name} development queue in the profile "
                    f"(tenants[].dev_queues.{backend.queue_system})")
    size = profile.gpu.job_sizes.get("medium", profile.gpu.per_node)
    capacity = gpu_nodes(workloads, profile) * profile.gpu.per_node
    priorities = profile.workloads.pod_defaults  # the reference model's priority classes, or the cluster's own
    training = [workloads.gang(f"train-{i}", tenant, 1, size, run_for_s=LONG_RUN_S,
                               priority_class=priorities.low_priority_class) for i in range(capacity // size)]
    developer = replace(tenant, queues={**tenant.queues, backend.queue_system: dev_queue})
    session = workloads.gang("notebook", developer, 1, 1, run_for_s=LONG_RUN_S,
                             priority_class=priorities.high_priority_class, restart_on_failure=False)
    ev.note(f"{tenant.name}'s training fills the {capacity} GPUs with {len(training)} jobs of {size} GPUs (low "
            f"priority); then a 1-GPU interactive session (high priority) in its development queue {dev_queue!r}")
    started = time.time()
    submit_and_wait_running(workloads, training, f"{tenant.name}'s training fills the cluster", profile.timeouts.admit)
    wait_running_for_its_scheduler(api, backend, training, profile.timeouts.admit)
    submitted = time.time()
    workloads.submit(session)
    tracker = workloads.jobs(tenant.namespace)
    wait_s = 2 * profile.threshold(CRITERION.id, "session_start_within_s")
    running_at = started_within(workloads, [session], "the interactive session runs", wait_s, ("running",))
    ev.note("the session " + (f"ran {running_at - submitted:.1f}s after submission" if running_at is not None
                              else f"did not run within {wait_s:g}s"))
    # not run: at least the wait, whatever the harness's own polling added after it
    ev.expect("session_start_within_s", round(running_at - submitted, 3) if running_at is not None else wait_s)
    if running_at is not None:
        tracker.hold(SETTLE_S)
    ended = time.time()
    trained = held_intervals(workloads, tenant, training, ended)
    kept = fewest_gpus(trained, running_at or ended, ended)
    ev.note(f"training held {kept} GPUs at the fewest while the session ran (at most {peak_gpus(trained)} before); "
            f"the model leaves it {capacity - session.gpus}")
    ev.expect("min_training_share_kept", round(classes.share_kept(kept, capacity, session.gpus), 4))
    ev.series["gpus"] = {"training": gpus_over_time(trained, started, ended, CHART_STEP_S),
                         "session": gpus_over_time(held_intervals(workloads, tenant, [session], ended), started, ended,
                                                   CHART_STEP_S)}
    ev.verdict()


def test_queue_classes(target: Target, backend: Backend, workloads: JobSystem, queue_model: Profile,
                       evidence: Callable[[str], Evidence]) -> None:
    require(target, backend, QUEUE_QUOTA)
    run_queue_classes(target.api, workloads, backend, queue_model, evidence(CRITERION.id))

"""Batch training 6 — control-plane recovery.

One tenant's job runs through the whole case; the other tenant fills the rest of the cluster and has
as many jobs again waiting. The backend's scheduling controllers are stopped; while they are down the
running jobs that filled the cluster are deleted, so capacity frees that nobody can hand out; then the
controllers start again. Measured: the time from the controllers back to the first admission of a
waiting job, the waiting jobs never admitted (listed), jobs admitted twice, and whether the job that
ran through the restart kept its pods. On the sim the controllers are the backend's processes; on a
real cluster their Deployments are scaled to zero and back (only with --allow-destructive).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from harness.backends import Backend
from harness.backends.base import CONTROLLER_RESTART
from harness.criteria.training.control_plane_recovery import CRITERION
from harness.jobs.system import JobSystem
from harness.config.profile import Profile
from harness.record.evidence import Evidence
from harness.targets.restart import controller_restart
from harness.targets.target import Target
from suites.training.busy_queue import BusyQueue
from suites.training.common import require


def test_control_plane_recovery(target: Target, backend: Backend, workloads: JobSystem, queue_model: Profile,
                                destructive: Callable[[str], None], disrupts: Callable[[str], None],
                                evidence: Callable[[str], Evidence]) -> None:
    require(target, backend, CONTROLLER_RESTART)
    destructive(f"stop and start {backend.name}'s scheduling controllers")
    profile, ev = queue_model, evidence(CRITERION.id)
    busy = BusyQueue(workloads, profile, "cpr")
    restart = controller_restart(target, backend, profile.timeouts.run)
    for part in restart.names:
        disrupts(part)
    ev.note(f"{busy.describe('the restart')}; controllers restarted: {', '.join(restart.names)}.")
    before = busy.fill()
    stopped_at = time.time()
    try:
        restart.stop()
        ev.note(workloads.end_while_stopped(busy.fillers, profile.timeouts.delete))
    finally:  # whatever happened, the controllers come back before anything else runs
        back_at = restart.start()
    ev.note(f"controllers down for {back_at - stopped_at:.1f}s; capacity for {len(busy.fillers)} jobs freed meanwhile.")
    busy.wait_admitted("the restart", ev)
    busy.measure(ev, back_at, before, "the restart")
    ev.verdict()

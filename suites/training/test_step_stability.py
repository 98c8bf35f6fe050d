"""Batch training 7 — step stability of the workload sample.

The sample (a real training loop: framework, data loader, checkpoints) runs in a real container; its container is
killed (asked to exit 137) between two checkpoints, restarted in place by its pod, resumes from its last checkpoint
and runs to the end. From the summary its log ends with: step time p50/p95 and coefficient of variation after the
warm-up, its loader's read throughput, the steps it redid; its GPU-hours from the API timelines.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from harness.backends import Backend
from harness.core.estimate import of_samples
from harness.config.profile import Profile
from harness.criteria.training.step_stability import CRITERION, step_series
from harness.jobs.system import JobSystem
from harness.record.evidence import Evidence
from harness.targets.target import Target
from suites.training.sample import record_run, require_sample, run_sample, sample_job


@pytest.mark.quiet  # its step times are the host's CPU: alone among the runs sharing the host
@pytest.mark.sample
def test_step_stability(target: Target, backend: Backend, workloads: JobSystem, queue_model: Profile,
                        destructive: Callable[[str], None], evidence: Callable[[str], Evidence]) -> None:
    require_sample(target, backend, queue_model)
    destructive("kill the workload sample's container mid-run")
    ev = evidence(CRITERION.id)
    sample = queue_model.workloads.sample
    kill_at = min(sample.checkpoint_every * 3 // 2, sample.steps // 3)  # between two checkpoints, early in the run
    run = run_sample(workloads, queue_model, sample_job(workloads, queue_model, "sample", queue_model.tenants[0]),
                     kill_at_step=kill_at)
    s = run.summary
    record_run(ev, "killed, resumed", run)
    resumed = s.get("resumed_from_step")
    ev.note(f"asked to exit at step {kill_at} or after; it stopped at step {s.get('steps_before_restart')} and "
            + (f"resumed from the checkpoint of step {resumed}" if resumed else "found no checkpoint: started over")
            + f" (checkpoints every {sample.checkpoint_every} steps); {s.get('framework')} on {s.get('device')}, "
            f"{s.get('cpu_threads')} CPU threads; GPU-hours {run.gpu_hours:.6f}")
    if run.killed_log:
        ev.note(f"its log before the kill ends: {run.killed_log.strip().splitlines()[-1]}")
    steps = [float(x) for x in s.get("step_s") or []]  # after the warm-up, as the sample's summary reports them
    ev.expect("max_step_cov", of_samples(steps, "cov").rounded(4) if len(steps) > 1 else _round(s.get("cov")))
    ev.expect("max_p95_over_p50", of_samples(steps, "p95/p50").rounded(4) if len(steps) > 1 else None)
    ev.expect("min_data_read_mb_s", _round(s.get("data_read_mb_s")))
    ev.expect("max_steps_redone", s.get("steps_redone") if s.get("steps_before_restart") is not None else None)
    ev.series["step_ms"] = {"resumed run": step_series(s.get("step_s") or [])}
    ev.verdict()


def _round(value: object) -> float | None:
    return round(float(value), 4) if isinstance(value, (int, float)) else None

"""Batch training 7 — step stability: the workload sample's step time and data throughput in a real container, and
its resumption from a checkpoint after a kill."""

from __future__ import annotations

from harness.criteria import AT_LEAST, AT_MOST, Chart, Criterion, Threshold, register

CRITERION = register(Criterion(
    "training.step_stability",
    "The workload sample (a real training loop: real framework, data loader, checkpoints) runs in a real container "
    "to the end: after its warm-up, its step time is steady (coefficient of variation, p95 / p50) and its loader "
    "reads its data fast enough; its container killed mid-run, it resumes from its last checkpoint, redoing only "
    "the steps since.",
    (Threshold("max_step_cov", "coefficient of variation of step time after warm-up", AT_MOST),
     Threshold("max_p95_over_p50", "step time p95 / p50 after warm-up", AT_MOST),
     Threshold("min_data_read_mb_s", "its loader's read throughput", AT_LEAST, " MB/s"),
     Threshold("max_steps_redone", "steps redone after the kill (from its last checkpoint to where it was)",
               AT_MOST)),
    (Chart("step_ms", "step time of the resumed run (after warm-up)", "ms", "seconds"),)))


def step_series(step_s: list[float]) -> list[tuple[float, float]]:
    """(seconds since the measured steps began, step ms) of each measured step: the step time over time."""
    series, at = [], 0.0
    for seconds in step_s:
        at += seconds
        series.append((round(at, 4), round(seconds * 1000, 3)))
    return series

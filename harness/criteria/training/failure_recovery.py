"""Batch training 4 — failure recovery: from a pod failing to all the job's pods running again."""

from __future__ import annotations

from harness.criteria import AT_MOST, Chart, Criterion, Threshold, register

CRITERION = register(Criterion(
    "training.failure_recovery",
    "A pod of a running multi-pod job fails; the job recovers by its policy and completes; the time from the "
    "failure to all pods running again is within the threshold.",
    (Threshold("recover_within_s", "seconds from a pod failure to all pods running again", AT_MOST, " s"),),
    (Chart("pods", "pods over time", "pods"),)))

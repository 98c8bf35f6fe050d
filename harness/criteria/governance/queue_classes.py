"""Governance 0 — queue model by workload class: development and debugging (an interactive one-GPU
session) has a queue of its own beside training's; while training saturates the cluster the session
starts within the threshold (by the dev queue's reserved quota, or by preempting lower-priority batch
work, whichever the backend offers), and training keeps the share of the cluster the model leaves it."""

from __future__ import annotations

from harness.criteria import AT_LEAST, AT_MOST, Chart, Criterion, Threshold, register

CRITERION = register(Criterion(
    "governance.queue_classes",
    "While a tenant's training saturates the cluster, a one-GPU interactive session in the tenant's development "
    "queue starts within the threshold, and training keeps the share of the GPUs the model leaves it.",
    (Threshold("session_start_within_s", "seconds from submitting the interactive session to it running", AT_MOST,
               " s"),
     Threshold("min_training_share_kept", "training's GPUs while the session runs / the GPUs the model leaves it "
               "(capacity - the session's)", AT_LEAST)),
    (Chart("gpus", "GPUs held by training and by the session", "GPUs"),)))


def share_kept(training_gpus: float, capacity: int, session_gpus: int) -> float:
    """Pure: training's GPUs as a share of what the model leaves it once the session runs."""
    left = capacity - session_gpus
    return training_gpus / left if left > 0 else 1.0

"""Inference 3b — canary release: stable and canary behind one Service; the canary's share of responses over at
least 400 requests matches the intended split within its 99 % binomial interval; a failing canary is rolled back
and afterwards every response comes from stable."""

from __future__ import annotations

from harness.criteria import AT_MOST, Criterion, Threshold, register

CRITERION = register(Criterion(
    "inference.canary_release",
    "The canary's share of responses (>= 400 requests) lies in the 99 % binomial interval of the intended split; a "
    "canary failing its error-rate gate is rolled back within the threshold and then no response comes from it.",
    (Threshold("max_split_outside_interval", "1 when the canary's share is outside the 99 % interval", AT_MOST),
     Threshold("canary_error_gate", "canary error rate above which it is rolled back", AT_MOST),
     Threshold("rollback_within_s", "seconds from the gate tripping to no canary endpoint ready", AT_MOST, " s"),
     Threshold("max_canary_after_rollback", "responses served by the canary after the rollback", AT_MOST))))

CONFIDENCE = 0.99  # of the interval the canary's share must fall in (estimate.wilson_bounds)

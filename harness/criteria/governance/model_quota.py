"""Governance — quota per GPU model: a tenant's quota of each model is its own. Its jobs asking for one model are
admitted up to that model's quota and land only on that model's nodes; one more of that model is held while the
model still has free GPUs (the quota holds it, not the capacity); and, while it is held there, a job of another model
is admitted within the threshold (the tenant at its limit on one model is not charged against another)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from harness.criteria import AT_LEAST, AT_MOST, Criterion, Threshold, register

CRITERION = register(Criterion(
    "governance.model_quota",
    "A tenant's jobs of one GPU model are admitted up to its quota of that model within the threshold and placed "
    "only on nodes of that model; one job more of the model is held for the whole observation window although the "
    "model has free GPUs; meanwhile a job of another model is admitted within the threshold.",
    (Threshold("admit_within_s", "seconds from submission to every job within the model's quota running", AT_MOST,
               " s"),
     Threshold("held_for_s", "seconds the job beyond the model's quota must stay held (the observation window)",
               AT_LEAST, " s"),
     Threshold("other_model_admit_within_s", "seconds from submission to running of a job of another model while "
               "the tenant is at its limit on the first", AT_MOST, " s"),
     Threshold("max_pods_on_other_model", "pods placed on a node of another model than their job asked for (0)",
               AT_MOST, " pods"),
     Threshold("max_gpus_over_model_limit", "GPUs of the model the tenant held beyond its quota of it at any moment "
               "(0)", AT_MOST, " GPUs"))))


def nodes_by_model(model_of_node: dict[str, str]) -> dict[str, list[str]]:
    """Pure: node names by their GPU model (node -> model, as the inventory reads them)."""
    found: dict[str, list[str]] = {}
    for node, model in model_of_node.items():
        found.setdefault(model, []).append(node)
    return {model: sorted(names) for model, names in sorted(found.items())}


def misplaced(pods: Iterable[dict[str, Any]], wanted: dict[str, str], model_of_node: dict[str, str]) -> list[str]:
    """Pure: "pod on node (model)" for each bound pod ({name, job, node}) whose node's model is not the one its job
    asked for (`wanted`: job name -> model)."""
    out = []
    for pod in pods:
        job, node = pod.get("job"), pod.get("node")
        if job in wanted and node and model_of_node.get(node) != wanted[job]:
            out.append(f"{pod.get('name')} on {node} ({model_of_node.get(node, 'no model label')})")
    return out

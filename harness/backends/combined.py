"""Kueue's queue and admission in front of Volcano's placement (operations.combined, the `kueue-volcano` pair).

Neither project integrates with the other. The recipe: Kueue's batch/Job integration holds the Job suspended in
the tenant's LocalQueue until its Workload is admitted; the pods then name Volcano as their scheduler, and Volcano's
pod-group controller makes one PodGroup of them whose minMember is the Job's `group-min-member` annotation, so Volcano
places the gang. Volcano's queue is its `default` one (no quota of its own: Kueue's ClusterQueue is the one quota).
Who owns what is read back from the objects: the Workload (queue, admission), the PodGroup and the pods' scheduler
(placement), the pods' owner (lifecycle).
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from harness.backends.base import (AUTOSCALING, CONTROLLER_RESTART, UPGRADE, DRA, GPU_SHARING, SERVED_MODEL, SERVING,
                                   Controllers)
from harness.backends.detect import missing_controller_reason, missing_crd_reason
from harness.backends.kueue import KueueBackend
from harness.backends.volcano import SCHEDULER_NAME
from harness.jobs.model import GangJob
from harness.targets.target import Target

MIN_MEMBER_ANNOTATION = "scheduling.volcano.sh/group-min-member"
PAIR = "the pair is measured on batch training (Kueue's batch/Job integration in front of Volcano)"


class KueueVolcanoBackend(KueueBackend):
    name = "kueue-volcano"
    placed_by = "volcano"
    queued_by = "kueue"
    multicluster = ""  # the pair is measured on one cluster; MultiKueue is Kueue's own case
    lacking = {GPU_SHARING: KueueBackend.lacking[GPU_SHARING],
               SERVING: f"{PAIR}; a Deployment's pods are not a gang", SERVED_MODEL: f"{PAIR}; serving is not",
               DRA: f"{PAIR} with the device plugin's GPUs; DRA claims under both are not built",
               AUTOSCALING: f"{PAIR} on the cluster's nodes; an autoscaler's view of Volcano's pending pods is "
                            "Volcano's own case",
               CONTROLLER_RESTART: "two controllers admit its jobs; the order of their restart is not built",
               UPGRADE: "two projects' releases under one queue: upgrading one under the other is not built (Kueue's "
                        "own upgrade is the kueue backend's case)"}
    controllers = Controllers(("kueue", "volcano-scheduler"), ("kueue-controller-manager", "volcano-scheduler"),
                              needs=("volcano-controller-manager",))

    def unavailable_reason(self, target: Target) -> str | None:
        return (super().unavailable_reason(target)
                or missing_crd_reason(target.api, "scheduling.volcano.sh", "PodGroup", "volcano (places the pair's pods)")
                or missing_controller_reason(target, "volcano", ("volcano-scheduler", "volcano-controller-manager"),
                                             ("volcano-scheduler",)))

    def manifests(self, job: GangJob) -> list[dict[str, Any]]:
        [manifest] = super().manifests(job)
        manifest["metadata"].setdefault("annotations", {})[MIN_MEMBER_ANNOTATION] = str(job.pods)
        manifest["spec"]["template"]["spec"]["schedulerName"] = SCHEDULER_NAME
        return [manifest]

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

from harness.backends.base import (TOPOLOGY, AUTOSCALING, CONTROLLER_RESTART, UPGRADE, DRA, GPU_SHARING, SERVED_MODEL, SERVING,
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
               TOPOLOGY: f"{PAIR}; Kueue's topology assignment under Volcano's placement is not built",
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
                or missing_crd_reason(target.api, "scheduling.volcano.sh", "PodGroup",
                                      "volcano (places the pair's pods)")
                or missing_controller_reason(target, "volcano", ("volcano-scheduler", "volcano-controller-manager"),
                                             ("volcano-scheduler",)))

    def not_yet_running(self, api: client.ApiClient, namespace: str, jobs: list[str]) -> list[str]:
        """Jobs whose PodGroup Volcano has not yet marked Running. Volcano writes a group's phase once a second; a
        Job Kueue preempts while its group is still Inqueue leaves the group Inqueue, its GPUs counted as taken, and
        the job admitted in its place stays Pending (operations.combined)."""
        phases = group_phases(api, namespace)
        return [name for name in jobs if phases.get(name) != "Running"]

    def taken_in(self, api: client.ApiClient, namespace: str, job: str) -> bool:
        return group_phases(api, namespace).get(job) == "Inqueue"

    def manifests(self, job: GangJob) -> list[dict[str, Any]]:
        [manifest] = super().manifests(job)
        manifest["metadata"].setdefault("annotations", {})[MIN_MEMBER_ANNOTATION] = str(job.pods)
        manifest["spec"]["template"]["spec"]["schedulerName"] = SCHEDULER_NAME
        return [manifest]


def group_phases(api: client.ApiClient, namespace: str) -> dict[str, str]:
    """Job name -> the phase of the PodGroup Volcano's pod-group controller made of its pods."""
    groups = client.CustomObjectsApi(api).list_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", namespace, "podgroups")["items"]
    return {o["name"]: str((g.get("status") or {}).get("phase", "")) for g in groups
            for o in (g["metadata"].get("ownerReferences") or []) if o.get("kind") == "Job"}

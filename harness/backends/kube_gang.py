"""kube-scheduler's own gang (KEP-4671, the Workload API): a PodGroup with a gang policy beside the batch Job, whose
pods name it (`spec.schedulingGroup.podGroupName`). The scheduler holds a gang's pods at Permit, with the nodes it
found for them reserved, until `minCount` of them have nodes, then binds them together; a gang that cannot reach its
count within 5 minutes is released and retried. No queue: what it adds to `default` is the gang.

Served where the API server and the scheduler run with the GenericWorkload and GangScheduling gates (alpha in
Kubernetes v1.36, off by default; the sim turns them on) and the API server serves the PodGroup API:
scheduling.k8s.io/v1alpha2 in v1.36, v1beta1 in v1.37 (the same gang policy and pod field), the newer one used where
both are. Measured on the training criteria a gang decides; the rest of kube-scheduler is the `default` backend's.
"""

from __future__ import annotations

from typing import Any

from harness.backends.base import GANG
from harness.backends.default import DefaultBackend
from harness.cluster.apply import dynamic_client
from harness.jobs.model import GangJob
from harness.targets.target import Target

VERSIONS = ("scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha2")  # newest first
GATES = "GenericWorkload and GangScheduling"
CRITERIA = frozenset({"training.gang_admission", "training.queue_fairness", "training.priority_preemption",
                      "training.topology_placement", "training.packing"})


def pod_group(job: GangJob, api_version: str = VERSIONS[-1]) -> dict[str, Any]:
    """Pure: the job's PodGroup, all its pods one gang; a required placement is its topology constraint (the
    TopologyAwareWorkloadScheduling gate: every pod of the group in one domain of the label). The group has its
    pods' priority class: v1.37's scheduler refuses a group whose pods' priority differs from its own ("all pods in
    a single pod group should have the same priority as the pod group's priority, got 50 and 0", 2026-12-06)."""
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": job.pods}}}
    if job.priority_class:
        spec["priorityClassName"] = job.priority_class
    if job.placement and job.placement.required:
        spec["schedulingConstraints"] = {"topology": [{"key": job.placement.level}]}
    return {"apiVersion": api_version, "kind": "PodGroup",
            "metadata": {"name": job.name, "namespace": job.tenant.namespace}, "spec": spec}


class KubeGangBackend(DefaultBackend):
    name = "kube-gang"
    lacking = {k: v for k, v in DefaultBackend.lacking.items() if k != GANG}
    criteria = CRITERIA
    criteria_reason = ("kube-scheduler's own gang is measured where a gang decides (gang admission, queue fairness, "
                       "priority preemption, topology placement); everything else kube-scheduler does is the default backend's")

    api_version = VERSIONS[-1]  # the one the cluster serves, once unavailable_reason has asked

    def unavailable_reason(self, target: Target) -> str | None:
        served = {r.group_version for r in dynamic_client(target.api).resources.search(group="scheduling.k8s.io",
                                                                                       kind="PodGroup")}
        found = [v for v in VERSIONS if v in served]
        if found:
            self.api_version = found[0]
            return None
        return (f"{self.name}: PodGroup ({' or '.join(VERSIONS)}) is not served by {target.api.configuration.host}: "
                f"kube-scheduler's gang needs the {GATES} feature gates and the API's --runtime-config")

    @property
    def sim_schedulers(self) -> tuple[str, ...]:
        return ()  # kube-scheduler: every sim runs it

    def manifests(self, job: GangJob) -> list[dict[str, Any]]:
        """The PodGroup first: a pod whose group does not exist yet waits for it (PreEnqueue)."""
        [batch] = super().manifests(job)
        batch["spec"]["template"]["spec"]["schedulingGroup"] = {"podGroupName": job.name}
        return [pod_group(job, self.api_version), batch]

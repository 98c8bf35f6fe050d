"""Nothing left behind: a namespace per test, deleted with a timeout; sweeps of what a run created."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from kubernetes import client
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from harness.cluster.apply import dynamic_client
from harness.core.errors import WaitTimeout
from harness.cluster.lost_node import LOST_NODE_TAINT, lost_nodes, taken_off
from harness.cluster.manifests import MANAGED_LABEL, MANAGER, RUN_LABEL, TEST_LABEL, label_value_for_test
from harness.cluster.wait import wait_gone

# Cluster-scoped kinds suites may create (queues, priority classes), swept by label.
CLUSTER_SCOPED = (("kueue.x-k8s.io/v1beta2", "ClusterQueue"), ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"),
                  ("scheduling.volcano.sh/v1beta1", "Queue"), ("scheduling.k8s.io/v1", "PriorityClass"))
# Workloads suites create in the tenants' own namespaces (the queue model's), swept by label.
NAMESPACED = (("batch/v1", "Job"), ("batch.volcano.sh/v1alpha1", "Job"), ("ray.io/v1", "RayJob"),
              ("ray.io/v1", "RayService"), ("ray.io/v1", "RayCluster"), ("scheduling.run.ai/v2alpha2", "PodGroup"),
              ("apps/v1", "Deployment"), ("v1", "Service"), ("v1", "Pod"),
              ("resource.k8s.io/v1", "ResourceClaimTemplate"))
HTTP_NOT_FOUND = 404


@dataclass
class Leftovers:
    """What refused to go, reported in the record instead of being ignored."""

    items: list[str] = field(default_factory=list)


def new_namespace(core: client.CoreV1Api, run_id: str, test: str, prefix: str = "t") -> str:
    name = f"{prefix}-{run_id}-{uuid.uuid4().hex[:5]}"[:63]
    core.create_namespace({"metadata": {"name": name, "labels": {
        RUN_LABEL: run_id, TEST_LABEL: label_value_for_test(test), MANAGED_LABEL: MANAGER}}})
    return name


def delete_namespace(core: client.CoreV1Api, name: str, timeout_s: float) -> str | None:
    """Delete and wait until gone; None when gone, else a line saying what is still there."""
    return namespace_gone(core, name, timeout_s) if start_deleting_namespace(core, name) else None


def start_deleting_namespace(core: client.CoreV1Api, name: str) -> bool:
    """Ask for its deletion; False when it is gone already. kube's namespace controller waits 5 s before it empties
    a deleted namespace (its deletion grace period), then as long as its pods take to end."""
    try:
        core.delete_namespace(name, propagation_policy="Background")
    except client.ApiException as exc:
        if exc.status == HTTP_NOT_FOUND:
            return False
        raise
    return True


def namespace_gone(core: client.CoreV1Api, name: str, timeout_s: float) -> str | None:
    """Wait until a namespace being deleted is gone; None when gone, else a line saying what is still there."""
    try:
        wait_gone(core.list_namespace, f"Namespace {name}", timeout_s=timeout_s,
                  describe=lambda n: f"phase={n.status.phase}", field_selector=f"metadata.name={name}")
    except WaitTimeout:
        pods = [p.metadata.name for p in core.list_namespaced_pod(name).items]
        return f"namespace {name} still terminating after {timeout_s:.0f}s; pods left: {pods or 'none'}"
    return None


def sweep(api: client.ApiClient, run_id: str | None, timeout_s: float,
          say: Callable[[str], None] = print, namespaces_by: client.ApiClient | None = None) -> list[str]:
    """Delete every namespace and cluster-scoped object gpupoc labelled (of one run, or of all); return leftovers.
    `namespaces_by`: who deletes the labelled namespaces, where they were made by another identity than `api`'s
    (on the sim, the admin makes the project's tests' namespaces; no case of the suites makes one)."""
    selector = f"{MANAGED_LABEL}={MANAGER},{RUN_LABEL}" + (f"={run_id}" if run_id else "")  # never the queue model
    core = client.CoreV1Api(namespaces_by or api)
    namespaces = [n.metadata.name for n in core.list_namespace(label_selector=selector).items]
    dynamic = dynamic_client(api)
    for api_version, kind in NAMESPACED + CLUSTER_SCOPED:
        try:
            resource = dynamic.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            continue
        try:
            items = resource.get(label_selector=selector).items
        except NotFoundError:  # discovery (cached) knew it; the API server no longer serves it (a sim restarted
            continue           # without that scheduler)
        for item in items:
            namespace = item.metadata.namespace
            if namespace in namespaces:
                continue  # goes with its namespace
            try:
                resource.delete(name=item.metadata.name, namespace=namespace, propagation_policy="Background")
            except NotFoundError:
                continue  # already gone with its owner
            say(f"deleted {kind} {namespace + '/' if namespace else ''}{item.metadata.name}")
    for name in namespaces:
        core.delete_namespace(name, propagation_policy="Background")
        say(f"deleting namespace {name}")
    leftovers = [line for name in namespaces if (line := delete_namespace(core, name, timeout_s))]
    for node in lost_nodes(api):  # a run killed while one of its gangs had lost a node (topology placement)
        stays = taken_off(api, node)
        if stays:
            leftovers.append(stays)
        else:
            say(f"took the taint {LOST_NODE_TAINT} off node {node}")
    return leftovers

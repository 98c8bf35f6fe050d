"""One queue over several clusters (Kueue MultiKueue, operations.multicluster): what the manager and each worker
need, and the kubeconfig the manager reaches a worker with.

The manager's Kueue dispatches a Job of the shared queue to the workers (AdmissionCheck `kueue.x-k8s.io/multikueue`,
its MultiKueueConfig naming one MultiKueueCluster per worker); a worker's own Kueue admits the copy in the LocalQueue
of the same name. The manager reaches a worker as a ServiceAccount of the worker's (a token from the TokenRequest
API), with the rights Kueue's documentation lists; Kueue v0.19 refuses a kubeconfig that names its CA by path
(`InsecureKubeConfig`), so the CA goes in as data. Everything created carries gpupoc's label and is deleted by
`disconnect`.
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

import yaml
from kubernetes import client

from harness.cluster.apply import apply_objects, dynamic_client
from harness.cluster.cleanup import HTTP_NOT_FOUND, delete_namespace
from harness.cluster.wait import poll
from harness.cluster.manifests import MANAGED_LABEL, MANAGER, render
from harness.cluster.reach import OtherCluster
from harness.config.profile import Tenant
from harness.core.errors import WaitTimeout

QUEUE = "gpupoc-multicluster"  # the LocalQueue (in each tenant's namespace) and ClusterQueue, on every cluster
IDENTITY = "gpupoc-multikueue-manager"  # the manager's ServiceAccount on a worker
IDENTITY_NAMESPACE = "gpupoc-multikueue"
KUEUE_NAMESPACE = "kueue-system"  # where the manager's Kueue reads the workers' kubeconfigs (its `namespace`)
TOKEN_SECONDS = 3600
SEEN_TIMEOUT_S = 60.0  # how long the manager's Kueue may take to read the queue objects `connect` made
# The sensitivity: the workers' kubeconfigs name their CA by path, as a kubeconfig on disk does (Kueue refuses it)
CA_BY_PATH_ENV = "GPUPOC_MULTICLUSTER_CA_BY_PATH"
LABELS = {MANAGED_LABEL: MANAGER, "gpupoc.io/multicluster": "true"}


def tenant_on_queue(tenant: Tenant) -> Tenant:
    """The tenant submitting to the shared queue instead of its own."""
    return dataclasses.replace(tenant, queues={**tenant.queues, "kueue": QUEUE})


def kubeconfig(name: str, server: str, token: str, ca_pem: bytes = b"", ca_path: str = "") -> str:
    """Pure: a kubeconfig for one cluster and a token user; the CA as data, or (`ca_path`) by path."""
    cluster: dict[str, Any] = {"server": server}
    if ca_path:
        cluster["certificate-authority"] = ca_path
    else:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": IDENTITY, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": IDENTITY}}]})


def worker_objects(tenants: list[Tenant], gpus: int, gpu_resource: str) -> list[dict[str, Any]]:
    """Pure: a worker's queue (its own GPUs) and the manager's identity there."""
    return render("multicluster/worker.yaml.j2", tenants=tenants, gpus=gpus, gpu_resource=gpu_resource, queue=QUEUE,
                  identity=IDENTITY, identity_namespace=IDENTITY_NAMESPACE, labels=LABELS)


def manager_objects(tenants: list[Tenant], workers: list[dict[str, Any]], gpu_resource: str) -> list[dict[str, Any]]:
    """Pure: the manager's side; `workers` as {name, kubeconfig, gpus}."""
    return render("multicluster/manager.yaml.j2", tenants=tenants, workers=workers, gpu_resource=gpu_resource,
                  queue=QUEUE, kueue_namespace=KUEUE_NAMESPACE, labels=LABELS)


def node_gpus(api: client.ApiClient, gpu_resource: str) -> int:
    """The GPUs a cluster's nodes offer (allocatable)."""
    return sum(int((n.status.allocatable or {}).get(gpu_resource, 0)) for n in client.CoreV1Api(api).list_node().items)


def manager_token(api: client.ApiClient) -> str:
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(
        audiences=[], expiration_seconds=TOKEN_SECONDS))
    return str(client.CoreV1Api(api).create_namespaced_service_account_token(
        IDENTITY, IDENTITY_NAMESPACE, request).status.token)


def connect(manager: client.ApiClient, workers: list[OtherCluster], tenants: list[Tenant], gpu_resource: str,
            ca_by_path: bool = False) -> dict[str, int]:
    """Set up each worker and the manager; the GPUs of each worker. `ca_by_path`: the kubeconfigs name their CA by
    path (what Kueue refuses: the sensitivity)."""
    joined, gpus = [], {}
    for worker in workers:
        gpus[worker.name] = node_gpus(worker.api, gpu_resource)
        apply_objects(worker.api, worker_objects(tenants, gpus[worker.name], gpu_resource))
        token = manager_token(worker.api)
        joined.append({"name": worker.name, "gpus": gpus[worker.name], "kubeconfig": kubeconfig(
            worker.name, worker.server, token, worker.ca_pem, worker.ca_path if ca_by_path else "")})
    namespaces = client.CoreV1Api(manager)
    try:
        namespaces.read_namespace(KUEUE_NAMESPACE)
    except client.ApiException as exc:
        if exc.status != HTTP_NOT_FOUND:
            raise
        namespaces.create_namespace({"metadata": {"name": KUEUE_NAMESPACE, "labels": LABELS}})
    apply_objects(manager, manager_objects(tenants, joined, gpu_resource))
    wait_seen(manager, tenants, SEEN_TIMEOUT_S)
    return gpus


# What Kueue's Job webhook reads, from its own cache, to mark a Job of the queue for MultiKueue (spec.managedBy):
# the LocalQueue, its ClusterQueue, the ClusterQueue's AdmissionCheck. A Job created before the cache holds all three
# is not marked, and the manager then rejects its Workload ("Expecting spec.managedBy to be ...multikueue").
SEEN_KINDS = ("AdmissionCheck", "ClusterQueue", "LocalQueue")
CHECK_NOT_FOUND = "AdmissionCheckNotFound"


def unseen(objects: list[dict[str, Any]], expected: int) -> list[str]:
    """Pure: the queue objects Kueue has not yet read: no Active condition (True or False), or a ClusterQueue whose
    check it does not yet know (AdmissionCheckNotFound); plus a count of those not listed yet. [] when it has read
    all `expected`."""
    waiting = []
    for obj in objects:
        meta = obj["metadata"]
        active = next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == "Active"),
                      None)
        if active is None or active.get("reason") == CHECK_NOT_FOUND:
            name = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]
            waiting.append(f"{obj['kind']} {name}" + (f" ({CHECK_NOT_FOUND})" if active else ""))
    if len(objects) < expected:
        waiting.append(f"{expected - len(objects)} not listed yet")
    return waiting


def wait_seen(manager: client.ApiClient, tenants: list[Tenant], timeout_s: float) -> None:
    """Wait until the manager's Kueue has reconciled the queue objects (an Active condition, whatever its status:
    a worker Kueue cannot reach leaves them inactive, and that is for the case to measure)."""
    dynamic = dynamic_client(manager)
    selector = ",".join(f"{k}={v}" for k, v in LABELS.items())

    def read() -> list[dict[str, Any]]:
        return [obj.to_dict() for kind in SEEN_KINDS
                for obj in dynamic.resources.get(api_version="kueue.x-k8s.io/v1beta2", kind=kind).get(
                    label_selector=selector).items]

    expected = 2 + len(tenants)  # one AdmissionCheck, one ClusterQueue, a LocalQueue per tenant
    waiting = unseen(poll(read, lambda objs: not unseen(objs, expected), timeout_s), expected)
    if waiting:
        raise WaitTimeout(f"the manager's Kueue has not read the shared queue after {timeout_s:.0f} s; "
                          f"not reconciled: {', '.join(waiting)}")


# What `connect` creates, in the order to delete it: the queues before what they name.
KINDS = (("kueue.x-k8s.io/v1beta2", "LocalQueue"), ("kueue.x-k8s.io/v1beta2", "ClusterQueue"),
         ("kueue.x-k8s.io/v1beta2", "AdmissionCheck"), ("kueue.x-k8s.io/v1beta2", "MultiKueueConfig"),
         ("kueue.x-k8s.io/v1beta2", "MultiKueueCluster"), ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"),
         ("v1", "Secret"), ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
         ("rbac.authorization.k8s.io/v1", "ClusterRole"), ("v1", "ServiceAccount"))
NAMESPACE_GONE_S = 60.0


def disconnect(api: client.ApiClient) -> list[str]:
    """Delete what `connect` created on one cluster (by its label), its namespace waited for (a next `connect` could
    not create in it while it terminates); what could not be deleted."""
    dynamic, left = dynamic_client(api), []
    selector = ",".join(f"{k}={v}" for k, v in LABELS.items())
    for api_version, kind in KINDS:
        try:
            resource = dynamic.resources.get(api_version=api_version, kind=kind)
            for obj in resource.get(label_selector=selector).items:
                resource.delete(name=obj.metadata.name, namespace=obj.metadata.get("namespace"))
        except Exception as exc:  # noqa: BLE001 - a kind this cluster lacks, or a refusal: said, not raised
            if getattr(exc, "status", None) != HTTP_NOT_FOUND:
                left.append(f"{kind}: {str(exc).splitlines()[0][:160]}")
    core = client.CoreV1Api(api)
    for namespace in core.list_namespace(label_selector=selector).items:
        if problem := delete_namespace(core, namespace.metadata.name, NAMESPACE_GONE_S):
            left.append(problem)
    return left

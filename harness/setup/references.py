"""What a profile names must exist on a cluster whose queue model is its own (--queue-model keep): the tenants'
namespaces, and each tenant's queues (training, development) on every backend that is installed. Checked before any test creates anything."""

from __future__ import annotations

from kubernetes import client
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from harness.cluster.apply import dynamic_client
from harness.config.profile import Profile

# backend -> (apiVersion, kind, namespaced) of its queue objects
QUEUE_KINDS = {"kueue": ("kueue.x-k8s.io/v1beta2", "LocalQueue", True),
               "volcano": ("scheduling.volcano.sh/v1beta1", "Queue", False),
               "kai": ("scheduling.run.ai/v2", "Queue", False)}


def missing_references(api: client.ApiClient, profile: Profile, backends: tuple[str, ...]) -> list[str]:
    """What the profile names that the cluster lacks, one phrase each (empty when all is there)."""
    core, dynamic = client.CoreV1Api(api), dynamic_client(api)
    namespaces = {t.namespace for t in profile.tenants if _exists(core, t.namespace)}
    missing = [f"namespace {t.namespace} (tenant {t.name})" for t in profile.tenants if t.namespace not in namespaces]
    missing += [f"namespace {t.serving_namespace} (tenant {t.name}'s model services: serving_namespace)"
                for t in profile.tenants if t.serving_namespace and not _exists(core, t.serving_namespace)]
    for backend in backends:
        if backend not in QUEUE_KINDS:
            continue
        api_version, kind, namespaced = QUEUE_KINDS[backend]
        try:
            resource = dynamic.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            continue  # the backend is not installed: its tests SKIP with that reason
        for tenant in profile.tenants:
            for queue in (tenant.queues.get(backend), tenant.dev_queues.get(backend)):
                if not queue or (namespaced and tenant.namespace not in namespaces):
                    continue
                try:
                    resource.get(name=queue, namespace=tenant.namespace if namespaced else None)
                except NotFoundError:
                    where = f" in {tenant.namespace}" if namespaced else ""
                    missing.append(f"{backend} {kind} {queue}{where} (tenant {tenant.name})")
    return missing


def _exists(core: client.CoreV1Api, namespace: str) -> bool:
    try:
        core.read_namespace(namespace)
    except client.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def describe_missing(missing: list[str]) -> str:
    return (f"the profile names what the cluster lacks: {'; '.join(missing)}; create them (or run with "
            "--queue-model apply on the sim or kind), or fix the profile")

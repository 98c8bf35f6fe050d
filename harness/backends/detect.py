"""Is a backend installed here? Its CRDs are served and its controller is running."""

from __future__ import annotations

from kubernetes import client

from harness.cluster.apply import dynamic_client
from harness.targets.target import Target


def missing_crd_reason(api: client.ApiClient, group: str, kind: str, backend: str) -> str | None:
    if dynamic_client(api).resources.search(group=group, kind=kind):
        return None
    return (f"{backend}: {kind} ({group}) is not served by {api.configuration.host}: "
            f"install {backend} or drop it from --backends")


def missing_controller_reason(target: Target, backend: str, sim_components: tuple[str, ...],
                              deployments: tuple[str, ...]) -> str | None:
    """On the sim: its processes are running. Elsewhere: one of `deployments` has an available replica."""
    if target.features.runs_sim_workloads:
        down = target.controllers_down(sim_components)
        return f"{backend}: {', '.join(down)} not running on the sim (gpupoc sim status)" if down else None
    api = target.api
    apps = client.AppsV1Api(api)
    for name in deployments:
        found = apps.list_deployment_for_all_namespaces(field_selector=f"metadata.name={name}").items
        if any((d.status.available_replicas or 0) > 0 for d in found):
            return None
    return f"{backend}: no available controller Deployment ({', '.join(deployments)}) on {api.configuration.host}"

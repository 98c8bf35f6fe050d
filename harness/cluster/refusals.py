"""Why the platform refuses the work: what a controller could not create, and what a kubelet could not start.

A real cluster refuses pods for reasons of its own (Pod Security admission, a ResourceQuota, a LimitRange, an
admission webhook, an image it cannot pull). A wait for pods that never come ends early with that reason, read
from the controller's and the kubelet's own facts (FailedCreate events of a ReplicaSet or Job, the pods' waiting
reasons), instead of timing out with "not done after 120s". The run could not be made: an ERROR, with the reason.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from kubernetes import client

# A container waiting for one of these will not start by waiting longer.
STUCK_WAITING = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError",
                 "CreateContainerError", "RunContainerError", "CrashLoopBackOff")


def not_started(pods: list[dict[str, Any]]) -> str | None:
    """Pure: the first pod whose container waits for a reason that waiting will not end, with the kubelet's
    message, e.g. "pod p: container train: ImagePullBackOff (Back-off pulling image "x")"."""
    for pod in pods:
        status = pod.get("status") or {}
        for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
            waiting = (container.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in STUCK_WAITING:
                message = str(waiting.get("message") or "").strip()[:300]
                return (f"pod {pod['metadata']['name']}: container {container.get('name')}: {waiting['reason']}"
                        + (f" ({message})" if message else ""))
    return None


def creation_refused(api: client.ApiClient, namespace: str, owners: set[str], since_before: datetime) -> str | None:
    """A controller that keeps failing to create the pods of one of `owners` (a Job, a Volcano Job, a PodGroup, by
    name) since before `since_before`: its FailedCreate events, more than one (each try names another pod, so each is
    an event of its own; a refusal of a moment, a webhook's cache behind, is retried and passes), with the API
    server's latest answer."""
    by_owner = failed_creates(api, namespace, owners)
    for name, tries in sorted(by_owner.items()):
        stamps = sorted(e.first_timestamp or e.event_time or e.metadata.creation_timestamp for e in tries)
        count = sum(e.count or 1 for e in tries)
        if count >= 2 and stamps[0] < since_before:
            return (f"{tries[0].involved_object.kind} {name} could not create its pods ({count} tries): "
                    f"{latest_answer(tries)}")
    return None


def not_created(api: client.ApiClient, namespace: str, owner_prefix: str, since_before: datetime) -> str | None:
    """A ReplicaSet in `namespace` whose name starts with `owner_prefix` (a Deployment's) that has failed to create
    its pods since before `since_before` (its ReplicaFailure condition, which the ReplicaSet controller clears once a
    pod is created: a refusal of a moment, a webhook's cache behind, is not one), with the API server's latest answer
    (its latest FailedCreate event: the condition keeps the first refusal's message while it stays set)."""
    for replica_set in client.AppsV1Api(api).list_namespaced_replica_set(namespace).items:
        name = replica_set.metadata.name or ""
        if not name.startswith(owner_prefix):
            continue
        for condition in (replica_set.status.conditions or []) if replica_set.status else []:
            if (condition.type == "ReplicaFailure" and condition.status == "True"
                    and condition.last_transition_time and condition.last_transition_time < since_before):
                tries = failed_creates(api, namespace, {name}).get(name)
                answer = latest_answer(tries) if tries else (condition.message or condition.reason or "").strip()[:600]
                return f"ReplicaSet {name} could not create its pods: {answer}"
    return None


def failed_creates(api: client.ApiClient, namespace: str, owners: set[str]) -> dict[str, list[Any]]:
    """The FailedCreate events in `namespace` of each of `owners` that has any, by owner name."""
    events = client.CoreV1Api(api).list_namespaced_event(namespace, field_selector="reason=FailedCreate").items
    by_owner: dict[str, list[Any]] = {}
    for event in events:
        if event.involved_object.name in owners:
            by_owner.setdefault(event.involved_object.name, []).append(event)
    return by_owner


def latest_answer(tries: list[Any]) -> str:
    """The API server's answer to the latest of a controller's failed creations."""
    latest = max(tries, key=lambda e: e.last_timestamp or e.event_time or e.metadata.creation_timestamp)
    return (latest.message or "").strip()[:600]

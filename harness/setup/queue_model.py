"""`gpupoc setup`: the reference queue model from manifests/setup/, for the sim and for kind.

On a staging cluster the cluster owns its queue model: the profile points at existing queues
and nothing is created.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes import client

from harness import backends
from harness.cluster.apply import apply_objects
from harness.backends.kueue import models_cluster_queue
from harness.backends.slurm import SlurmBackend, accounts_of
from harness.cluster.cleanup import HTTP_NOT_FOUND
from harness.core.errors import ConfigError
from harness.cluster.manifests import MANAGED_LABEL, MANAGER, render
from harness.config.profile import Profile
from harness.jobs.model import model_queue_name, model_slug
from harness.setup.topology import hypernodes
from harness.targets.target import Target

MODEL_LABEL = "gpupoc.io/queue-model"
# backend -> the template of its queues (the default backend has none)
QUEUE_TEMPLATES = {"kueue": "setup/kueue.yaml.j2", "volcano": "setup/volcano.yaml.j2", "kai": "setup/kai.yaml.j2"}


def may_create_queue_model(target: Target) -> bool:
    return target.features.creates_queue_model


def queue_model(profile: Profile, present: list[str], nodes: list[dict[str, Any]] | None = None
                ) -> list[dict[str, Any]]:
    """Pure: the objects of the reference queue model for the backends present; with the cluster's `nodes` and a
    topology in the profile, Volcano's HyperNodes of their domains."""
    labels = {MANAGED_LABEL: MANAGER, MODEL_LABEL: "reference"}
    objects = render("setup/tenants.yaml.j2", tenants=profile.tenants, labels=labels)
    objects += render("setup/priorityclasses.yaml.j2", labels=labels)
    for name in present:
        if name == "kueue":  # its queues name the GPU resource, and one of them has the topology's flavor
            objects += render(QUEUE_TEMPLATES[name], tenants=profile.tenants, labels=labels,
                              gpu_resource=profile.gpu.resource, topology=profile.gpu.topology,
                              models=model_flavors(profile), model_label=profile.gpu.accelerator.discovery.model,
                              models_queue=models_cluster_queue)
        elif name == "volcano":  # its queues name the GPU resource; KAI's count GPUs as such
            objects += render(QUEUE_TEMPLATES[name], tenants=profile.tenants, labels=labels,
                              gpu_resource=profile.gpu.resource, models=model_flavors(profile))
            if profile.gpu.topology and nodes:
                objects += hypernodes(profile.gpu.topology, nodes, labels)
        elif name == "kai":
            objects += render(QUEUE_TEMPLATES[name], tenants=profile.tenants, labels=labels,
                              topology=profile.gpu.topology, models=model_flavors(profile))
    return objects


def model_flavors(profile: Profile) -> list[dict[str, Any]]:
    """Pure: each GPU model the profile quotas (gpu.models): Kueue's flavor of it, the model in Volcano's and KAI's
    queue names (model_queue), and each tenant's quota of it."""
    return [{"flavor": "gpupoc-" + model_slug(m.model), "model": m.model,
             "queue": {t.name: {backend: model_queue_name(queue, m.model) for backend, queue in t.queues.items()}
                       for t in profile.tenants},
             "quota": {t.name: m.of(t.name) for t in profile.tenants}} for m in profile.gpu.models]


def replace_changed_priority_classes(api: client.ApiClient, objects: list[dict[str, Any]]) -> list[str]:
    """Delete our PriorityClasses whose value the model changed (the API refuses to update a value)."""
    scheduling = client.SchedulingV1Api(api)
    replaced = []
    for obj in (o for o in objects if o["kind"] == "PriorityClass"):
        name = obj["metadata"]["name"]
        try:
            existing = scheduling.read_priority_class(name)
        except client.ApiException as exc:
            if exc.status == HTTP_NOT_FOUND:
                continue
            raise
        if existing.value == obj["value"]:
            continue
        if (existing.metadata.labels or {}).get(MANAGED_LABEL) != MANAGER:
            raise ConfigError(f"PriorityClass {name} exists with value {existing.value}, not gpupoc's "
                              f"{obj['value']}, and gpupoc did not create it: remove or rename it")
        scheduling.delete_priority_class(name)
        replaced.append(f"{name} ({existing.value} -> {obj['value']})")
    return replaced


def queue_systems(chosen: tuple[str, ...] | None) -> tuple[str, ...]:
    """Pure: the queue systems whose queues the chosen backends' jobs use (every one where none are chosen): the
    pair's Kueue and Volcano, KubeRay's Kueue."""
    if chosen is None:
        return tuple(QUEUE_TEMPLATES)
    used = {s for name in chosen if name in backends.ALL for s in backends.ALL[name].sim_schedulers}
    return tuple(name for name in QUEUE_TEMPLATES if name in used)


def apply_queue_model(target: Target, profile: Profile, say: Callable[[str], None] = print,
                      slurm: bool = True, chosen: tuple[str, ...] | None = None) -> list[str]:
    """The reference queue model on the sim or kind: the tenants, the priority classes and the queues of the chosen
    backends (all of them where none are chosen) that the cluster runs; Slurm's accounts where it runs Slurm."""
    if not may_create_queue_model(target):
        raise ConfigError(f"context {target.context} is not the sim or a kind cluster: on staging the cluster owns "
                          "its queue model; point the profile's tenants[].queues at the existing queues instead")
    available = backends.detect(target, queue_systems(chosen))
    present = [name for name, reason in available.items() if reason is None]
    for name, reason in available.items():
        if reason:
            say(f"  {name}: no queues created ({reason})")
    nodes = None
    if "volcano" in present and profile.gpu.topology:
        nodes = target.api.sanitize_for_serialization(client.CoreV1Api(target.api).list_node().items)
    objects = queue_model(profile, present, nodes)
    for replaced in replace_changed_priority_classes(target.api, objects):
        say(f"  PriorityClass {replaced}: value changed in the reference model; replaced (a value cannot change)")
    applied = apply_objects(target.api, objects)
    say(f"queue model applied ({len(applied)} objects) for {', '.join(present) or 'no queueing backend'}")
    slurm = slurm and (chosen is None or "slurm" in chosen)
    return [f"{o.kind}/{o.metadata.name}" for o in applied] + (apply_slurm_model(target, profile, say) if slurm else [])


def apply_slurm_model(target: Target, profile: Profile, say: Callable[[str], None]) -> list[str]:
    """The sim's Slurm, when it runs one: accounts, users and QOS from the profile (sacctmgr)."""
    slurm = backends.ALL.get("slurm")
    if not target.features.own_processes or not isinstance(slurm, SlurmBackend) or slurm.unavailable_reason(target):
        return []
    slurm.apply_reference_model(profile)
    accounts = sorted(accounts_of(profile).values())
    say(f"Slurm reference model applied: accounts {', '.join(accounts)}, QOS low and high")
    return [f"SlurmAccount/{a}" for a in accounts]

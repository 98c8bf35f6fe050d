"""Upgrade in place on recorded objects: which queues and jobs a release refuses, how far a served CRD is behind the
release's own; and the earlier releases the build offers."""

import copy
from typing import Any

from harness.criteria.operations.upgrade import crds_behind, drift, refused, summary
from harness.sim import build
from harness.config.versions import load_pins


def crd(name: str, properties: dict[str, Any], rules: list[dict[str, str]] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": {"spec": {"type": "object", "properties": properties}}}
    if rules is not None:
        schema["x-kubernetes-validations"] = rules
    return {"metadata": {"name": name}, "spec": {"versions": [
        {"name": "v1beta1", "served": True, "storage": False},
        {"name": "v1beta2", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}]}}


RELEASE = crd("workloads.kueue.x-k8s.io",
              {"podSets": {"type": "array", "maxItems": 18, "description": "at most 18",
                           "items": {"type": "object", "properties": {"count": {"type": "integer"}}}},
               "queueName": {"type": "string"}},
              [{"rule": "self.a == oldSelf.a", "message": "immutable"}])


def test_a_crd_served_as_the_release_ships_it_is_not_behind() -> None:
    served = copy.deepcopy(RELEASE)
    served["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["podSets"][
        "description"] = "at most 10"  # a description alone is no difference
    assert drift(served, RELEASE) == []
    assert crds_behind({"workloads.kueue.x-k8s.io": served}, [RELEASE]) == {}


def test_an_older_crd_is_behind_by_its_limits_fields_and_rules() -> None:
    older = crd("workloads.kueue.x-k8s.io",
                {"podSets": {"type": "array", "maxItems": 10, "items": {"type": "object", "properties": {}}}},
                [{"rule": "true", "message": "old"}])
    found = drift(older, RELEASE)
    assert ".spec.podSets maxItems: 10 (release: 18)" in found
    assert ".spec.podSets[].count: missing" in found and ".spec.queueName: missing" in found
    assert ". x-kubernetes-validations: 1 of the release's 1 rules not served" in found
    assert drift(None, RELEASE) == ["not installed"]


def test_served_versions_count_too() -> None:
    served = copy.deepcopy(RELEASE)
    served["spec"]["versions"][0]["served"] = False
    assert drift(served, RELEASE)[0].startswith("versions ")


def test_the_summary_names_each_crd_behind_with_its_first_differences() -> None:
    line = summary({"a.x": ["one", "two", "three"], "b.x": ["not installed"]})
    assert line == "a.x: one; two and 1 more | b.x: not installed"


def test_a_queue_is_refused_when_not_active_and_a_rayjob_when_it_fails_validation() -> None:
    active = {"kind": "ClusterQueue", "status": {"conditions": [{"type": "Active", "status": "True"}]}}
    inactive = {"kind": "LocalQueue", "status": {"conditions": [
        {"type": "Active", "status": "False", "reason": "ClusterQueueDoesNotExist", "message": "missing"}]}}
    assert refused(active) == ""
    assert refused(inactive) == "Active False: ClusterQueueDoesNotExist missing"
    assert refused({"kind": "ClusterQueue", "status": {}}) == "no Active condition"
    assert refused({"kind": "RayJob", "status": {"jobDeploymentStatus": "ValidationFailed", "message": "bad"}}) == \
        "ValidationFailed: bad"
    assert refused({"kind": "RayJob", "status": {"jobDeploymentStatus": "Running"}}) == ""
    assert refused({"kind": "Workload", "status": {}}) == ""  # admission is measured apart


def test_the_earlier_releases_are_built_only_when_asked_and_apart_from_the_pinned_ones() -> None:
    pins = load_pins()
    recipes = build.recipes(pins, build.paths.build_root() / "logs")
    defaults = [r.name for r in build.selected(recipes, (), ())]
    assert "kueue-previous" not in defaults and "kuberay-previous" not in defaults
    chosen = {r.name: r for r in build.selected(recipes, (), ("upgrade",))}
    assert chosen["kueue-previous"].version == pins.kueue_previous != pins.kueue
    assert chosen["kuberay-previous"].binaries == ("ray-operator-previous",)  # beside the pinned ray-operator

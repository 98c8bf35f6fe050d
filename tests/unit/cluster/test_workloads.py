"""What the pods run is profile data: the kind profile's pods name no sim image and carry no sim annotation; the
sim's keep what kwok and the data plane read; pod defaults reach every pod; the preflight refuses the sim's images
elsewhere."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from harness.backends import ALL
from harness.cluster.manifests import dressed, exit_request, labelled
from harness.config.profile import Profile, load_profile, parse_profile
from harness.config.workloads import (EXIT_REQUEST_ANNOTATION, PODINFO_DIR, RUN_FOR_ANNOTATION, SAMPLE_CONTAINER,
                                      SIM_ANNOTATION_PREFIX, SIM_IMAGE_PREFIX, PodDefaults, WorkloadSpec)
from harness.core.errors import ConfigError, HarnessError
from harness.core.paths import REPO_ROOT
from harness.jobs.model import GangJob
from harness.jobs.service import ModelService
from harness.setup.preflight import MISSING, OK, workload_checks

KIND, SIM = (load_profile(REPO_ROOT / "profiles" / name) for name in ("kind.yaml", "sim.yaml"))


def every_workload(profile: Profile) -> list[dict[str, Any]]:
    """What the suites submit, as the job system dresses it: each backend's gang job, its model service."""
    tenant = profile.tenants[0]
    objects: list[dict[str, Any]] = []
    for backend in ALL.values():
        try:
            jobs = backend.manifests(GangJob("train", tenant, 2, 1, priority_class="gpupoc-high", run_for_s=12.5))
            if profile.workloads.sample.image:  # a case of the sample is skipped where the profile names none
                jobs += backend.manifests(GangJob("sample", tenant, 1, 1, container=SAMPLE_CONTAINER))
            serving = ModelService("llm", tenant, model="m1", version="v2").deployment(backend.serving_pod(tenant))
        except HarnessError:  # Slurm: jobs through slurmrestd, no Kubernetes manifests
            continue
        objects += dressed(labelled([*jobs, serving], "run", "test"), profile.workloads)
    return objects


def walk(node: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from walk(item)


def test_the_kind_profile_pods_name_no_sim_image_and_carry_no_sim_annotation() -> None:
    objects = every_workload(KIND)
    images = {value for key, value in walk(objects) if key == "image"}
    assert images == {"busybox:1.36.1", "gpupoc:dev", "rayproject/ray:2.52.0"}
    sim_keys = {k for key, value in walk(objects) if key in ("annotations", "labels")
                for k in value if k.startswith(SIM_ANNOTATION_PREFIX)}
    assert not sim_keys
    assert not WorkloadSpec().gpu_probe_image.startswith(SIM_IMAGE_PREFIX)
    assert KIND.workloads.sim_only() == []


def test_suites_write_no_image_of_their_own() -> None:
    """Pods the suites build by hand (the quota's pod, the isolation probe's Job) leave the image to the profile."""
    for path in sorted((REPO_ROOT / "suites").rglob("*.py")):
        found = re.findall(r'"image":\s*"([^"]+)"', path.read_text())
        assert not found, f"{path.relative_to(REPO_ROOT)} names images {found}: put them in the profile's workloads"


def test_the_sim_profile_keeps_what_kwok_and_the_data_plane_read() -> None:
    objects = every_workload(SIM)
    images = {value for key, value in walk(objects) if key == "image"}
    assert images == {"sim/trainer:1", "sim/vllm:0.9"}
    annotations = [value for key, value in walk(objects) if key == "annotations"]
    assert any(RUN_FOR_ANNOTATION in a for a in annotations)
    assert any(a.get(SIM_ANNOTATION_PREFIX + "model-server") == "true" for a in annotations)


def test_a_member_runs_for_its_duration_and_exits_when_asked() -> None:
    job = GangJob("train", SIM.tenants[0], 1, 1, run_for_s=12.5)
    pod = dressed(ALL["volcano"].manifests(job), KIND.workloads)[0]["spec"]["tasks"][0]["template"]
    container = pod["spec"]["containers"][0]
    assert container["command"][:2] == ["sh", "-c"] and "running for 13s" in container["command"][2]
    assert EXIT_REQUEST_ANNOTATION.replace("/", "[/]") in container["command"][2]
    assert container["volumeMounts"] == [{"name": "gpupoc-podinfo", "mountPath": PODINFO_DIR, "readOnly": True}]
    assert pod["spec"]["volumes"][0]["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"] == "metadata.annotations"
    assert exit_request(3) == {"metadata": {"annotations": {EXIT_REQUEST_ANNOTATION: "3"}}}
    small = replace(KIND.workloads, trainer=replace(KIND.workloads.trainer, cpu="100m", memory="64Mi"))
    resources = dressed(ALL["default"].manifests(job), small)[0]["spec"]["template"]["spec"]["containers"][0][
        "resources"]
    assert resources == {"requests": {"cpu": "100m", "memory": "64Mi"},
                         "limits": {"cpu": "100m", "memory": "64Mi", "nvidia.com/gpu": "1"}}


def test_every_pod_meets_pod_security_restricted_and_gets_the_pod_defaults() -> None:
    defaults = PodDefaults(tolerations=({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},),
                           node_selector={"pool": "gpu"}, image_pull_secrets=("regcred",), runtime_class_name="nvidia")
    for obj in every_workload(replace(KIND, workloads=replace(KIND.workloads, pod_defaults=defaults))):
        for key, spec in walk(obj):
            if key != "spec" or "containers" not in spec:
                continue
            assert spec["securityContext"]["runAsNonRoot"] and spec["securityContext"]["seccompProfile"] == {
                "type": "RuntimeDefault"}
            for container in spec["containers"]:
                assert container["securityContext"] == {"allowPrivilegeEscalation": False,
                                                        "capabilities": {"drop": ["ALL"]}}
            assert spec["tolerations"][-1]["key"] == "nvidia.com/gpu" and spec["nodeSelector"]["pool"] == "gpu"
            assert spec["imagePullSecrets"] == [{"name": "regcred"}] and spec["runtimeClassName"] == "nvidia"


def test_a_model_server_gets_its_args_port_and_probe_path() -> None:
    server = replace(KIND.workloads.model_server, port=9000, readiness_path="/v1/models")
    deployment = next(o for o in every_workload(replace(KIND, workloads=replace(KIND.workloads, model_server=server)))
                      if o["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["standin", "--port", "9000", "--model", "m1", "--set", "version=v2"]
    assert container["ports"][0]["containerPort"] == 9000
    assert container["readinessProbe"]["httpGet"] == {"path": "/v1/models", "port": 9000}


def test_the_preflight_refuses_the_sims_images_elsewhere_naming_the_field() -> None:
    assert [c.status for c in workload_checks(SIM.workloads, runs_sim_workloads=True)] == [OK]
    assert [c.status for c in workload_checks(KIND.workloads, runs_sim_workloads=False)] == [OK]
    refused = workload_checks(SIM.workloads, runs_sim_workloads=False)
    assert all(c.status == MISSING and c.blocking for c in refused)
    assert [c.what.split(" ")[0] for c in refused] == ["workloads.trainer.image", "workloads.model_server.image",
                                                       "workloads.ray.image", "workloads.sim_annotations"]
    assert "set workloads.trainer.image in the profile" in refused[0].fix


@pytest.mark.parametrize(("section", "message"), [
    ({"trainer": {"image": "busy box"}}, "workloads.trainer.image: must be an image reference without spaces"),
    ({"trainer": {"command": []}}, "workloads.trainer.command: must name a command"),
    ({"model_server": {"port": 0}}, "workloads.model_server.port: must be a port 1-65535"),
    ({"pod_defaults": {"security": "baseline"}}, "workloads.pod_defaults.security: must be restricted"),
    ({"pod_defaults": {"priority_classes": {"urgent": "x"}}}, "workloads.pod_defaults.priority_classes.urgent: "
                                                              "unknown field"),
    ({"gpu": {}}, "workloads.gpu: unknown field"),
    ({"trainer": {"cpu": "lots"}}, "workloads.trainer.cpu: must be a Kubernetes quantity"),
])
def test_a_bad_workloads_section_is_named(section: dict[str, Any], message: str) -> None:
    import yaml
    data = yaml.safe_load((REPO_ROOT / "profiles" / "kind.yaml").read_text())
    data["workloads"] = section
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_profile(data, "kind.yaml")


def test_a_profile_that_names_no_images_runs_nothing_of_the_sims() -> None:
    """What a cluster runs is its profile's to say: without a workloads section nothing defaults to the sim's images
    or annotations; the preflight names the trainer image every training case needs, and a case that needs another
    image the profile does not name ends in ERROR naming that field."""
    bare = WorkloadSpec()
    assert bare.sim_only() == [] and not bare.sim_annotations
    refused = workload_checks(bare, runs_sim_workloads=True)
    assert [(c.status, c.blocking, c.what) for c in refused] == [
        (MISSING, True, "the profile names no workloads.trainer.image")]
    with pytest.raises(ConfigError, match="the profile names no workloads.model_server.image"):
        service = ModelService("llm", KIND.tenants[0], model="m1")
        dressed([service.deployment(ALL["kueue"].serving_pod(KIND.tenants[0]))], bare)
    with pytest.raises(ConfigError, match="names no workload sample image"):
        dressed(ALL["kueue"].manifests(GangJob("s", KIND.tenants[0], 1, 1, container=SAMPLE_CONTAINER)), bare)

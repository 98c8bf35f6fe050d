"""Manifest templates under manifests/: rendered with parameters, labelled, ready to apply.

Templates are Jinja2 with strict undefined; a template error, a missing or an unknown
parameter raises a ConfigError naming the file and the line.
"""

from __future__ import annotations

import re
import traceback
from typing import Any

import jinja2
import yaml
from jinja2 import meta

from harness.config.workloads import (EXIT_REQUEST_ANNOTATION, MODEL_ANNOTATION, NO_SAMPLE, PODINFO_DIR,
                                      PODINFO_VOLUME, RAY_IMAGE, RUN_FOR_ANNOTATION, SAMPLE_CONTAINER,
                                      SAMPLE_DATA_DIR, SAMPLE_DATA_VOLUME, SERVER_CONTAINER, SERVER_IMAGE,
                                      SIM_ANNOTATION_PREFIX, TRAIN_CONTAINER, TRAINER_IMAGE, Sample, WorkloadSpec)
from harness.core.errors import ConfigError
from harness.core.paths import MANIFESTS_DIR

MANIFESTS = MANIFESTS_DIR
RUN_LABEL = "gpupoc.io/run-id"
TEST_LABEL = "gpupoc.io/test"
MANAGED_LABEL = "app.kubernetes.io/managed-by"
MANAGER = "gpupoc"
RAY_JOB = "RayJob"
RAY_SERVICE = "RayService"
RAY_CLUSTER = "RayCluster"

_ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(str(MANIFESTS)), undefined=jinja2.StrictUndefined,
                          keep_trailing_newline=True, autoescape=False)


def _first_use(source: str, name: str) -> int:
    for number, line in enumerate(source.splitlines(), 1):
        if re.search(rf"{{[{{%][^}}]*\b{re.escape(name)}\b", line):
            return number
    return 1


def _template_line(exc: BaseException, filename: str) -> int | None:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.endswith(filename)]
    return frames[-1].lineno if frames else None


def render(name: str, /, **params: Any) -> list[dict[str, Any]]:
    """Render manifests/`name` with exactly the parameters it uses; return its YAML documents."""
    path = MANIFESTS / name
    where = f"manifests/{name}"
    try:
        source = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read the template ({exc.strerror})") from exc
    try:
        used = meta.find_undeclared_variables(_ENV.parse(source, name=name, filename=str(path)))
        template = _ENV.get_template(name)
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(f"{where}:{exc.lineno}: template error: {exc.message}") from exc
    missing = sorted(used - set(params))
    if missing:
        raise ConfigError(f"{where}:{_first_use(source, missing[0])}: missing parameter {missing[0]!r} "
                          f"(the template uses: {', '.join(sorted(used))})")
    unknown = sorted(set(params) - used)
    if unknown:
        raise ConfigError(f"{where}: unknown parameter {unknown[0]!r} (the template uses: {', '.join(sorted(used))})")
    try:
        text = template.render(**params)
    except jinja2.UndefinedError as exc:
        line = _template_line(exc, name)
        raise ConfigError(f"{where}:{line or '?'}: {exc.message}") from exc
    try:
        return [doc for doc in yaml.safe_load_all(text) if doc]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(f"{where}: rendered YAML is invalid at rendered line "
                          f"{mark.line + 1 if mark else '?'}: {getattr(exc, 'problem', exc)}") from exc


def labelled(objects: list[dict[str, Any]], run_id: str, test: str = "") -> list[dict[str, Any]]:
    """Mark objects (and their pod templates) as gpupoc's: only labelled objects are ever changed or deleted."""
    marks = {RUN_LABEL: run_id, MANAGED_LABEL: MANAGER}
    if test:
        marks[TEST_LABEL] = label_value_for_test(test)
    for obj in objects:
        obj.setdefault("metadata", {}).setdefault("labels", {}).update(marks)
        for template in pod_templates(obj.get("spec")):
            template.setdefault("metadata", {}).setdefault("labels", {}).update(marks)
    return objects


def pod_templates(node: Any) -> list[dict[str, Any]]:
    """Every pod template inside a spec: Job/Deployment `template`, Volcano `tasks[].template`, Ray groups."""
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "template" and isinstance(value, dict) and "containers" in (value.get("spec") or {}):
                found.append(value)
            else:
                found += pod_templates(value)
    elif isinstance(node, list):
        for item in node:
            found += pod_templates(item)
    return found


def dressed(objects: list[dict[str, Any]], workloads: WorkloadSpec) -> list[dict[str, Any]]:
    """Put the profile's workloads into the pods of `objects` (bare Pods and pod templates): a training member's
    image and command (how long it runs: the member's run-for annotation), a model server's image, args and port,
    the workload sample's image, args, volume and metrics port, and on every pod the profile's pod defaults. Where the target is not the sim, the sim's annotations and labels
    (sim.gpupoc.io/) are removed: a real cluster never receives them."""
    for obj in objects:
        pods = [obj] if obj.get("kind") == "Pod" else pod_templates(obj.get("spec"))
        for pod in pods:
            _dress_pod(pod, workloads, ray=obj.get("kind") in (RAY_JOB, RAY_SERVICE, RAY_CLUSTER))
        if obj.get("kind") == RAY_SERVICE:
            _dress_serve_config(obj["spec"], workloads.ray_serve_app)
    return objects


def _dress_serve_config(spec: dict[str, Any], import_path: str) -> None:
    """The profile's Serve application into a RayService's serveConfigV2 where it names none."""
    config = yaml.safe_load(spec.get("serveConfigV2") or "{}") or {}
    for app in config.get("applications") or []:
        app["import_path"] = app.get("import_path") or import_path
    spec["serveConfigV2"] = yaml.safe_dump(config, sort_keys=False)


def _dress_pod(pod: dict[str, Any], workloads: WorkloadSpec, ray: bool) -> None:
    meta, spec = pod.setdefault("metadata", {}), pod.setdefault("spec", {})
    annotations = meta.get("annotations") or {}
    run_for_s = float(str(annotations.get(RUN_FOR_ANNOTATION, "30s")).rstrip("s") or 30)
    pod_security, container_security = workloads.pod_defaults.security_contexts()
    for container in spec.get("containers") or []:
        if ray:  # KubeRay runs `ray start` in the head and the workers: Ray's image, KubeRay's command
            container["image"] = workloads.image(RAY_IMAGE)
        elif container.get("name") == TRAIN_CONTAINER:
            container["image"] = workloads.image(TRAINER_IMAGE)
            container["command"] = workloads.trainer.command_for(run_for_s)
            _set_resources(container, workloads.trainer.cpu, workloads.trainer.memory)
            _mount_podinfo(spec, container)
        elif container.get("name") == SAMPLE_CONTAINER:
            _dress_sample(spec, container, workloads.sample)
        elif container.get("name") == SERVER_CONTAINER:
            _dress_server(container, workloads, str(annotations.get(MODEL_ANNOTATION, "")),
                          str((meta.get("labels") or {}).get("version", "")))
        if container_security:
            container["securityContext"] = {**container_security, **(container.get("securityContext") or {})}
    pods = workloads.pod_defaults
    if pod_security:
        spec["securityContext"] = {**pod_security, **(spec.get("securityContext") or {})}
    if pods.tolerations:
        spec["tolerations"] = [*(spec.get("tolerations") or []), *pods.tolerations]
    if pods.node_selector:
        spec["nodeSelector"] = {**pods.node_selector, **(spec.get("nodeSelector") or {})}
    if pods.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": name} for name in pods.image_pull_secrets]
    if pods.runtime_class_name:
        spec.setdefault("runtimeClassName", pods.runtime_class_name)
    if not workloads.sim_annotations:
        for key in ("annotations", "labels"):
            if meta.get(key):
                meta[key] = {k: v for k, v in meta[key].items() if not k.startswith(SIM_ANNOTATION_PREFIX)}


def _mount_podinfo(spec: dict[str, Any], container: dict[str, Any]) -> None:
    """The pod's annotations as a file: how a case's exit request reaches the process."""
    container.setdefault("volumeMounts", []).append({"name": PODINFO_VOLUME, "mountPath": PODINFO_DIR,
                                                     "readOnly": True})
    spec.setdefault("volumes", []).append({"name": PODINFO_VOLUME, "downwardAPI": {"items": [
        {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}]}})


def _dress_sample(spec: dict[str, Any], container: dict[str, Any], sample: Sample) -> None:
    """The sample in its container: restarted in place on failure (its checkpoints survive in the pod's volume)."""
    if not sample.image:
        raise ConfigError(NO_SAMPLE)
    container["image"] = sample.image
    if sample.command:
        container["command"] = list(sample.command)
    container["args"] = sample.args_for()
    _set_resources(container, sample.cpu, sample.memory)
    container["ports"] = [{"name": "metrics", "containerPort": sample.port}]
    container.setdefault("volumeMounts", []).append({"name": SAMPLE_DATA_VOLUME, "mountPath": SAMPLE_DATA_DIR})
    _mount_podinfo(spec, container)
    volume = ({"persistentVolumeClaim": {"claimName": sample.checkpoint_claim}} if sample.checkpoint_claim
              else {"emptyDir": {}})
    spec["volumes"].append({"name": SAMPLE_DATA_VOLUME, **volume})
    spec["restartPolicy"] = "OnFailure"


def _dress_server(container: dict[str, Any], workloads: WorkloadSpec, model: str, version: str) -> None:
    server = workloads.model_server
    container["image"] = workloads.image(SERVER_IMAGE)
    _set_resources(container, server.cpu, server.memory)
    if server.args:
        container["args"] = server.args_for(model, version)
    for port in container.get("ports") or []:
        port["containerPort"] = server.port
    probe = (container.get("readinessProbe") or {}).get("httpGet")
    if probe is not None:
        probe.update({"path": server.readiness_path, "port": server.port})


def _set_resources(container: dict[str, Any], cpu: str, memory: str) -> None:
    """CPU and memory requested and limited alike (the GPUs a case asks for stay)."""
    resources = container.setdefault("resources", {})
    for kind in ("requests", "limits"):
        resources.setdefault(kind, {}).update({"cpu": cpu, "memory": memory})


def exit_request(code: int) -> dict[str, Any]:
    """The patch that asks a training member's container to exit with `code` (its command reads its annotations)."""
    return {"metadata": {"annotations": {EXIT_REQUEST_ANNOTATION: str(code)}}}


def label_value_for_test(test: str) -> str:
    """A test's node id as a valid label value (63 characters, alphanumerics, '-', '_', '.')."""
    value = re.sub(r"[^A-Za-z0-9_.-]+", "-", test)[-63:].strip("-_.")
    return value or "test"


def is_ours(obj: dict[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_LABEL) == MANAGER and RUN_LABEL in labels

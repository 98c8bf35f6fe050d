"""What a cluster runs for the suites: the profile's `workloads:` section (images, commands, pod defaults).

The suites describe workloads abstractly (a gang of N pods x G GPUs for T seconds, a model service of R replicas);
these are the concrete parts a cluster needs and only its owner knows: which image a training member runs, which
model server answers, which image has `nvidia-smi`, and what every pod must carry to be admitted (tolerations of
tainted GPU nodes, a node selector, pull secrets, a runtime class, a security context, the priority classes).

The defaults name no image: what a cluster runs is its profile's to say (profiles/sim.yaml names the sim's, `sim/...`,
which only the sim's kwok nodes and data plane understand; profiles/kind.yaml public ones). The preflight refuses a
run whose profile names no trainer image, and a `sim/` image or the sim's annotations on any other target; a case
that needs an image the profile does not name ends in ERROR naming the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any

from harness.core.errors import ConfigError

SIM_IMAGE_PREFIX = "sim/"
SIM_IMAGE_PREFIXES = (SIM_IMAGE_PREFIX, "gpupoc.local/")  # kwok's, and the sim's real nodes' (built and imported there)
SIM_ANNOTATION_PREFIX = "sim.gpupoc.io/"
RUN_FOR_ANNOTATION = SIM_ANNOTATION_PREFIX + "run-for"  # kwok ends a member's pod after this long (the sim's stage)
MODEL_ANNOTATION = SIM_ANNOTATION_PREFIX + "model"  # the model a serving pod serves (the sim's stand-in reads it)
# the profile's fields naming what a workload's containers run
TRAINER_IMAGE, SERVER_IMAGE = "workloads.trainer.image", "workloads.model_server.image"
RAY_IMAGE = "workloads.ray.image"
# the containers a workload's spec fills in, by name
TRAIN_CONTAINER, SERVER_CONTAINER, SAMPLE_CONTAINER = "train", "server", "sample"
# A training member exits with the code in this annotation of its own pod (read through the downward API): a real
# non-zero exit, chosen by the case, that the Job's own retry policy acts on, on any cluster.
EXIT_REQUEST_ANNOTATION = "gpupoc.io/exit-code"
PODINFO_VOLUME, PODINFO_DIR = "gpupoc-podinfo", "/etc/gpupoc"
RESTRICTED, NO_SECURITY_CONTEXT = "restricted", "none"
NOBODY = 65534

# Runs for the job's duration ({run_for_s}, whole seconds), exits with the requested code once asked, logs each step;
# a SIGTERM (the pod deleted, preempted) ends it within a second, as a trainer that checkpoints and exits would (as
# PID 1 a shell ignores it otherwise, and the kubelet waits out the grace period).
TRAINER_SCRIPT = (
    'trap \'echo "gpupoc trainer $HOSTNAME: terminated"; exit 143\' TERM; '
    'echo "gpupoc trainer $HOSTNAME: running for {run_for_s}s"; end=$(( $(date +%s) + {run_for_s} )); '
    'while [ "$(date +%s)" -lt "$end" ]; do '
    f'code=$(sed -n \'s/^{EXIT_REQUEST_ANNOTATION.replace("/", "[/]")}="\\([0-9]*\\)"$/\\1/p\' '
    f'{PODINFO_DIR}/annotations 2>/dev/null); '
    'if [ -n "$code" ]; then echo "gpupoc trainer $HOSTNAME: exiting with $code as asked"; exit "$code"; fi; '
    'sleep 1; done; echo "gpupoc trainer $HOSTNAME: done"')


@dataclass(frozen=True)
class Trainer:
    """A training member: `command` (with {run_for_s}) runs for the job's duration and honours an exit request."""

    image: str = ""  # not named: the profile's workloads.trainer.image
    command: tuple[str, ...] = ("sh", "-c", TRAINER_SCRIPT)
    cpu: str = "1"          # requested and limited, beside its GPUs
    memory: str = "1Gi"

    def command_for(self, run_for_s: float) -> list[str]:
        seconds = str(max(1, math.ceil(run_for_s)))
        return [part.replace("{run_for_s}", seconds) for part in self.command]


SAMPLE_DATA_VOLUME, SAMPLE_DATA_DIR = "gpupoc-sample-data", "/data"
SAMPLE_ARGS = ("--steps", "{steps}", "--warmup", "{warmup}", "--checkpoint-every", "{checkpoint_every}",
               "--batch", "{batch}", "--dataset-mb", "{dataset_mb}", "--port", "{port}", "--data-dir", SAMPLE_DATA_DIR, "--log-every", "10")
# Another tenant's noisy job: {threads} processes spinning on the CPU, one of them writing memory flat out. It asks
# for less CPU than it uses (Burstable: a request, a higher limit): what a node's CPU isolation must keep off a
# Guaranteed pod's cores (the static CPU manager) and hold to its limit (CFS quota). A BestEffort one would not do:
# its cpu.shares of 2 against the sample's 1024 leave the sample its cores anyway (measured: no slowdown).
ANTAGONIST_SCRIPT = (
    'echo "gpupoc antagonist $HOSTNAME: {threads} hogs on $(nproc) CPUs"; '
    "dd if=/dev/zero of=/dev/null bs=32M 2>/dev/null & i=1; "
    'while [ "$i" -lt {threads} ]; do (while :; do :; done) & i=$((i + 1)); done; wait')


NO_SAMPLE = ("the profile names no workload sample image (workloads.sample.image): the sample runs in a real "
             "container; on the sim that is `gpupoc sim up --real-nodes 2` with profiles/sim-real-nodes.yaml")


@dataclass(frozen=True)
class Sample:
    """The workload sample (harness/sample/train.py): a training loop in a container of its own, measured by its
    own log. No image: the profile's cluster runs no sample (the sim's kwok nodes run no container); its cases SKIP.

    It asks for `cpu` and `memory` as requests and limits alike (Guaranteed QoS: a node's static CPU manager gives
    it whole cores) and `gpus` GPUs; its dataset and checkpoints live in an emptyDir (a container restarted in place
    resumes) or, with `checkpoint_claim`, in that PersistentVolumeClaim (a replaced pod resumes too)."""

    image: str | None = None
    command: tuple[str, ...] = ()  # empty: the image's entrypoint
    args: tuple[str, ...] = SAMPLE_ARGS
    cpu: str = "1"
    memory: str = "1Gi"
    gpus: int = 1
    steps: int = 400
    warmup: int = 40
    checkpoint_every: int = 50
    # samples per step: on one CPU core 1024 makes a step of about 30 ms, long enough that the host's own processes
    # waking on that core average out (at 256, 7 ms steps: CoV 0.83 under load); a GPU wants more
    batch: int = 1024
    dataset_mb: int = 64
    port: int = 9400
    checkpoint_claim: str | None = None
    antagonist_image: str | None = None  # None: the trainer's image
    antagonist_command: tuple[str, ...] = ("sh", "-c", ANTAGONIST_SCRIPT)
    antagonist_threads: int = 4
    antagonist_cpu: str = "500m"        # requested
    antagonist_cpu_limit: str = "1"

    def args_for(self) -> list[str]:
        values = {"steps": self.steps, "warmup": self.warmup, "checkpoint_every": self.checkpoint_every,
                  "batch": self.batch, "dataset_mb": self.dataset_mb, "port": self.port}
        return [_fill(a, values) for a in self.args]

    def antagonist_command_for(self) -> list[str]:
        return [_fill(a, {"threads": self.antagonist_threads}) for a in self.antagonist_command]


def _fill(text: str, values: Mapping[str, object]) -> str:
    for key, value in values.items():
        text = text.replace("{" + key + "}", str(value))
    return text


@dataclass(frozen=True)
class ModelServer:
    """A model server: `args` (with {model}, {port} and {version}: what the pod serves) start it; it answers
    `readiness_path` once loaded and exports vLLM's metrics on `metrics_path`. The sim's (`sim/vllm:...`, in
    profiles/sim.yaml) asks the sim's data plane for a stand-in."""

    image: str = ""  # not named: the profile's workloads.model_server.image
    args: tuple[str, ...] = ()
    port: int = 8000
    readiness_path: str = "/health"
    metrics_path: str = "/metrics"
    cpu: str = "1"
    memory: str = "2Gi"

    def args_for(self, model: str, version: str) -> list[str]:
        return [_fill(a, {"model": model, "port": self.port, "version": version}) for a in self.args]


@dataclass(frozen=True)
class PodDefaults:
    """What every pod the suites submit carries, for the cluster to admit and place it."""

    tolerations: tuple[dict[str, Any], ...] = ()
    node_selector: dict[str, str] = field(default_factory=dict)
    image_pull_secrets: tuple[str, ...] = ()
    runtime_class_name: str | None = None
    security: str = RESTRICTED   # Pod Security `restricted` by default: non-root, no escalation, no capabilities
    run_as_user: int = NOBODY
    low_priority_class: str = "gpupoc-low"
    high_priority_class: str = "gpupoc-high"

    def security_contexts(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the pod's, each container's) securityContext; empty where the profile asks for none."""
        if self.security == NO_SECURITY_CONTEXT:
            return {}, {}
        return ({"runAsNonRoot": True, "runAsUser": self.run_as_user, "seccompProfile": {"type": "RuntimeDefault"}},
                {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}})


@dataclass(frozen=True)
class WorkloadSpec:
    trainer: Trainer = field(default_factory=Trainer)
    model_server: ModelServer = field(default_factory=ModelServer)
    gpu_probe_image: str = "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"
    # A RayJob's head and workers: KubeRay starts Ray in them itself (`ray start`), so the image must have Ray.
    ray_image: str = ""  # not named: the profile's workloads.ray.image
    # A RayService's Serve application (its import path, Ray Serve's `import_path`): an LLM app serving the model.
    ray_serve_app: str = "ray.serve.llm:build_openai_app"
    sample: Sample = field(default_factory=Sample)
    pod_defaults: PodDefaults = field(default_factory=PodDefaults)
    # The pods carry the sim's annotations (how long kwok runs a member, the data plane's stand-in): profiles/sim.yaml
    # asks for them; a real cluster's pods never carry them.
    sim_annotations: bool = False

    def image(self, field: str) -> str:
        """The image the profile names for `field` (workloads.trainer.image, .model_server.image, .ray.image); a
        ConfigError naming the field where it names none."""
        images = {TRAINER_IMAGE: self.trainer.image, SERVER_IMAGE: self.model_server.image, RAY_IMAGE: self.ray_image}
        if not images[field]:
            raise ConfigError(f"the profile names no {field}: set it to the image this cluster runs there "
                              "(profiles/kind.yaml names public ones, profiles/sim.yaml the sim's)")
        return images[field]

    def sim_only(self) -> list[tuple[str, str]]:
        """(profile field, value) of everything only the sim can run: what a real target must not receive."""
        images = [("workloads.trainer.image", self.trainer.image),
                  ("workloads.model_server.image", self.model_server.image),
                  ("workloads.gpu_probe.image", self.gpu_probe_image), ("workloads.ray.image", self.ray_image),
                  ("workloads.sample.image", self.sample.image or ""),
                  ("workloads.sample.antagonist.image", self.sample.antagonist_image or "")]
        found = [(name, image) for name, image in images if image.startswith(SIM_IMAGE_PREFIXES)]
        if self.sim_annotations:
            found.append(("workloads.sim_annotations", "true"))
        return found

"""The POC profile: tenants, queues, GPU sizes, a threshold for every criterion, timeouts.

Validated once, before any test runs; an error names the field and what is allowed.
Thresholds are data: suites read them from here and contain no threshold literals.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.config import accelerators
from harness.config.accelerators import DEFAULT, Accelerator
from harness.criteria import registered
from harness.config.workloads import (NO_SECURITY_CONTEXT, RESTRICTED, ModelServer, PodDefaults, Sample, Trainer,
                                      WorkloadSpec)
from harness.core.errors import ConfigError
from harness.core.timeouts import OPERATIONS, Timeouts

SUBMITTERS = ("runner", "tenant")  # who submits the jobs: the runner's identity, or each tenant's own
BACKENDS = ("volcano", "kueue", "kuberay", "kai", "default", "kube-gang", "slurm", "kueue-volcano")



def criteria_thresholds() -> dict[str, dict[str, str]]:
    """criterion id -> {threshold name: meaning}, of every implemented criterion; a profile sets each one."""
    return {c.id: {t.name: t.meaning for t in c.thresholds} for c in registered().values()}


@dataclass(frozen=True)
class Tenant:
    name: str
    namespace: str
    identity: str
    weight: float
    quota_gpus: int
    queues: dict[str, str]
    context: str | None = None  # the tenant's own kubeconfig context; else the runner impersonates `identity`
    limit_gpus: int | None = None  # the most GPUs it may hold, borrowing included (None: no cap)
    dev_queues: dict[str, str] = field(default_factory=dict)  # backend -> its development (interactive) queue
    dev_gpus: int = 0  # GPUs its development queue is guaranteed
    serving_namespace: str | None = None  # where its model services run (inference); None: its namespace

    @property
    def inference_namespace(self) -> str:
        return self.serving_namespace or self.namespace

    @property
    def borrowing_gpus(self) -> int | None:
        """How many GPUs beyond its quota it may borrow (None: no cap)."""
        return None if self.limit_gpus is None else self.limit_gpus - self.quota_gpus


@dataclass(frozen=True)
class Dra:
    """GPUs claimed through Dynamic Resource Allocation: the DeviceClass jobs claim from, and the driver whose
    ResourceSlices publish those devices (harness/config/accelerators.py names NVIDIA's)."""

    device_class: str
    driver: str


@dataclass(frozen=True)
class AutoscaledPool:
    """GPU nodes an autoscaler adds when jobs queue and removes when idle: how a pod asks for them (the pool's node
    selector and the tolerations of its taints), and how many whole nodes the elasticity case's job spans."""

    node_selector: dict[str, str]
    tolerations: tuple[dict[str, Any], ...] = ()
    nodes: int = 2


HOSTNAME = "kubernetes.io/hostname"


@dataclass(frozen=True)
class Topology:
    """Where the GPU nodes sit, as node labels name it (NVIDIA's Topograph labels real nodes so): `levels` from the
    widest domain to the narrowest (a spine, a leaf switch, a node), and `gang_level`, the one of them a training
    gang must stay within (the topology case asks each scheduler for it as a required placement)."""

    levels: tuple[str, ...]
    gang_level: str
    node_labels: tuple[tuple[str, str], ...] = ()  # the nodes it covers (Kueue's topology flavor needs one label)

    def tier(self, level: str) -> int:
        """The level's tier counted up from the nodes (1: the switch above them), as Volcano's HyperNodes count; a
        node's own label (kubernetes.io/hostname) is no tier."""
        switches = [name for name in self.levels if name != HOSTNAME]
        return len(switches) - switches.index(level)


@dataclass(frozen=True)
class ModelQuota:
    """A GPU model, as its discovery's model label names it on its nodes (the accelerator's `discovery.model`, e.g.
    NVIDIA-L40S), and each tenant's quota of it in GPUs (governance.model_quota; a tenant not named has none)."""

    model: str
    quota_gpus: tuple[tuple[str, int], ...]

    def of(self, tenant: str) -> int:
        return dict(self.quota_gpus).get(tenant, 0)


@dataclass(frozen=True)
class GpuSizes:
    resource: str  # the resource jobs ask for: the accelerator's by default
    per_node: int
    job_sizes: dict[str, int]
    dra: Dra | None = None  # None: the cluster's GPUs are claimed by the device plugin's resource only
    autoscaled: AutoscaledPool | None = None  # None: the cluster has no autoscaled GPU pool (or the POC ignores it)
    topology: Topology | None = None  # None: the profile names no topology (the topology case is not checked)
    accelerator: Accelerator = DEFAULT  # whose device plugin, discovery labels and driver tool (`gpu.accelerator`)
    models: tuple[ModelQuota, ...] = ()  # GPU models with a quota of their own per tenant; () none (not checked)


@dataclass(frozen=True)
class ScaleSpec:
    """The scale scenario (suites/scale): `nodes` whole GPU nodes (the sim adds what it lacks; a real cluster runs on
    what it has), `jobs` whole-node jobs of `run_for_s` seconds submitted at `rate_per_s` across the tenants by its
    weights, `submitters` requests at once (the client's explicit concurrency); waiting ends at `cap_s`."""
    nodes: int = 1000
    jobs: int = 10000
    rate_per_s: float = 50.0
    run_for_s: float = 30.0
    cap_s: float = 1200.0
    submitters: int = 8


DEFAULT_MAX_RUNS = 3


@dataclass(frozen=True)
class Profile:
    name: str
    source: str
    tenants: tuple[Tenant, ...]
    gpu: GpuSizes
    thresholds: dict[str, dict[str, float]]
    timeouts: Timeouts
    prometheus_url: str | None = None
    submit_as: str = "runner"  # "tenant": jobs are submitted acting as the tenant's identity
    inference_url: str | None = None  # a real cluster: the model Service's ingress or gateway URL (probe and load)
    # the sim's model-server stand-in for the serving stack's capacity (inference.capacity): its settings as its pod
    # annotations name them (sim.gpupoc.io/<key>); a real cluster runs the profile's model-server image instead
    standin: dict[str, str] = field(default_factory=dict)
    scale: ScaleSpec = field(default_factory=ScaleSpec)
    workloads: WorkloadSpec = field(default_factory=WorkloadSpec)
    # workload class -> the criteria that decide whether a backend fits it (empty: the record's defaults,
    # harness/record/fit.py)
    scenarios: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # how often a case whose deciding interval straddles its threshold runs, pooling its samples, before it ends
    # INCONCLUSIVE (harness/run/repeat.py)
    max_runs: int = DEFAULT_MAX_RUNS
    extra: dict[str, Any] = field(default_factory=dict)

    def threshold(self, criterion: str, name: str) -> float:
        return self.thresholds[criterion][name]

    def tenant(self, name: str) -> Tenant:
        for tenant in self.tenants:
            if tenant.name == name:
                return tenant
        raise ConfigError(f"profile {self.name}: no tenant named {name!r}")

    def expected_shares(self) -> dict[str, float]:
        total = sum(t.weight for t in self.tenants)
        return {t.name: t.weight / total for t in self.tenants}


class _Fields:
    """Reads one mapping of the profile, naming the path of anything wrong."""

    def __init__(self, data: Any, path: str, source: str) -> None:
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: {path or 'the profile'} must be a mapping, got {type(data).__name__}")
        self.data, self.path, self.source = data, path, source

    def _where(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def fail(self, key: str, message: str) -> ConfigError:
        return ConfigError(f"{self.source}: {self._where(key)}: {message}")

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
        if key not in self.data:
            if default is ...:
                raise self.fail(key, "missing")
            return default
        value = self.data[key]
        if kind in (int, float) or kind == (int, float):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise self.fail(key, f"must be a number, got {value!r}")
            if kind is int and not isinstance(value, int):
                raise self.fail(key, f"must be a whole number, got {value!r}")
            return value
        if not isinstance(value, kind):
            wanted = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise self.fail(key, f"must be a {wanted}, got {value!r}")
        return value

    def child(self, key: str) -> _Fields:
        return _Fields(self.get(key, dict), self._where(key), self.source)

    def optional(self, key: str) -> _Fields:
        """The mapping at `key`, or an empty one where the profile leaves it out (its defaults apply)."""
        return self.child(key) if key in self.data else _Fields({}, self._where(key), self.source)

    def only(self, allowed: tuple[str, ...] | list[str]) -> None:
        unknown = sorted(set(self.data) - set(allowed))
        if unknown:
            raise self.fail(unknown[0], f"unknown field; allowed: {', '.join(allowed)}")


def _tenant(item: Any, index: int, source: str) -> Tenant:
    f = _Fields(item, f"tenants[{index}]", source)
    f.only(("name", "namespace", "identity", "weight", "quota_gpus", "limit_gpus", "queues", "dev_queues", "dev_gpus",
            "context", "serving_namespace"))
    weight = f.get("weight", (int, float))
    if weight <= 0:
        raise f.fail("weight", f"must be greater than 0, got {weight}")
    quota = f.get("quota_gpus", int, 0)
    if quota < 0:
        raise f.fail("quota_gpus", f"must be 0 or more, got {quota}")
    limit = f.get("limit_gpus", int, None)
    if limit is not None and limit < quota:
        raise f.fail("limit_gpus", f"must be at least quota_gpus ({quota}): it is the most the tenant may hold, "
                     f"borrowing included; got {limit}")
    queues = f.optional("queues")
    queues.only(BACKENDS)
    dev_queues = f.optional("dev_queues")
    dev_queues.only(BACKENDS)
    dev_gpus = f.get("dev_gpus", int, 0)
    if dev_gpus < 0 or (dev_queues.data and dev_gpus < 1):
        raise f.fail("dev_gpus", f"must be at least 1 where the tenant has development queues, got {dev_gpus}")
    return Tenant(name=f.get("name", str), namespace=f.get("namespace", str), identity=f.get("identity", str),
                  weight=float(weight), quota_gpus=quota, limit_gpus=limit,
                  queues={k: queues.get(k, str) for k in queues.data}, context=f.get("context", str, None),
                  dev_queues={k: dev_queues.get(k, str) for k in dev_queues.data}, dev_gpus=dev_gpus,
                  serving_namespace=f.get("serving_namespace", str, None))


def _thresholds(f: _Fields) -> dict[str, dict[str, float]]:
    criteria = criteria_thresholds()
    f.only(list(criteria))
    result = {}
    for criterion, names in criteria.items():
        sub = f.child(criterion)
        sub.only(list(names))
        values = {}
        for name, meaning in names.items():
            value = sub.get(name, (int, float))
            if value < 0:
                raise sub.fail(name, f"must be 0 or more ({meaning}), got {value}")
            values[name] = float(value)
        result[criterion] = values
    return result


def _timeouts(f: _Fields) -> Timeouts:
    f.only(OPERATIONS)
    values = {}
    for op in f.data:
        value = f.get(op, (int, float))
        if value <= 0:
            raise f.fail(op, f"must be greater than 0 seconds, got {value}")
        values[op] = float(value)
    return Timeouts(**values)


def _autoscaled(f: _Fields) -> AutoscaledPool | None:
    if not f.data:
        return None
    f.only(("node_selector", "tolerations", "nodes"))
    selector = f.child("node_selector")
    if not selector.data:
        raise f.fail("node_selector", "must name the label of the pool's nodes (e.g. karpenter.sh/nodepool: gpu)")
    tolerations = f.get("tolerations", list, [])
    if not all(isinstance(t, dict) for t in tolerations):
        raise f.fail("tolerations", "must be a list of Kubernetes tolerations (mappings)")
    nodes = f.get("nodes", int, AutoscaledPool({}).nodes)
    if nodes < 1:
        raise f.fail("nodes", f"must be at least 1 node, got {nodes}")
    return AutoscaledPool({k: selector.get(k, str) for k in selector.data}, tuple(tolerations), nodes)


def _topology(f: _Fields) -> Topology | None:
    if not f.data:
        return None
    f.only(("levels", "gang_level", "node_labels"))
    levels = f.get("levels", list)
    if not levels or not all(isinstance(level, str) and level for level in levels) or len(set(levels)) != len(levels):
        raise f.fail("levels", "must list node label keys, widest domain first (e.g. a spine's, a leaf's, "
                     "kubernetes.io/hostname), each once")
    gang_level = f.get("gang_level", str)
    if gang_level not in levels:
        raise f.fail("gang_level", f"must be one of the levels ({', '.join(levels)}), got {gang_level!r}")
    selector = f.child("node_labels")
    if not selector.data:
        raise f.fail("node_labels", "must name a label of the GPU nodes the topology covers (e.g. the one its "
                     "topology discovery or GPU operator sets): Kueue's topology flavor selects its nodes by it")
    return Topology(tuple(levels), gang_level, tuple((k, selector.get(k, str)) for k in selector.data))


def _models(f: _Fields, tenants: list[str]) -> tuple[ModelQuota, ...]:
    """Each GPU model with each tenant's quota of it: two models at least (one is the cluster's quota itself)."""
    if not f.data:
        return ()
    if len(f.data) < 2:
        raise f.fail(next(iter(f.data)), "a quota per model needs two models or more (one is the tenants' quota)")
    models = []
    for model in f.data:
        quotas = f.child(model)
        unknown = [t for t in quotas.data if t not in tenants]
        if unknown:
            raise quotas.fail(unknown[0], f"not a tenant of the profile ({', '.join(tenants)})")
        gpus = {str(t): quotas.get(t, int) for t in quotas.data}
        if any(v < 0 for v in gpus.values()):
            raise quotas.fail(next(t for t, v in gpus.items() if v < 0), "must be 0 GPUs or more")
        models.append(ModelQuota(str(model), tuple(gpus.items())))
    return tuple(models)


def _scale(f: _Fields) -> ScaleSpec:
    f.only(("nodes", "jobs", "rate_per_s", "run_for_s", "cap_s", "submitters"))
    defaults = ScaleSpec()
    values: dict[str, Any] = {}
    for name in f.data:
        kind = int if isinstance(getattr(defaults, name), int) else (int, float)
        value = f.get(name, kind)
        if value <= 0:
            raise f.fail(name, f"must be greater than 0, got {value}")
        values[name] = value if kind is int else float(value)
    return ScaleSpec(**values)


def _strings(f: _Fields, key: str) -> tuple[str, ...]:
    items = f.get(key, list)
    if not all(isinstance(item, str) for item in items):
        raise f.fail(key, f"must be a list of strings, got {items!r}")
    return tuple(items)


def _image(f: _Fields, default: str) -> str:
    if "image" not in f.data:
        return default  # "" where no default: not named (WorkloadSpec.image says so where a case needs it)
    image: str = f.get("image", str)
    if not image.strip() or any(c.isspace() for c in image):
        raise f.fail("image", f"must be an image reference without spaces, got {image!r}")
    return image


def _quantity(f: _Fields, key: str, default: str) -> str:
    value = f.get(key, (str, int, float), default)
    text = str(value)
    if not re.fullmatch(r"\d+(\.\d+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?", text):
        raise f.fail(key, f"must be a Kubernetes quantity such as 500m, 1, 512Mi or 2Gi, got {value!r}")
    return text


def _workloads(f: _Fields) -> WorkloadSpec:
    f.only(("trainer", "model_server", "gpu_probe", "ray", "sample", "pod_defaults", "sim_annotations"))
    base = WorkloadSpec()
    trainer = f.optional("trainer")
    trainer.only(("image", "command", "cpu", "memory"))
    server = f.optional("model_server")
    server.only(("image", "args", "port", "readiness_path", "metrics_path", "cpu", "memory"))
    probe, ray = f.optional("gpu_probe"), f.optional("ray")
    probe.only(("image",))
    ray.only(("image", "serve_app"))
    pods = f.optional("pod_defaults")
    pods.only(("tolerations", "node_selector", "image_pull_secrets", "runtime_class_name", "security", "run_as_user",
               "priority_classes"))
    port = server.get("port", int, base.model_server.port)
    if not 1 <= port <= 65535:
        raise server.fail("port", f"must be a port 1-65535, got {port}")
    security = pods.get("security", str, RESTRICTED)
    if security not in (RESTRICTED, NO_SECURITY_CONTEXT):
        raise pods.fail("security", f"must be {RESTRICTED} (Pod Security's restricted level, the default) or "
                        f"{NO_SECURITY_CONTEXT}, got {security!r}")
    tolerations = pods.get("tolerations", list, [])
    if not all(isinstance(t, dict) for t in tolerations):
        raise pods.fail("tolerations", "must be a list of Kubernetes tolerations (mappings)")
    selector = pods.optional("node_selector")
    classes = pods.optional("priority_classes")
    classes.only(("low", "high"))
    defaults = PodDefaults()
    command = _strings(trainer, "command") if "command" in trainer.data else base.trainer.command
    if not command:
        raise trainer.fail("command", "must name a command (a member runs it for the job's duration)")
    return WorkloadSpec(
        trainer=Trainer(_image(trainer, base.trainer.image), command, _quantity(trainer, "cpu", base.trainer.cpu),
                        _quantity(trainer, "memory", base.trainer.memory)),
        model_server=ModelServer(_image(server, base.model_server.image),
                                 _strings(server, "args") if "args" in server.data else base.model_server.args, port,
                                 server.get("readiness_path", str, base.model_server.readiness_path),
                                 server.get("metrics_path", str, base.model_server.metrics_path),
                                 _quantity(server, "cpu", base.model_server.cpu),
                                 _quantity(server, "memory", base.model_server.memory)),
        gpu_probe_image=_image(probe, base.gpu_probe_image), ray_image=_image(ray, base.ray_image),
        ray_serve_app=ray.get("serve_app", str, base.ray_serve_app),
        sample=_sample(f.optional("sample")),
        pod_defaults=PodDefaults(
            tolerations=tuple(tolerations), node_selector={k: selector.get(k, str) for k in selector.data},
            image_pull_secrets=_strings(pods, "image_pull_secrets") if "image_pull_secrets" in pods.data else (),
            runtime_class_name=pods.get("runtime_class_name", str, None), security=security,
            run_as_user=pods.get("run_as_user", int, defaults.run_as_user),
            low_priority_class=classes.get("low", str, defaults.low_priority_class),
            high_priority_class=classes.get("high", str, defaults.high_priority_class)),
        sim_annotations=f.get("sim_annotations", bool, base.sim_annotations))


def _sample(f: _Fields) -> Sample:
    f.only(("image", "command", "args", "cpu", "memory", "gpus", "steps", "warmup", "checkpoint_every", "batch",
            "dataset_mb", "port", "checkpoint_claim", "antagonist"))
    base = Sample()
    counts = {}
    for name in ("gpus", "steps", "warmup", "checkpoint_every", "batch", "dataset_mb", "port"):
        counts[name] = f.get(name, int, getattr(base, name))
        if counts[name] < (0 if name in ("gpus", "warmup") else 1):
            raise f.fail(name, f"must be {'0' if name in ('gpus', 'warmup') else '1'} or more, got {counts[name]}")
    if counts["warmup"] >= counts["steps"]:
        raise f.fail("warmup", f"must be fewer than steps ({counts['steps']}), got {counts['warmup']}")
    if counts["port"] > 65535:
        raise f.fail("port", f"must be a port 1-65535, got {counts['port']}")
    antagonist = f.optional("antagonist")
    antagonist.only(("image", "command", "threads", "cpu", "cpu_limit"))
    threads = antagonist.get("threads", int, base.antagonist_threads)
    if threads < 1:
        raise antagonist.fail("threads", f"must be 1 or more, got {threads}")
    return Sample(
        image=_image(f, "") if "image" in f.data else None,
        command=_strings(f, "command") if "command" in f.data else base.command,
        args=_strings(f, "args") if "args" in f.data else base.args,
        cpu=_quantity(f, "cpu", base.cpu), memory=_quantity(f, "memory", base.memory),
        checkpoint_claim=f.get("checkpoint_claim", str, None),
        antagonist_image=_image(antagonist, "") if "image" in antagonist.data else None,
        antagonist_command=(_strings(antagonist, "command") if "command" in antagonist.data
                            else base.antagonist_command),
        antagonist_threads=threads, antagonist_cpu=_quantity(antagonist, "cpu", base.antagonist_cpu),
        antagonist_cpu_limit=_quantity(antagonist, "cpu_limit", base.antagonist_cpu_limit), **counts)


def parse_profile(data: Any, source: str) -> Profile:
    f = _Fields(data, "", source)
    f.only(("name", "tenants", "gpu", "thresholds", "timeouts", "prometheus", "submit_as", "inference", "scale",
            "workloads", "scenarios", "max_runs"))
    max_runs = f.get("max_runs", int, DEFAULT_MAX_RUNS)
    if max_runs < 1:
        raise f.fail("max_runs", f"must be at least 1, got {max_runs}")
    submit_as = f.get("submit_as", str, "runner")
    if submit_as not in SUBMITTERS:
        raise f.fail("submit_as", f"must be one of {', '.join(SUBMITTERS)}, got {submit_as!r}")
    tenants_raw = f.get("tenants", list)
    if not tenants_raw:
        raise f.fail("tenants", "needs at least one tenant")
    tenants = tuple(_tenant(item, i, source) for i, item in enumerate(tenants_raw))
    names = [t.name for t in tenants]
    if len(set(names)) != len(names):
        raise f.fail("tenants", f"tenant names must be unique, got {names}")
    gpu = f.child("gpu")
    gpu.only(("accelerator", "resource", "per_node", "job_sizes", "dra", "autoscaled", "topology", "models"))
    try:
        accelerator = accelerators.named(gpu.get("accelerator", str, DEFAULT.name))
    except KeyError as exc:
        raise gpu.fail("accelerator", str(exc.args[0])) from None
    dra = gpu.optional("dra")
    dra.only(("device_class", "driver"))
    autoscaled = _autoscaled(gpu.optional("autoscaled"))
    sizes = gpu.child("job_sizes")
    job_sizes = {k: sizes.get(k, int) for k in sizes.data}
    if any(v < 1 for v in job_sizes.values()):
        raise sizes.fail(next(k for k, v in job_sizes.items() if v < 1), "must be at least 1 GPU")
    prometheus = f.optional("prometheus")
    prometheus.only(("url",))
    timeouts = _timeouts(f.child("timeouts")) if "timeouts" in f.data else Timeouts()
    inference = f.optional("inference")
    inference.only(("url", "standin"))
    standin = inference.optional("standin")
    return Profile(name=f.get("name", str), source=source, tenants=tenants,
                   gpu=GpuSizes(gpu.get("resource", str, accelerator.resource), gpu.get("per_node", int), job_sizes,
                                Dra(dra.get("device_class", str), dra.get("driver", str)) if dra.data else None,
                                autoscaled, _topology(gpu.optional("topology")), accelerator,
                                _models(gpu.optional("models"), names)),
                   thresholds=_thresholds(f.child("thresholds")), timeouts=timeouts,
                   prometheus_url=prometheus.get("url", str, None), submit_as=submit_as,
                   inference_url=inference.get("url", str, None),
                   standin={str(k): str(standin.get(k, (str, int, float))) for k in standin.data},
                   scale=_scale(f.child("scale")) if "scale" in f.data else ScaleSpec(),
                   workloads=_workloads(f.child("workloads")) if "workloads" in f.data else WorkloadSpec(),
                   scenarios=_scenarios(f.optional("scenarios")), max_runs=max_runs)


def _scenarios(f: _Fields) -> dict[str, tuple[str, ...]]:
    """Each workload class with the criteria that decide it: known criteria, at least one each."""
    known = criteria_thresholds()
    found = {}
    for scenario in f.data:
        criteria = f.get(scenario, list)
        unknown = [c for c in criteria if c not in known]
        if not criteria or unknown:
            raise f.fail(scenario, f"needs known criteria, got {unknown or 'none'}; known: {', '.join(known)}")
        found[str(scenario)] = tuple(str(c) for c in criteria)
    return found


def load_profile(path: Path) -> Profile:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"profile {path}: cannot read it ({exc.strerror})") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ConfigError(f"profile {path}:{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from exc
    return parse_profile(data, str(path))

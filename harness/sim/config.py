"""What a sim looks like: node count, GPU model and driver, ports. Validated once."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from harness.config.accelerators import DEFAULT, KNOWN
from harness.core.errors import ConfigError

DEFAULT_NODES = 4
DEFAULT_GPUS_PER_NODE = 8
DEFAULT_GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"
DEFAULT_DRIVER_VERSION = "550.90.07"
DEFAULT_CUDA_VERSION = "12.4"
# Below Linux's ephemeral range (32768-60999 by default): a fixed port there can be taken, for a minute,
# by the client end of one of the sim's own connections (seen: kai-binder's port held by a link to etcd).
DEFAULT_PORT_BASE = 29000
PORT_BASE_ENV = "GPUPOC_SIM_PORT_BASE"


@dataclass(frozen=True)
class GpuModel:
    family: str
    memory_mib: int
    compute: tuple[int, int]
    mig_capable: bool


# What GPU Feature Discovery reports for a few common data-centre GPUs.
GPU_MODELS: dict[str, GpuModel] = {
    "NVIDIA-H100-80GB-HBM3": GpuModel("hopper", 81559, (9, 0), True),
    "NVIDIA-H200": GpuModel("hopper", 143771, (9, 0), True),
    "NVIDIA-A100-SXM4-80GB": GpuModel("ampere", 81920, (8, 0), True),
    "NVIDIA-L4": GpuModel("ada-lovelace", 23034, (8, 9), False),
    # not NVIDIA's (harness/config/accelerators.py): what their discovery labels report
    "Instinct_MI300X": GpuModel("AI", 196608, (9, 4), False),
    "910B3": GpuModel("Ascend910", 65536, (0, 0), False),
}
UNKNOWN_GPU = GpuModel("unknown", 0, (0, 0), False)


@dataclass(frozen=True)
class GpuSpec:
    """The accelerators of one simulated node, as their discovery would label them (GPU Feature Discovery's for
    NVIDIA's; harness/config/accelerators.py)."""

    count: int = DEFAULT_GPUS_PER_NODE
    product: str = DEFAULT_GPU_PRODUCT
    driver_version: str = DEFAULT_DRIVER_VERSION
    cuda_version: str = DEFAULT_CUDA_VERSION
    memory_mib: int | None = None  # None: the model's known memory
    accelerator: str = DEFAULT.name  # whose device plugin and discovery the node stands in for

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ConfigError(f"--gpus-per-node must be at least 1 for GPU product {self.product}, got {self.count}")
        if " " in self.product or not self.product:
            raise ConfigError(f"--gpu-product {self.product!r}: use GFD form with dashes, e.g. {DEFAULT_GPU_PRODUCT}")
        if self.accelerator not in KNOWN:
            raise ConfigError(f"--accelerator {self.accelerator!r}: one of {', '.join(KNOWN)}")
        if self.accelerator != DEFAULT.name:
            return  # another vendor's driver versions have forms of their own ("24.1.rc2")
        if len(self.driver_version.split(".")) != 3 or not self.driver_version.replace(".", "").isdigit():
            raise ConfigError(f"--driver-version {self.driver_version!r}: expected MAJOR.MINOR.REVISION, e.g. 550.90.07")
        if len(self.cuda_version.split(".")) != 2 or not self.cuda_version.replace(".", "").isdigit():
            raise ConfigError(f"--cuda-version {self.cuda_version!r}: expected MAJOR.MINOR, e.g. 12.4")
        if self.memory_mib is not None and self.memory_mib < 1:
            raise ConfigError(f"--gpu-memory-mib must be positive, got {self.memory_mib}")

    @property
    def model(self) -> GpuModel:
        return GPU_MODELS.get(self.product, UNKNOWN_GPU)

    @property
    def memory(self) -> int:
        return self.memory_mib if self.memory_mib is not None else self.model.memory_mib


@dataclass(frozen=True)
class Ports:
    base: int

    def __post_init__(self) -> None:
        if not 1024 <= self.base <= 65000:
            raise ConfigError(f"{PORT_BASE_ENV}={self.base}: must be between 1024 and 65000")

    @property
    def etcd(self) -> int:
        return self.base + 1

    @property
    def etcd_peer(self) -> int:
        return self.base + 2

    @property
    def prometheus(self) -> int:
        return self.base + 90

    @property
    def kwok(self) -> int:
        return self.base + 247

    @property
    def controller_manager(self) -> int:
        return self.base + 257

    @property
    def scheduler(self) -> int:
        return self.base + 259

    @property
    def apiserver(self) -> int:
        return self.base + 443

    # The scheduler stack: each controller's endpoints, on 127.0.0.1 like everything else.
    @property
    def kueue_webhook(self) -> int:
        return self.base + 600

    @property
    def kueue_metrics(self) -> int:
        return self.base + 601

    @property
    def kueue_health(self) -> int:
        return self.base + 602

    @property
    def volcano_scheduler_metrics(self) -> int:
        return self.base + 610

    @property
    def volcano_scheduler_health(self) -> int:
        return self.base + 611

    @property
    def volcano_controllers_metrics(self) -> int:
        return self.base + 612

    @property
    def volcano_controllers_health(self) -> int:
        return self.base + 613

    @property
    def kuberay_metrics(self) -> int:
        return self.base + 620

    @property
    def kuberay_health(self) -> int:
        return self.base + 621

    @property
    def kube_state_metrics(self) -> int:
        return self.base + 630

    @property
    def kube_state_metrics_telemetry(self) -> int:
        return self.base + 631

    # KAI-Scheduler: scheduler, binder, pod-grouper, queue and pod-group controllers.
    @property
    def kai_scheduler_metrics(self) -> int:
        return self.base + 640

    @property
    def kai_scheduler_plugins(self) -> int:
        return self.base + 641

    @property
    def kai_binder_metrics(self) -> int:
        return self.base + 642

    @property
    def kai_binder_health(self) -> int:
        return self.base + 643

    @property
    def kai_podgrouper_metrics(self) -> int:
        return self.base + 644

    @property
    def kai_podgrouper_health(self) -> int:
        return self.base + 645

    @property
    def kai_queuecontroller_metrics(self) -> int:
        return self.base + 646

    @property
    def kai_podgroupcontroller_metrics(self) -> int:
        return self.base + 647

    @property
    def kai_podgroupcontroller_health(self) -> int:
        return self.base + 648

    @property
    def karpenter_metrics(self) -> int:
        return self.base + 650

    @property
    def karpenter_health(self) -> int:
        return self.base + 651

    # KAI's admission webhook (GPU sharing) and the simulated device side of its GPU reservations.
    @property
    def kai_admission_webhook(self) -> int:
        return self.base + 652

    @property
    def kai_admission_health(self) -> int:
        return self.base + 653

    @property
    def kai_admission_metrics(self) -> int:
        return self.base + 654

    @property
    def kai_reservations_health(self) -> int:
        return self.base + 655

    # The data plane: its own health, the host's ends of the relays to kube-proxy, the metrics adapter.

    @property
    def dataplane_health(self) -> int:
        return self.base + 660

    @property
    def kube_proxy_health(self) -> int:
        return self.base + 661

    @property
    def kube_proxy_metrics(self) -> int:
        return self.base + 662

    @property
    def metrics_adapter(self) -> int:
        return self.base + 663

    @property
    def service_proxy(self) -> int:
        """The data plane's forward proxy to Services (KubeRay's operator reaches the Ray dashboards through it)."""
        return self.base + 664

    def real_node_health(self, index: int) -> int:
        """A real node's kubelet health port: the same number inside the namespace and relayed on the host."""
        return self.base + 670 + index


def ports_from_env() -> Ports:
    raw = os.environ.get(PORT_BASE_ENV, str(DEFAULT_PORT_BASE))
    try:
        return Ports(int(raw))
    except ValueError:
        raise ConfigError(f"{PORT_BASE_ENV}={raw!r}: expected a port number") from None


DEFAULT_SCHEDULERS = ("kueue", "volcano", "kuberay")
KNOWN_SCHEDULERS = (*DEFAULT_SCHEDULERS, "kai", "slurm", "karpenter")  # slurm: a real Slurm beside the cluster;
# karpenter: not a scheduler but the autoscaler that adds GPU nodes when jobs queue (harness/sim/karpenter.py)
SCHEDULERS_ENV = "GPUPOC_SIM_SCHEDULERS"  # what a sim started without --schedulers runs (e.g. by the pytest plugin)


def schedulers_from_env() -> tuple[str, ...]:
    raw = os.environ.get(SCHEDULERS_ENV)
    return DEFAULT_SCHEDULERS if raw is None else parse_schedulers(raw)


@dataclass(frozen=True)
class SimConfig:
    nodes: int = DEFAULT_NODES
    gpu: GpuSpec = field(default_factory=GpuSpec)
    ports: Ports = field(default_factory=ports_from_env)
    schedulers: tuple[str, ...] = field(default_factory=schedulers_from_env)
    serving: bool = True  # the data plane: kube-proxy in the sim's namespace, model-server stand-ins, HPA metrics
    real_nodes: int = 0  # nodes with a real kubelet, containerd and runc beside kwok's (harness/sim/realnodes.py)

    def __post_init__(self) -> None:
        if self.nodes < 0:
            raise ConfigError(f"--nodes must be 0 or more, got {self.nodes}")
        if self.real_nodes < 0:
            raise ConfigError(f"--real-nodes must be 0 or more, got {self.real_nodes}")
        if self.real_nodes and not (self.serving and self.nodes):
            raise ConfigError("--real-nodes needs the data plane and at least one kwok node (--nodes 1 or more, "
                              "without --no-serving): the real nodes live in its network namespace")
        unknown = [s for s in self.schedulers if s not in KNOWN_SCHEDULERS]
        if unknown:
            raise ConfigError(f"--schedulers: unknown {', '.join(unknown)}; choose from {', '.join(KNOWN_SCHEDULERS)}")


def parse_schedulers(value: str) -> tuple[str, ...]:
    """'kueue,volcano' -> ('kueue', 'volcano'); 'none' or '' -> ()."""
    if value.strip() in ("", "none"):
        return ()
    return tuple(dict.fromkeys(s.strip() for s in value.split(",") if s.strip()))

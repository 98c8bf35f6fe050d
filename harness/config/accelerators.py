"""The accelerators gpupoc knows, as data: the extended resource a device plugin advertises, the node labels its
discovery publishes, the command that asks the driver from inside a pod, and its DRA driver where it has one.

The one home of every vendor's names: nothing else in harness/ or suites/ spells them (tests/unit/config/
test_accelerator_profiles.py looks). A profile picks one by name (`gpu.accelerator`, NVIDIA by default); the inventory
reads every node by whichever of them it carries, so a cluster mixing vendors is read whole.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

# (model, driver, memory) per device, as the driver's own tool prints them
ProbeRows = list[tuple[str, str, str]]


@dataclass(frozen=True)
class Discovery:
    """The node labels an accelerator's discovery publishes (GPU Feature Discovery for NVIDIA, the ROCm node labeller
    for AMD, the Ascend device plugin for Huawei). `driver` and `runtime` are alternatives, each a tuple of label keys
    joined by dots (a full version, or its parts); None where the discovery has no such label."""

    tool: str
    model: str
    count: str | None
    memory: str | None  # MiB, or a size with a unit suffix ("64G")
    driver: tuple[tuple[str, ...], ...]
    runtime: tuple[tuple[str, ...], ...] = ()
    mig: str | None = None
    sharing: str | None = None


@dataclass(frozen=True)
class Accelerator:
    name: str
    vendor: str
    resource: str             # the device plugin's extended resource
    device_plugin: str        # what to install where no node offers it
    discovery: Discovery
    probe: tuple[str, ...]    # run in a one-device pod: prints what `parse_probe` reads
    parse_probe: Callable[[str], ProbeRows]
    dra_driver: str | None = None   # its DRA driver (and DeviceClass), where it has one

    @property
    def probe_tool(self) -> str:
        return self.probe[0] if self.probe[0] != "sh" else self.probe[-1].split()[0]


def parse_nvidia_smi(text: str) -> ProbeRows:
    """Rows of `nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv`: (name, driver, memory)."""
    rows = []
    for line in text.strip().splitlines()[1:]:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3:
            rows.append((parts[0], parts[1], parts[2]))
    return rows


def parse_amd_smi(text: str) -> ProbeRows:
    """`amd-smi static --asic --driver --vram --json`: a list of devices, each with asic.market_name,
    driver.version and vram.size {value, unit}."""
    try:
        devices = json.loads(text)
    except json.JSONDecodeError:
        return []
    rows = []
    for device in devices if isinstance(devices, list) else []:
        size = (device.get("vram") or {}).get("size") or {}
        memory = f"{size.get('value', '?')} {size.get('unit', '')}".strip() if isinstance(size, dict) else str(size)
        rows.append((str((device.get("asic") or {}).get("market_name", "unknown")),
                     str((device.get("driver") or {}).get("version", "unknown")), memory))
    return rows


def parse_npu_smi(text: str) -> ProbeRows:
    """`npu-smi info -t board -i 0 -c 0` then `npu-smi info -t usages -i 0 -c 0`: "Key : value" lines (the first chip:
    its Chip Name, the driver's Software Version, its HBM Capacity(MB))."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    if "Chip Name" not in fields:
        return []
    return [(fields["Chip Name"], fields.get("Software Version", "unknown"),
             f"{fields.get('HBM Capacity(MB)', '?')} MB")]


NVIDIA = Accelerator(
    "nvidia", "NVIDIA", "nvidia.com/gpu", "the NVIDIA device plugin (or GPU operator)",
    Discovery("GPU Feature Discovery", model="nvidia.com/gpu.product", count="nvidia.com/gpu.count",
              memory="nvidia.com/gpu.memory",
              driver=(("nvidia.com/cuda.driver-version.full",),
                      ("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor", "nvidia.com/cuda.driver.rev")),
              runtime=(("nvidia.com/cuda.runtime-version.full",),
                       ("nvidia.com/cuda.runtime-version.major", "nvidia.com/cuda.runtime-version.minor")),
              mig="nvidia.com/mig.capable", sharing="nvidia.com/gpu.sharing-strategy"),
    ("nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv"), parse_nvidia_smi,
    dra_driver="gpu.nvidia.com")

# ROCm/k8s-device-plugin: the device plugin's amd.com/gpu, its node labeller's amd.com/gpu.* labels (driver-version
# only with -driver-version, off in its example DaemonSet)
AMD = Accelerator(
    "amd", "AMD", "amd.com/gpu", "the AMD GPU device plugin (or AMD GPU operator)",
    Discovery("the AMD GPU node labeller", model="amd.com/gpu.product-name", count=None, memory="amd.com/gpu.vram",
              driver=(("amd.com/gpu.driver-version",),)),
    ("amd-smi", "static", "--asic", "--driver", "--vram", "--json"), parse_amd_smi)

# Ascend/mind-cluster's ascend-device-plugin: huawei.com/Ascend910 for 910, 910B and A3 chips, the chip's name in
# node.kubernetes.io/npu.chip.name, its HBM in mind-cluster/npu-chip-memory ("64G")
ASCEND = Accelerator(
    "ascend", "Huawei", "huawei.com/Ascend910", "Ascend's device plugin (ascend-device-plugin)",
    Discovery("the Ascend device plugin", model="node.kubernetes.io/npu.chip.name", count=None,
              memory="mind-cluster/npu-chip-memory", driver=(("huawei.com/driver.version",),)),
    ("sh", "-c", "npu-smi info -t board -i 0 -c 0; npu-smi info -t usages -i 0 -c 0"), parse_npu_smi)

KNOWN = {a.name: a for a in (NVIDIA, AMD, ASCEND)}
DEFAULT = NVIDIA


def named(name: str) -> Accelerator:
    """The known accelerator of that name (KeyError names the known ones)."""
    try:
        return KNOWN[name]
    except KeyError:
        raise KeyError(f"{name!r}: not a known accelerator ({', '.join(KNOWN)})") from None


def memory_mib(value: str | None) -> int | None:
    """Pure: a discovery's memory label in MiB: a bare number is MiB (GFD), a number with G or M is GiB or MiB."""
    found = re.fullmatch(r"(\d+)\s*([GM]i?B?)?", (value or "").strip())
    if not found:
        return None
    return int(found.group(1)) * (1024 if (found.group(2) or "M").startswith("G") else 1)

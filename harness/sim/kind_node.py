"""The images a kind node built here preloads (kind/node-image.sh): the control plane kubeadm deploys, from the
binaries the sim compiles, under the names kubeadm asks for, so that no node ever pulls from a registry.

Each image is one of images.py's docker archives: the binary in /usr/local/bin (kubeadm's static pods run bare
`kube-apiserver`, `etcd`, ...), the shared libraries it links (glibc only, read from `ldd` on this host, which is the
node's Debian release), and for kube-proxy the `nft` it runs in nftables mode. The sandbox image is gpupoc's own
pause program under containerd's `sandbox_image` name and kubeadm's.

    python -m harness.sim.kind_node OUT_DIR                # the control plane's archives into OUT_DIR
    python -m harness.sim.kind_node --cluster OUT_DIR      # Kueue's for its chart, the kind profile's trainer
"""

from __future__ import annotations

import re
from dataclasses import replace
import shutil
import subprocess
import sys
from pathlib import Path

from harness.config.versions import Pins, load_pins
from harness.core import paths
from harness.core.errors import BuildError, ConfigError, SimError
from harness.sim.crds import module_dir
from harness.sim.images import ImageFile, ImageSpec, debian_files, docker_archive, images_dir, trainer_spec

REGISTRY = "registry.k8s.io"
# kind v0.33's containerd config (images/base/files/etc/containerd/config.toml) and kubeadm v1.36's own pause pin
SANDBOX_IMAGES = (f"{REGISTRY}/pause:3.10", f"{REGISTRY}/pause:3.10.2")
PATH_ENV = "PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NFT = Path("/usr/sbin/nft")


def shared_libraries(binary: Path) -> list[Path]:
    """The libraries `binary` loads, as `ldd` resolves them here (none for a static binary)."""
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, timeout=30)
    return [Path(p) for p in re.findall(r"(/\S+\.so[^\s]*)", out.stdout)]


def program_files(binary: Path, at: str) -> list[ImageFile]:
    """`binary` at `at` inside the image, with the libraries it links at the paths the loader looks for them."""
    files = [ImageFile(at, binary.read_bytes())]
    files += [ImageFile(str(lib).lstrip("/"), lib.resolve().read_bytes()) for lib in shared_libraries(binary)]
    return files


def built(bin_dir: Path, name: str) -> Path:
    found = bin_dir / name
    if not found.exists():
        raise ConfigError(f"{found} missing: build it first (`gpupoc sim build --with kind`)")
    return found


def program_image(image: str, binary: Path, at: str, extra: tuple[ImageFile, ...] = (), user: str = "",
                  entrypoint: tuple[str, ...] | None = None) -> ImageSpec:
    """One program at `at` (its libraries beside it), `extra` files, a writable /tmp; run as `user` ("": root)."""
    files = {f.path: f for f in (*program_files(binary, at), *extra, ImageFile("tmp/", mode=0o1777))}
    return ImageSpec(image, tuple(files.values()), entrypoint=(f"/{at}",) if entrypoint is None else entrypoint,
                     env=(PATH_ENV,), user=user)


def control_plane_specs(pins: Pins, bin_dir: Path) -> list[ImageSpec]:
    """kubeadm v1.36's images (`kubeadm config images list`), each with the binary built for the sim on PATH
    (kubeadm's static pods run it bare)."""
    def on_path(image: str, name: str, extra: tuple[ImageFile, ...] = (), entrypoint: tuple[str, ...] = ()) -> ImageSpec:
        return program_image(image, built(bin_dir, name), f"usr/local/bin/{name}", extra, entrypoint=entrypoint)

    version = pins.kubernetes
    specs = [on_path(f"{REGISTRY}/{name}:{version}", name)
             for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")]
    specs.append(on_path(f"{REGISTRY}/kube-proxy:{version}", "kube-proxy",
                         extra=tuple(program_files(NFT, "usr/sbin/nft"))))
    specs.append(on_path(f"{REGISTRY}/etcd:{pins.etcd.removeprefix('v')}-0", "etcd"))
    specs.append(on_path(f"{REGISTRY}/coredns/coredns:{pins.coredns}", "coredns",
                         entrypoint=("/usr/local/bin/coredns",)))
    pause = built(bin_dir, "gpupoc-pause").read_bytes()
    specs += [ImageSpec(name, (ImageFile("pause", pause),), entrypoint=("/pause",)) for name in SANDBOX_IMAGES]
    return specs


# The images kind/here.sh loads into the nodes, built from what the sim builds and named as the releases publish
# them: Kueue's for its chart, and the trainer profiles/kind.yaml names (busybox:1.36.1) as Debian's busybox-static
# (1.35: sh, date, sed and sleep are all the trainer runs; docs/kind-node-image.md says so).
KUEUE_IMAGE = "registry.k8s.io/kueue/kueue"
TRAINER_IMAGE = "docker.io/library/busybox:1.36.1"
NONROOT = "65532:65532"
VOLCANO_REGISTRY = "docker.io/volcanosh"  # the chart's basic.image_registry and *_image_name
KUBE_STATE_METRICS_IMAGE = "registry.k8s.io/kube-state-metrics/kube-state-metrics"
# Prometheus as the sim runs it (Debian's build), for kind/monitoring.yaml; named for what it is, not a release
PROMETHEUS = Path("/usr/bin/prometheus")
PROMETHEUS_IMAGE = "gpupoc.local/prometheus-debian:2.42"
# What Volcano's admission-init Job runs (installer/dockerfile/webhook-manager: its gen-admission-secret.sh on
# Alpine): bash, openssl, kubectl, and cat, base64 and tr (busybox's applets here).
ADMISSION_INIT_PACKAGES = ("bash", "libtinfo6", "libc6", "openssl", "libssl3")


def cluster_specs(pins: Pins, bin_dir: Path) -> list[ImageSpec]:
    trainer = replace(trainer_spec(), name=TRAINER_IMAGE)
    script = (module_dir("volcano.sh/volcano", pins.volcano, paths.build_root())
              / "installer/dockerfile/webhook-manager/gen-admission-secret.sh")
    admission_extra = (*trainer.files, *debian_files(ADMISSION_INIT_PACKAGES, images_dir() / "debs"),
                       *program_files(built(bin_dir, "kubectl"), "usr/local/bin/kubectl"),
                       ImageFile("gen-admission-secret.sh", script.read_bytes()))
    volcano = f"{VOLCANO_REGISTRY}/vc-{{}}:{pins.volcano}"
    return [
        # the chart's Deployment runs /manager with runAsNonRoot, as the release's distroless image (user 65532)
        program_image(f"{KUEUE_IMAGE}:{pins.kueue}", built(bin_dir, "kueue"), "manager", user=NONROOT),
        program_image(volcano.format("scheduler"), built(bin_dir, "volcano-scheduler"), "vc-scheduler"),
        program_image(volcano.format("controller-manager"), built(bin_dir, "volcano-controller-manager"),
                      "vc-controller-manager"),
        program_image(volcano.format("webhook-manager"), built(bin_dir, "volcano-webhook-manager"),
                      "vc-webhook-manager", extra=admission_extra),
        trainer,
        # kube-state-metrics as its examples/standard Deployment runs it (user 65534), with its Dockerfile's flags
        program_image(f"{KUBE_STATE_METRICS_IMAGE}:{pins.kube_state_metrics}", built(bin_dir, "kube-state-metrics"),
                      "kube-state-metrics", user="65534:65534",
                      entrypoint=("/kube-state-metrics", "--port=8080", "--telemetry-port=8081")),
        program_image(PROMETHEUS_IMAGE, PROMETHEUS, "bin/prometheus"),
    ]


def archive_name(image: str) -> str:
    return image.removeprefix(f"{REGISTRY}/").replace("/", "-").replace(":", "-") + ".tar"


def write_archives(out_dir: Path, cluster: bool = False, pins: Pins | None = None) -> list[Path]:
    pins = pins or load_pins()
    specs = (cluster_specs if cluster else control_plane_specs)(pins, paths.bin_dir())
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for spec in specs:
        target = out_dir / archive_name(spec.name)
        target.write_bytes(docker_archive(spec))
        written.append(target)
    return written


def main(argv: list[str]) -> int:
    cluster = argv[:1] == ["--cluster"]
    argv = argv[1:] if cluster else argv
    if len(argv) != 1:
        print("usage: python -m harness.sim.kind_node [--cluster] OUT_DIR", file=sys.stderr)
        return 2
    if not shutil.which("ldd"):
        print("kind node images: ldd missing (Debian's libc-bin)", file=sys.stderr)
        return 1
    try:
        for archive in write_archives(Path(argv[0]), cluster):
            print(archive)
    except (BuildError, ConfigError, SimError) as exc:
        print(f"kind node images: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

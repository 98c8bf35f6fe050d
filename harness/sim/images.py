"""Container images for the sim's real nodes, built here: no registry is reachable from these machines.

Each image is a docker-archive tarball (one layer, a config, manifest.json), written byte for byte the same for the
same inputs (fixed mtimes and owners), cached in the build root beside the Go binaries and imported into each real
node's containerd with `ctr images import`. The sandbox image runs gpupoc's own pause program (sim/pause); the
trainer image is Debian's busybox-static with its applets as links, enough for `sh -c 'echo ...; exit 3'`; the
model server image is Python from Debian's packages (unpacked with dpkg-deb, no registry) running gpupoc's vLLM
stand-in (`python3 -m harness.sim.standin`, standard library only); the sample image adds NumPy with OpenBLAS
(Debian's, threaded) and runs gpupoc's workload sample (`python3 -m harness.sample.train`).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import tarfile
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.core import paths
from harness.core.errors import ConfigError, SimError

PAUSE_IMAGE = "gpupoc.local/pause:1"
TRAINER_IMAGE = "gpupoc.local/trainer:1"
STANDIN_IMAGE = "gpupoc.local/standin:1"
# Python and what importing asyncio, json and ssl needs at run time (their dependencies, by hand: no apt resolver in
# an image without dpkg). Downloaded with `apt-get download`, cached beside the images.
STANDIN_PACKAGES = ("python3.11-minimal", "libpython3.11-minimal", "libpython3.11-stdlib", "libc6", "zlib1g",
                    "libexpat1", "libffi8", "libssl3", "libbz2-1.0", "liblzma5", "libgcc-s1", "media-types")
STANDIN_SOURCES = ("harness/__init__.py", "harness/sim/__init__.py", "harness/sim/standin.py")
SAMPLE_IMAGE = "gpupoc.local/sample:1"
# NumPy and the BLAS it loads (OpenBLAS's threaded build); dpkg's alternatives would link libblas.so.3 to it
SAMPLE_PACKAGES = (*STANDIN_PACKAGES, "python3-numpy", "libopenblas0-pthread", "libgfortran5", "libquadmath0")
SAMPLE_SOURCES = ("harness/__init__.py", "harness/sample/__init__.py", "harness/sample/train.py")
BLAS_DIR = "usr/lib/x86_64-linux-gnu"
APP_DIR = "opt/gpupoc"
DOWNLOAD_TIMEOUT_S = 300.0
BUSYBOX = Path("/bin/busybox")
IMPORT_TIMEOUT_S = 60.0
CRI_NAMESPACE = "k8s.io"  # the containerd namespace the CRI plugin reads images from


@dataclass(frozen=True)
class ImageFile:
    """One entry of the image's only layer: a regular file with `content`, a link to `target`, or a directory (a
    path ending in "/", with its `mode`)."""

    path: str
    content: bytes = b""
    mode: int = 0o755
    target: str = ""


@dataclass(frozen=True)
class ImageSpec:
    name: str
    files: tuple[ImageFile, ...]
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: tuple[str, ...] = ("PATH=/bin",)
    user: str = ""  # the image's User ("65532:65532" for a chart that runs its pods as non-root); "" for root


def _layer(files: Iterable[ImageFile]) -> bytes:
    """The layer tarball, reproducible: entries sorted, mtime 0, owned by root."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        modes = {f.path.rstrip("/"): f.mode for f in files if f.path.endswith("/")}
        parents = {"/".join(f.path.split("/")[:i]) for f in files for i in range(1, f.path.rstrip("/").count("/") + 1)}
        for directory in sorted(parents | set(modes)):
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, modes.get(directory, 0o755)
            tar.addfile(info)
        for entry in sorted((f for f in files if not f.path.endswith("/")), key=lambda f: f.path):
            info = tarfile.TarInfo(entry.path)
            info.mode = entry.mode
            if entry.target:
                info.type, info.linkname = tarfile.SYMTYPE, entry.target
                tar.addfile(info)
            else:
                info.size = len(entry.content)
                tar.addfile(info, io.BytesIO(entry.content))
    return out.getvalue()


def docker_archive(spec: ImageSpec) -> bytes:
    """The whole image as `docker save` writes it (what `ctr images import` reads)."""
    layer = _layer(spec.files)
    layer_id = hashlib.sha256(layer).hexdigest()
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Env": list(spec.env), "Entrypoint": list(spec.entrypoint) or None, "Cmd": list(spec.cmd) or None,
                   **({"User": spec.user} if spec.user else {})},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_id}"]},
        "history": [{"created_by": "gpupoc sim (harness/sim/images.py)"}],
    }, sort_keys=True).encode()
    config_name = f"{hashlib.sha256(config).hexdigest()}.json"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [spec.name],
                            "Layers": [f"{layer_id}/layer.tar"]}]).encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in ((f"{layer_id}/layer.tar", layer), (config_name, config), ("manifest.json", manifest)):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def pause_spec(pause_binary: Path) -> ImageSpec:
    return ImageSpec(PAUSE_IMAGE, (ImageFile("pause", pause_binary.read_bytes()),), entrypoint=("/pause",))


def busybox_applets(busybox: Path = BUSYBOX) -> list[str]:
    result = subprocess.run([str(busybox), "--list"], capture_output=True, text=True, timeout=10)
    return [a for a in result.stdout.split() if a and "/" not in a and a != "busybox"]


def trainer_spec(busybox: Path = BUSYBOX) -> ImageSpec:
    if not busybox.exists():
        raise ConfigError(f"{busybox} missing: install Debian's busybox-static (`bash sim/install-deps.sh`); the "
                          "real nodes' trainer image is built from it")
    links = tuple(ImageFile(f"bin/{applet}", target="busybox") for applet in busybox_applets(busybox))
    return ImageSpec(TRAINER_IMAGE, (ImageFile("bin/busybox", busybox.read_bytes()), *links), cmd=("sh",))


def debian_files(packages: Iterable[str], debs: Path) -> list[ImageFile]:
    """The files of Debian `packages` (downloaded into `debs` once), unpacked as dpkg would, as image entries."""
    debs.mkdir(parents=True, exist_ok=True)
    wanted = list(packages)
    have = {p.name.split("_", 1)[0] for p in debs.glob("*.deb")}
    missing = [p for p in wanted if p not in have]
    if missing:
        result = subprocess.run(["apt-get", "download", *missing], cwd=debs, capture_output=True, text=True,
                                timeout=DOWNLOAD_TIMEOUT_S)
        if result.returncode != 0:
            raise SimError(f"apt-get download {' '.join(missing)} failed: {(result.stderr or result.stdout).strip()}")
    files: dict[str, ImageFile] = {}
    with tempfile.TemporaryDirectory(prefix="gpupoc-rootfs-") as tmp:
        for package in wanted:
            deb = next(p for p in sorted(debs.glob(f"{package}_*.deb")))
            subprocess.run(["dpkg-deb", "-x", str(deb), tmp], check=True, capture_output=True, timeout=60)
        root = Path(tmp)
        for path in sorted(root.rglob("*")):
            name = str(path.relative_to(root))
            if path.is_symlink():
                files[name] = ImageFile(name, target=os.readlink(path))
            elif path.is_file():
                files[name] = ImageFile(name, path.read_bytes(), mode=path.stat().st_mode & 0o777)
    return list(files.values())


@dataclass(frozen=True)
class PythonImage:
    """An image of Python from Debian's packages and some of the harness's modules (which need nothing else)."""

    name: str
    packages: tuple[str, ...]
    sources: tuple[str, ...]
    module: str
    extra: tuple[ImageFile, ...] = ()  # what dpkg's scripts would have made (links), and directories

    def spec(self, debs: Path | None = None) -> ImageSpec:
        sources = tuple(ImageFile(f"{APP_DIR}/{name}", (paths.REPO_ROOT / name).read_bytes(), mode=0o644)
                        for name in self.sources)
        return ImageSpec(self.name, (*debian_files(self.packages, debs or images_dir() / "debs"), *self.extra,
                                     *sources),
                         entrypoint=("/usr/bin/python3.11", "-m", self.module),
                         env=("PATH=/usr/bin:/bin", f"PYTHONPATH=/{APP_DIR}", "PYTHONUNBUFFERED=1"))

    def inputs(self) -> str:
        """What the image is made of (its packages and sources): a change rebuilds it."""
        made = (f"{f.path}{f.target}{f.mode:o}" for f in self.extra)
        digest = hashlib.sha256(" ".join((*self.packages, *made)).encode())
        for name in self.sources:
            digest.update((paths.REPO_ROOT / name).read_bytes())
        return digest.hexdigest()


# A model server without a GPU, run as any user
STANDIN = PythonImage(STANDIN_IMAGE, STANDIN_PACKAGES, STANDIN_SOURCES, "harness.sim.standin")
# The workload sample on NumPy, its BLAS threaded over the CPUs the container may use
SAMPLE = PythonImage(SAMPLE_IMAGE, SAMPLE_PACKAGES, SAMPLE_SOURCES, "harness.sample.train", extra=(
    *(ImageFile(f"{BLAS_DIR}/{lib}", target=f"openblas-pthread/{lib}")
      for lib in ("libblas.so.3", "liblapack.so.3", "libopenblas.so.0")),
    ImageFile("tmp/", mode=0o1777)))  # as most images have it: the container's own writable scratch


def node_images(pause_binary: Path) -> list[Path]:
    """The real nodes' images, built where their inputs changed: their archives, to import into each node."""
    archives = build([pause_spec(pause_binary), trainer_spec()])
    for image in (STANDIN, SAMPLE):
        archive = archive_path(image.name)
        stamp = archive.with_suffix(".inputs")
        if not archive.exists() or not stamp.exists() or stamp.read_text() != image.inputs():
            archives += build([image.spec()])
            stamp.write_text(image.inputs())
        else:
            archives.append(archive)
    return archives


def images_dir() -> Path:
    return paths.build_root() / "images"


def archive_path(name: str) -> Path:
    return images_dir() / f"{name.rsplit('/', 1)[1].replace(':', '-')}.tar"


def build(specs: Iterable[ImageSpec]) -> list[Path]:
    """Write each image's archive unless the same bytes are there already; return the archives."""
    images_dir().mkdir(parents=True, exist_ok=True)
    written = []
    for spec in specs:
        data, target = docker_archive(spec), archive_path(spec.name)
        if not target.exists() or target.read_bytes() != data:
            tmp = target.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, target)
        written.append(target)
    return written


def import_into(containerd_socket: Path, archives: Iterable[Path]) -> None:
    """Import the archives into one containerd's CRI namespace (unpacked for its default snapshotter)."""
    for archive in archives:
        result = subprocess.run(["ctr", f"--address={containerd_socket}", f"--namespace={CRI_NAMESPACE}",
                                 "images", "import", str(archive)],
                                capture_output=True, text=True, timeout=IMPORT_TIMEOUT_S)
        if result.returncode != 0:
            raise SimError(f"importing {archive} into containerd ({containerd_socket}) failed: "
                           f"{(result.stderr or result.stdout).strip()}")

"""`gpupoc sim build`: compile the sim's components from the Go module proxy.

Each component is a small recipe: a wrapper module (when the upstream module carries
replace directives that `go install` refuses), the packages to build and the ldflags.
Binaries land in the per-user build root; a stamp per component records the recipe it
was built from, so an unchanged pin is not rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.errors import BuildError, ConfigError
from harness.core import paths
from harness.config.versions import Pins, load_pins

LOG_TAIL_LINES = 25
# Staging modules that only hold examples: no binary imports them and the proxy does not serve them all.
SKIPPED_STAGING_PREFIX = "k8s.io/sample-"
PINNED_BUILD_DATE = "2026-01-01T00:00:00Z"
# KAI-Scheduler's processes (cmd/<name> without the prefix); prefixed so `scheduler` is not ambiguous.
KAI_BINARIES = ("kai-scheduler", "kai-binder", "kai-podgrouper", "kai-queuecontroller", "kai-podgroupcontroller",
                "kai-admission")
# kube-proxy runs in the sim's network namespace and routes Services to the model-server stand-ins.
KUBERNETES_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy")
# `--with` name -> its recipes. helm and actionlint check kind/ and .github/; the sim itself never runs them.
# real-nodes: the kubelet, gpupoc's own sandbox (pause) program and device plugin; upgrade: the releases before the
# pinned Kueue and KubeRay (operations.upgrade), as binaries of their own beside the pinned ones.
OPTIONAL = {"kai": ("kai-scheduler",), "karpenter": ("karpenter",), "helm": ("helm",), "actionlint": ("actionlint",),
            "real-nodes": ("kubelet", "pause", "device-plugin"), "upgrade": ("kueue-previous", "kuberay-previous"),
            "kind": ("kind", "kind-node", "kubelet", "pause", "coredns", "volcano-admission")}
KUEUE_MODULE = "sigs.k8s.io/kueue"
KUBERAY_MODULE = "github.com/ray-project/kuberay/ray-operator"
HELM_MODULE = "helm.sh/helm/v3"  # v4 moves the packages that helm_ldflags stamps
ACTIONLINT_MODULE = "github.com/rhysd/actionlint"


@dataclass(frozen=True)
class Recipe:
    name: str
    version: str
    binaries: tuple[str, ...]
    packages: tuple[str, ...]
    ldflags: str = "-s -w"
    wrapper_go_mod: Callable[[], str] | None = None  # None: `go install pkg@version`
    extra_env: dict[str, str] = field(default_factory=dict)
    optional: bool = False  # built only when asked for by name (`--with`)
    source: Path | None = None  # gpupoc's own Go program in this repo (its version: a hash of its files)

    @property
    def stamp(self) -> str:
        return json.dumps({"version": self.version, "packages": self.packages, "ldflags": self.ldflags})


def _go(args: Sequence[str], cwd: Path, log: Path, env: dict[str, str]) -> None:
    with log.open("a") as out:
        out.write(f"$ go {' '.join(args)}\n")
        out.flush()
        rc = subprocess.call(["go", *args], cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env)
    if rc != 0:
        raise BuildError(f"go {args[0]} failed with exit status {rc}")


def _module_go_mod(module: str, version: str, log: Path) -> str:
    """The upstream go.mod of module@version, fetched through the module proxy."""
    paths.build_root().mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"],
                            cwd=paths.build_root(), capture_output=True, text=True)
    info = json.loads(result.stdout or "{}")
    if result.returncode != 0 or "GoMod" not in info:
        log.write_text(result.stdout + result.stderr)
        raise BuildError(f"cannot download {module}@{version}: {info.get('Error', result.stderr.strip())}")
    return Path(info["GoMod"]).read_text()


def _godebug_lines(go_mod: str) -> list[str]:
    return [line for line in go_mod.splitlines() if line.startswith("godebug ")]


def kubernetes_wrapper(pins: Pins, log: Path) -> str:
    """Require k8s.io/kubernetes and every staging module it replaces, at the matching v0.x.y."""
    upstream = _module_go_mod("k8s.io/kubernetes", pins.kubernetes, log)
    staging = sorted(set(re.findall(r"^\s*(k8s\.io/\S+)\s+=>\s+\./staging/", upstream, re.M)))
    requires = [f"\tk8s.io/kubernetes {pins.kubernetes}"]
    requires += [f"\t{m} {pins.kubernetes_staging}" for m in staging if not m.startswith(SKIPPED_STAGING_PREFIX)]
    return _wrapper("kubernetes", upstream, requires)


def etcd_wrapper(pins: Pins, log: Path) -> str:
    """Require etcd's server module and the sibling modules its go.mod replaces locally."""
    upstream = _module_go_mod("go.etcd.io/etcd/server/v3", pins.etcd, log)
    siblings = sorted(set(re.findall(r"^\s*(go\.etcd\.io/etcd/\S+)\s+=>\s+\.\./", upstream, re.M)))
    requires = [f"\t{m} {pins.etcd}" for m in ["go.etcd.io/etcd/server/v3", *siblings]]
    return _wrapper("etcd", upstream, requires)


def volcano_wrapper(pins: Pins, log: Path) -> str:
    """Require Volcano with its own replace directives; its staging volcano.sh/apis at a published version."""
    upstream = _module_go_mod("volcano.sh/volcano", pins.volcano, log)
    replaces = [r for r in _replace_lines(upstream) if "=> ./" not in r and "=> ../" not in r]
    replaces.append(f"volcano.sh/apis => volcano.sh/apis {pins.volcano_apis}")
    requires = [f"\tvolcano.sh/volcano {pins.volcano}"]
    return _wrapper("volcano", upstream, requires, replaces)


def plain_wrapper(name: str, module: str, version: str, log: Path) -> str:
    """Require one module as is: `go build` in a wrapper, where `go install mod@v` needs the proxy's version
    list (which the proxy refuses for some modules, e.g. kube-state-metrics/v2)."""
    return _wrapper(name, _module_go_mod(module, version, log), [f"\t{module} {version}"])


def _replace_lines(go_mod: str) -> list[str]:
    blocks = re.findall(r"^replace \((.*?)^\)", go_mod, re.M | re.S)
    lines = [line.strip() for block in blocks for line in block.splitlines() if "=>" in line]
    return lines + [line.removeprefix("replace ").strip() for line in go_mod.splitlines()
                    if line.startswith("replace ") and "=>" in line]


def _wrapper(name: str, upstream: str, requires: list[str], replaces: Sequence[str] = ()) -> str:
    go_line = re.search(r"^go (\S+)", upstream, re.M)
    lines = [f"module gpupoc.local/sim/{name}", "", f"go {go_line.group(1) if go_line else '1.26.0'}", ""]
    lines += _godebug_lines(upstream)
    lines += ["", "require (", *requires, ")", ""]
    if replaces:
        lines += ["replace (", *[f"\t{r}" for r in replaces], ")", ""]
    return "\n".join(lines)


def kubernetes_ldflags(version: str) -> str:
    """Version stamps: kwok and the controllers read `--version` and /version."""
    major, minor = version.removeprefix("v").split(".")[:2]
    values = {"gitVersion": version, "gitMajor": major, "gitMinor": minor,
              "gitCommit": "0" * 40, "gitTreeState": "clean", "buildDate": PINNED_BUILD_DATE}
    flags = [f"-X {pkg}.{key}={value}" for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
             for key, value in values.items()]
    return " ".join(["-s -w", *flags])


def helm_ldflags(version: str, kubernetes: str) -> str:
    """Helm's own Makefile stamps: its version, and the Kubernetes version `helm template` renders for by default
    (here the sim's minor, which is also the client-go minor helm v3.21 is built against)."""
    major, minor = kubernetes.removeprefix("v").split(".")[:2]
    flags = [f"-X {HELM_MODULE}/internal/version.version={version}",
             f"-X {HELM_MODULE}/internal/version.gitTreeState=clean"]
    flags += [f"-X {HELM_MODULE}/pkg/{pkg}.k8sVersion{part}={value}" for pkg in ("chartutil", "lint/rules")
              for part, value in (("Major", major), ("Minor", minor))]
    return " ".join(["-s -w", *flags])


def source_hash(directory: Path) -> str:
    """The version of gpupoc's own Go source: a hash of its files (a change rebuilds it)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.iterdir() if p.suffix in (".go", ".mod", ".sum")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"src-{digest.hexdigest()[:12]}"


ADAPTER_SOURCE = paths.SIM_RECIPES / "adapter"
PAUSE_SOURCE = paths.SIM_RECIPES / "pause"
DEVICE_PLUGIN_SOURCE = paths.SIM_RECIPES / "deviceplugin"


def recipes(pins: Pins, log_dir: Path) -> list[Recipe]:
    return [
        Recipe("etcd", pins.etcd, ("etcd",), ("go.etcd.io/etcd/server/v3",),
               wrapper_go_mod=lambda: etcd_wrapper(pins, log_dir / "etcd.log")),
        Recipe("kubernetes", pins.kubernetes,
               KUBERNETES_BINARIES,
               tuple(f"k8s.io/kubernetes/cmd/{b}" for b in KUBERNETES_BINARIES),
               ldflags=kubernetes_ldflags(pins.kubernetes),
               wrapper_go_mod=lambda: kubernetes_wrapper(pins, log_dir / "kubernetes.log")),
        # The real nodes' kubelet (`gpupoc sim up --real-nodes N`): a wrapper of its own, since the kubelet needs
        # go.sum entries the control plane does not (k8s.io/cri-streaming, ...), and the control plane's stamp stays.
        Recipe("kubelet", pins.kubernetes, ("kubelet",), ("k8s.io/kubernetes/cmd/kubelet",),
               ldflags=kubernetes_ldflags(pins.kubernetes),
               wrapper_go_mod=lambda: kubernetes_wrapper(pins, log_dir / "kubelet.log"), optional=True),
        # What a kind node image holds besides the control plane (kind/node-image.sh): kubeadm and kubectl at the
        # control plane's version (their own wrapper, as the kubelet's), CoreDNS at kubeadm's pin, and kind itself.
        Recipe("kind-node", pins.kubernetes, ("kubeadm", "kubectl"),
               ("k8s.io/kubernetes/cmd/kubeadm", "k8s.io/kubernetes/cmd/kubectl"),
               ldflags=kubernetes_ldflags(pins.kubernetes),
               wrapper_go_mod=lambda: kubernetes_wrapper(pins, log_dir / "kind-node.log"), optional=True),
        Recipe("coredns", pins.coredns, ("coredns",), ("github.com/coredns/coredns",), optional=True),
        Recipe("kind", pins.kind, ("kind",), ("sigs.k8s.io/kind",), optional=True),
        Recipe("kwok", pins.kwok, ("kwok",), ("sigs.k8s.io/kwok/cmd/kwok",)),
        Recipe("kueue", pins.kueue, ("kueue",), (f"{KUEUE_MODULE}/cmd/kueue",)),
        # The upgrade in place starts from these (a wrapper each: `go install` would name them as the pinned ones).
        Recipe("kueue-previous", pins.kueue_previous, ("kueue-previous",), (f"{KUEUE_MODULE}/cmd/kueue",),
               wrapper_go_mod=lambda: plain_wrapper("kueue-previous", KUEUE_MODULE, pins.kueue_previous,
                                                    log_dir / "kueue-previous.log"), optional=True),
        Recipe("kuberay-previous", pins.kuberay_previous, ("ray-operator-previous",), (KUBERAY_MODULE,),
               wrapper_go_mod=lambda: plain_wrapper("kuberay-previous", KUBERAY_MODULE, pins.kuberay_previous,
                                                    log_dir / "kuberay-previous.log"), optional=True),
        Recipe("volcano", pins.volcano, ("volcano-scheduler", "volcano-controller-manager"),
               ("volcano.sh/volcano/cmd/scheduler", "volcano.sh/volcano/cmd/controller-manager"),
               wrapper_go_mod=lambda: volcano_wrapper(pins, log_dir / "volcano.log")),
        # Volcano's admission webhook: the sim runs Volcano without it; its chart on kind needs it (kind/here.sh).
        Recipe("volcano-admission", pins.volcano, ("volcano-webhook-manager",), ("volcano.sh/volcano/cmd/webhook-manager",),
               wrapper_go_mod=lambda: volcano_wrapper(pins, log_dir / "volcano-admission.log"), optional=True),
        Recipe("kuberay", pins.kuberay, ("ray-operator",), (KUBERAY_MODULE,)),
        Recipe("kube-state-metrics", pins.kube_state_metrics, ("kube-state-metrics",),
               ("k8s.io/kube-state-metrics/v2",),
               wrapper_go_mod=lambda: plain_wrapper("kube-state-metrics", "k8s.io/kube-state-metrics/v2",
                                                    pins.kube_state_metrics, log_dir / "kube-state-metrics.log")),
        # The HPA's external metrics from Prometheus: gpupoc's adapter on sigs.k8s.io/custom-metrics-apiserver.
        Recipe("metrics-adapter", source_hash(ADAPTER_SOURCE), ("gpupoc-metrics-adapter",), (".",),
               source=ADAPTER_SOURCE),
        # The real nodes' sandbox process, static (it runs alone in an image with nothing else in it).
        Recipe("pause", source_hash(PAUSE_SOURCE), ("gpupoc-pause",), (".",), source=PAUSE_SOURCE,
               extra_env={"CGO_ENABLED": "0"}, optional=True),
        # The real nodes' simulated GPUs, through the kubelet's real device-plugin API.
        Recipe("device-plugin", source_hash(DEVICE_PLUGIN_SOURCE), ("gpupoc-device-plugin",), (".",),
               source=DEVICE_PLUGIN_SOURCE, optional=True),
        Recipe("kai-scheduler", pins.kai_scheduler, KAI_BINARIES,
               tuple(f"{pins.kai_scheduler_module}/cmd/{b.removeprefix('kai-')}" for b in KAI_BINARIES),
               wrapper_go_mod=lambda: plain_wrapper("kai-scheduler", pins.kai_scheduler_module, pins.kai_scheduler,
                                                    log_dir / "kai-scheduler.log"),
               optional=True),
        # Karpenter with its kwok provider (module sigs.k8s.io/karpenter, package kwok): named apart from kwok itself.
        Recipe("karpenter", pins.karpenter, ("karpenter-kwok",), ("sigs.k8s.io/karpenter/kwok",),
               wrapper_go_mod=lambda: plain_wrapper("karpenter", "sigs.k8s.io/karpenter", pins.karpenter,
                                                    log_dir / "karpenter.log"),
               optional=True),
        Recipe("helm", pins.helm, ("helm",), (f"{HELM_MODULE}/cmd/helm",),
               ldflags=helm_ldflags(pins.helm, pins.kubernetes), optional=True),
        Recipe("actionlint", pins.actionlint, ("actionlint",), (f"{ACTIONLINT_MODULE}/cmd/actionlint",),
               optional=True),
    ]


def _is_current(recipe: Recipe) -> bool:
    stamp = paths.bin_dir() / ".stamps" / recipe.name
    binaries_exist = all((paths.bin_dir() / b).exists() for b in recipe.binaries)
    return binaries_exist and stamp.exists() and stamp.read_text() == recipe.stamp


def _build_one(recipe: Recipe, log: Path) -> None:
    env = {**os.environ, "GOFLAGS": "-mod=mod -trimpath", "GOTOOLCHAIN": "auto", **recipe.extra_env}
    log.write_text("")
    if recipe.source is not None:
        _go(["build", "-ldflags", recipe.ldflags, "-o", str(paths.bin_dir() / recipe.binaries[0]), "."],
            recipe.source, log, env)
        return
    if recipe.wrapper_go_mod is None:
        env["GOBIN"] = str(paths.bin_dir())
        pkgs = [f"{p}@{recipe.version}" for p in recipe.packages]
        _go(["install", "-ldflags", recipe.ldflags, *pkgs], paths.build_root(), log, env)
        return
    src = paths.wrapper_dir(recipe.name)
    src.mkdir(parents=True, exist_ok=True)
    go_mod = recipe.wrapper_go_mod()
    if not (src / "go.mod").exists() or (src / "go.mod").read_text() != go_mod:
        (src / "go.mod").write_text(go_mod)
        (src / "go.sum").unlink(missing_ok=True)
    if [p.rsplit("/", 1)[1] for p in recipe.packages] == list(recipe.binaries):
        _go(["build", "-ldflags", recipe.ldflags, "-o", f"{paths.bin_dir()}/", *recipe.packages], src, log, env)
        return
    for package, binary in zip(recipe.packages, recipe.binaries, strict=True):
        _go(["build", "-ldflags", recipe.ldflags, "-o", str(paths.bin_dir() / binary), package], src, log, env)


def require_go() -> None:
    if shutil.which("go") is None:
        raise ConfigError("Go toolchain not found on PATH: install Go 1.26 or newer "
                          "(the sim is compiled from Go modules) and re-run `gpupoc sim build`")


def selected(all_recipes: Sequence[Recipe], only: Sequence[str], with_optional: Sequence[str]) -> list[Recipe]:
    """`only` names recipes; otherwise every default one plus the optional ones named by `with_optional`."""
    unknown = [w for w in with_optional if w not in OPTIONAL]
    known = {r.name for r in all_recipes}
    unknown += [o for o in only if o not in known]
    if unknown:
        raise ConfigError(f"unknown component(s) {', '.join(unknown)}: components are {', '.join(sorted(known))}; "
                          f"--with takes {', '.join(OPTIONAL)}")
    if only:
        return [r for r in all_recipes if r.name in only]
    extra = {name for w in with_optional for name in OPTIONAL[w]}
    return [r for r in all_recipes if not r.optional or r.name in extra]


def build(only: Sequence[str] = (), say: Callable[[str], None] = print,
          with_optional: Sequence[str] = ()) -> dict[str, float]:
    """Build every component whose binaries are missing or stale; return seconds per component."""
    require_go()
    pins = load_pins()
    log_dir = paths.build_root() / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    paths.bin_dir().mkdir(parents=True, exist_ok=True)
    (paths.bin_dir() / ".stamps").mkdir(exist_ok=True)
    todo = selected(recipes(pins, log_dir), only, with_optional)
    timings: dict[str, float] = {}
    for index, recipe in enumerate(todo, 1):
        label = f"[{index}/{len(todo)}] {recipe.name} {recipe.version} ({', '.join(recipe.binaries)})"
        if _is_current(recipe):
            say(f"{label}: cached")
            timings[recipe.name] = 0.0
            continue
        say(f"{label}: building (log: {log_dir / (recipe.name + '.log')}) ...")
        started = time.monotonic()
        log = log_dir / f"{recipe.name}.log"
        try:
            _build_one(recipe, log)
        except BuildError as exc:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:])
            raise BuildError(f"building {recipe.name} {recipe.version} failed: {exc}\n{tail}") from exc
        (paths.bin_dir() / ".stamps" / recipe.name).write_text(recipe.stamp)
        timings[recipe.name] = time.monotonic() - started
        say(f"{label}: built in {timings[recipe.name]:.0f}s")
    return timings

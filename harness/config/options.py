"""Configuration flows one way: options and environment variables -> one frozen RunConfig.

Every option has an environment variable; the option wins when both are given. Read once in
pytest_configure (or by `gpupoc run`) and validated before any test runs.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from harness.core.errors import ConfigError
from harness.config.profile import BACKENDS, Profile, load_profile
from harness.core.paths import PROFILES_DIR, reports_root

DEFAULT_SIM_PROFILE = PROFILES_DIR / "sim.yaml"
DEFAULT_REPORTS = reports_root()
DEFAULT_LOCK = "default/gpupoc-run-lock"  # the run lock, a Lease (harness/cluster/runlock.py)

# option name -> (environment variable, help)
OPTIONS: dict[str, tuple[str, str]] = {
    "kubeconfig": ("GPUPOC_KUBECONFIG", "kubeconfig of the cluster under test (default: the sim, started if needed)"),
    "context": ("GPUPOC_CONTEXT", "context in the kubeconfig (default: its current context)"),
    "prometheus_url": ("GPUPOC_PROMETHEUS_URL", "Prometheus of the cluster (default: the sim's, or the profile's)"),
    "profile": ("GPUPOC_PROFILE", "POC profile YAML (default: profiles/sim.yaml)"),
    "backends": ("GPUPOC_BACKENDS", f"comma-separated subset of {','.join(BACKENDS)} (default: all detected)"),
    "allow_destructive": ("GPUPOC_ALLOW_DESTRUCTIVE",
                          "comma-separated contexts where pods may be failed, nodes cordoned, controllers stopped"),
    "run_id": ("GPUPOC_RUN_ID", "label value of everything this run creates (default: random)"),
    "reports_dir": ("GPUPOC_REPORTS_DIR", "where the acceptance record is written (default: reports/)"),
    "queue_model": ("GPUPOC_QUEUE_MODEL", "apply: put the reference queue model on the sim/kind before the suites "
                    "(default); keep: test the cluster's queues as they are"),
    "run_lock": ("GPUPOC_RUN_LOCK", f"NAMESPACE/NAME of the Lease that keeps runs on one cluster apart "
                 f"(default {DEFAULT_LOCK}), or 'off'"),
    "wait_lock": ("GPUPOC_WAIT_LOCK", "seconds to wait for another run's lock on the cluster (default 0: refuse at "
                  "once)"),
    "progress": ("GPUPOC_PROGRESS", "on (default): each case as it starts, and what a long wait waits for and "
                 "last saw; off: quiet (CI)"),
    "identity": ("GPUPOC_IDENTITY", "on the sim, who the suites run as: runner (default): the runner's own "
                 "ServiceAccount, bound to exactly the role `gpupoc rbac` generates, so a request outside it is "
                 "refused when made; admin: the sim's administrator (a cluster's identity is its kubeconfig's)"),
    "scale": ("GPUPOC_SCALE", "on: also run the scale suite (suites/scale: the profile's size, up to its cap per "
              "backend; the nightly does); off (default): the record shows it as not run"),
}
QUEUE_MODEL_CHOICES = ("apply", "keep")
IDENTITIES = ("runner", "admin")


@dataclass(frozen=True)
class RunConfig:
    kubeconfig: Path | None
    context: str | None
    prometheus_url: str | None
    profile: Profile
    backends: tuple[str, ...]
    allow_destructive: tuple[str, ...]
    run_id: str
    reports_dir: Path
    apply_queue_model: bool = True
    run_lock: tuple[str, str] | None = None  # (namespace, name) of the run lock's Lease; None: no lock
    wait_lock_s: float = 0.0
    progress: bool = True
    scale: bool = False  # the scale suite runs (else its cases are SKIP "not run")
    as_runner: bool = True  # on the sim: the suites run as the runner's ServiceAccount (targets/identity.py)

    @property
    def targets_sim(self) -> bool:
        return self.kubeconfig is None and not in_cluster()


SIM_CONTEXT, IN_CLUSTER_CONTEXT = "gpupoc-sim", "in-cluster"  # the names a target without a kubeconfig goes by


SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")  # a pod's token and CA


def in_cluster(directory: Path | None = None) -> bool:
    """Running in a pod: the API server's Service in the environment and the pod's ServiceAccount token mounted."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and ((directory or SERVICE_ACCOUNT_DIR) / "token").exists()


def _csv(value: str | None) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v.strip() for v in (value or "").split(",") if v.strip()))


def kubeconfig_contexts(path: Path) -> tuple[list[str], str | None]:
    """The contexts of a kubeconfig and its current one; a ConfigError when it cannot be read."""
    from kubernetes import config as kube_config  # the kubernetes client's import is slow: only when needed
    from kubernetes.config.config_exception import ConfigException
    try:
        contexts, current = kube_config.list_kube_config_contexts(config_file=str(path))
    except (ConfigException, OSError, ValueError, TypeError, AttributeError) as exc:  # not YAML of a kubeconfig
        why = str(exc).splitlines()[0][:200]
        raise ConfigError(f"kubeconfig {path}: cannot read it as a kubeconfig ({why})") from exc
    return [c["name"] for c in contexts], (current or {}).get("name")


def _run_lock(value: str, option: str) -> tuple[str, str] | None:
    if value == "off":
        return None
    namespace, _, name = value.partition("/")
    if not namespace or not name or "/" in name:
        raise ConfigError(f"{option} {value!r}: give NAMESPACE/NAME of a Lease (e.g. {DEFAULT_LOCK}), or 'off'")
    return namespace, name


def _seconds(option: str, value: str | None) -> float:
    try:
        seconds = float(value or 0)
    except ValueError:
        raise ConfigError(f"{option} {value!r}: give a number of seconds") from None
    if seconds < 0:
        raise ConfigError(f"{option} {value!r}: must be 0 or more seconds")
    return seconds


def resolve(options: dict[str, Any], environ: dict[str, str] | None = None) -> RunConfig:
    """Options (None when not given) over environment variables over defaults; validated."""
    env = os.environ if environ is None else environ
    raw = {name: options.get(name) or env.get(var) or None for name, (var, _) in OPTIONS.items()}
    given = {name: f"--{name.replace('_', '-')}" if options.get(name) else var for name, (var, _) in OPTIONS.items()}
    backends = _csv(raw["backends"]) or BACKENDS
    unknown = [b for b in backends if b not in BACKENDS]
    if unknown:
        raise ConfigError(f"{given['backends']}: unknown {', '.join(unknown)}; choose from {', '.join(BACKENDS)}")
    kubeconfig = Path(raw["kubeconfig"]).expanduser() if raw["kubeconfig"] else None
    if kubeconfig is not None and not kubeconfig.is_file():
        raise ConfigError(f"{given['kubeconfig']} {kubeconfig}: no such file")
    if raw["context"] and kubeconfig is None and not os.environ.get("KUBECONFIG"):
        raise ConfigError("--context needs --kubeconfig (or KUBECONFIG): the sim has a single context")
    if raw["context"] and kubeconfig is None:
        kubeconfig = Path(os.environ["KUBECONFIG"]).expanduser()
    if kubeconfig is not None:
        names, current = kubeconfig_contexts(kubeconfig)
        if (raw["context"] or current) not in names:
            which = given["context"] if raw["context"] else "the current context"
            raise ConfigError(f"{which} {raw['context'] or current!r} is not in kubeconfig {kubeconfig}; its contexts: "
                              f"{', '.join(names) or 'none'}")
    allowed = _csv(raw["allow_destructive"])
    under_test = ((raw["context"] or current) if kubeconfig is not None
                  else IN_CLUSTER_CONTEXT if in_cluster() else SIM_CONTEXT)
    if allowed and under_test not in allowed:
        raise ConfigError(f"{given['allow_destructive']} names {', '.join(allowed)}, but the context under test is "
                          f"{under_test}: name that context to allow destructive steps on it, or drop the option")
    if raw["prometheus_url"]:
        url = urlparse(raw["prometheus_url"])
        if url.scheme not in ("http", "https") or not url.netloc:
            raise ConfigError(f"{given['prometheus_url']} {raw['prometheus_url']!r}: give an http(s) URL, e.g. "
                              "http://prometheus.monitoring:9090")
    run_id = raw["run_id"] or uuid.uuid4().hex[:8]
    if not run_id.replace("-", "").isalnum() or len(run_id) > 40:
        raise ConfigError(f"{given['run_id']} {run_id!r}: letters, digits and '-' only, at most 40 characters")
    queue_model = raw["queue_model"] or "apply"
    if queue_model not in QUEUE_MODEL_CHOICES:
        raise ConfigError(f"{given['queue_model']} {queue_model!r}: choose from {', '.join(QUEUE_MODEL_CHOICES)}")
    shown = (raw["progress"] or "on").lower()
    if shown not in ("on", "off"):
        raise ConfigError(f"{given['progress']} {raw['progress']!r}: choose from on, off")
    scale = (raw["scale"] or "off").lower()
    if scale not in ("on", "off"):
        raise ConfigError(f"{given['scale']} {raw['scale']!r}: choose from on, off")
    identity = (raw["identity"] or "runner").lower()
    if identity not in IDENTITIES:
        raise ConfigError(f"{given['identity']} {raw['identity']!r}: choose from {', '.join(IDENTITIES)}")
    return RunConfig(
        progress=shown == "on", scale=scale == "on", as_runner=identity == "runner",
        run_lock=_run_lock(raw["run_lock"] or DEFAULT_LOCK, given["run_lock"]),
        wait_lock_s=_seconds(given["wait_lock"], raw["wait_lock"]),
        kubeconfig=kubeconfig, context=raw["context"], prometheus_url=raw["prometheus_url"],
        profile=load_profile(Path(raw["profile"]) if raw["profile"] else DEFAULT_SIM_PROFILE),
        backends=backends, allow_destructive=allowed, run_id=run_id,
        reports_dir=Path(raw["reports_dir"]) if raw["reports_dir"] else DEFAULT_REPORTS,
        apply_queue_model=queue_model == "apply")

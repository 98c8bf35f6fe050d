"""Where the sim keeps its binaries, build cache and runtime state: outside the repo."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SIM_RECIPES = REPO_ROOT / "sim"
VERSIONS_FILE = SIM_RECIPES / "versions.toml"


def gpupoc_home() -> Path:
    """Per-user cache root: $GPUPOC_HOME, else $XDG_CACHE_HOME/gpupoc, else ~/.cache/gpupoc."""
    explicit = os.environ.get("GPUPOC_HOME")
    if explicit:
        return Path(explicit).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "gpupoc"


def build_root() -> Path:
    """Binaries and wrapper modules; shared by every sim instance of this user.

    $GPUPOC_BUILD_HOME lets a second sim (another GPUPOC_HOME) reuse the same binaries.
    """
    explicit = os.environ.get("GPUPOC_BUILD_HOME")
    return Path(explicit).expanduser() if explicit else gpupoc_home()


def bin_dir() -> Path:
    return build_root() / "bin"


def wrapper_dir(component: str) -> Path:
    return build_root() / "src" / component


def state_dir() -> Path:
    """Runtime state of the running sim: pids, certificates, logs, data, kubeconfig."""
    return gpupoc_home() / "sim"


def kubeconfig_path() -> Path:
    return state_dir() / "kubeconfig"

"""Where a run's own files are (the checkout, or the installed package), and where the sim keeps its binaries,
build cache and runtime state: outside the repo."""

from __future__ import annotations

import os
from pathlib import Path

# The checkout's root; installed from the wheel, the site-packages folder that holds harness/ and suites/ side by
# side, so that `suites/...` names the same cases either way.
REPO_ROOT = Path(__file__).resolve().parents[2]
# A checkout (its pyproject.toml beside harness/), or gpupoc installed from its wheel (setup.py's bundled data).
IN_CHECKOUT = (REPO_ROOT / "pyproject.toml").is_file()
_DATA_ROOT = REPO_ROOT if IN_CHECKOUT else REPO_ROOT / "harness" / "bundled"
SUITES_DIR = REPO_ROOT / "suites"
EXPECTED_FILE = SUITES_DIR / "expected.yaml"
RELEASES_FILE = SUITES_DIR / "releases.yaml"  # later upstream releases known to change a verdict
PROFILES_DIR = _DATA_ROOT / "profiles"
MANIFESTS_DIR = _DATA_ROOT / "manifests"
SIM_RECIPES = REPO_ROOT / "sim"
VERSIONS_FILE = SIM_RECIPES / "versions.toml"


def reports_root() -> Path:
    """Where records go unless told: the checkout's reports/, or ./reports where an installed gpupoc runs."""
    return REPO_ROOT / "reports" if IN_CHECKOUT else Path.cwd() / "reports"


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

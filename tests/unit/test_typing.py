"""The harness stays strictly typed (mypy --strict on harness/)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from harness.core.paths import REPO_ROOT, build_root


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy not installed (pip install -e '.[test]')")
def test_mypy_strict_on_harness() -> None:
    # mypy's incremental cache beside the sim's builds, shared by every checkout: it checks each cached module against
    # its source's hash, so a fresh clone reuses what has not changed (54 s cold in make test, 2026-12-07)
    cache = build_root() / "mypy-cache" / f"{sys.version_info.major}.{sys.version_info.minor}"
    result = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(cache)], cwd=REPO_ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr

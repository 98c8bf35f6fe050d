"""The harness stays strictly typed (mypy --strict on harness/)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from harness.core.paths import REPO_ROOT


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy not installed (pip install -e '.[test]')")
def test_mypy_strict_on_harness() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr

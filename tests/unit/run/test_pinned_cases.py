"""A case pinned to one backend runs only when --backends names it (a side-by-side part without it skips nothing:
the case is not there)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness.core.paths import REPO_ROOT


def collected(reports: Path, *backends: str) -> str:
    return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "suites/inference/test_elasticity.py", f"--backends={','.join(backends)}",
                           f"--reports-dir={reports}"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120).stdout


def test_a_case_pinned_to_the_default_backend_is_deselected_when_it_is_not_chosen(tmp_path: Path) -> None:
    assert "test_autoscaling[default]" not in collected(tmp_path, "kueue")
    both = collected(tmp_path, "kueue", "default")
    assert "test_autoscaling[default]" in both and "test_elasticity[kueue]" in both

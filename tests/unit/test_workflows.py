"""The CI workflows are clean under actionlint (built from its Go module: `gpupoc sim build --with actionlint`)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from harness.core import paths

WORKFLOWS = sorted((paths.REPO_ROOT / ".github" / "workflows").glob("*.y*ml"))
ACTIONLINT = paths.bin_dir() / "actionlint"
TIMEOUT_S = 60


def test_there_is_a_nightly_workflow() -> None:
    assert [w.name for w in WORKFLOWS if w.stem == "nightly"] == ["nightly.yml"]


@pytest.mark.skipif(not ACTIONLINT.exists(),
                    reason=f"not checked: actionlint is not built ({ACTIONLINT} missing): run "
                           "`gpupoc sim build --with actionlint` (or `make build`)")
def test_workflows_are_clean_under_actionlint() -> None:
    # actionlint checks the run: scripts with shellcheck when one is on PATH; say which way this run went.
    shellcheck = shutil.which("shellcheck")
    result = subprocess.run([str(ACTIONLINT), "-no-color", *map(str, WORKFLOWS)], cwd=paths.REPO_ROOT,
                            capture_output=True, text=True, timeout=TIMEOUT_S)
    checked = f"{len(WORKFLOWS)} workflow(s), run: scripts {'with' if shellcheck else 'without'} shellcheck"
    assert result.returncode == 0, f"actionlint on {checked}:\n{result.stdout}{result.stderr}"

"""kind on this machine (kind/here.sh): a real kubeadm cluster in podman, on the node image built here, with Kueue
and Volcano installed by their own Helm charts in images built here. gpupoc runs a case against it as against any cluster (its
kubeconfig, the kind profile, the queue model kept as `gpupoc setup` made it), and `down` leaves the host's network,
rules, mounts and namespaces as `up` found them (here.sh compares them and fails otherwise).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.config.versions import load_pins
from harness.core.paths import REPO_ROOT, bin_dir, gpupoc_home
from tests.heavy import apart_for_inotify

HERE = REPO_ROOT / "kind" / "here.sh"
UP_TIMEOUT_S = 900  # a cold node image: mmdebstrap and the image imports (57 s warm, 2026-12-05)
RUN_TIMEOUT_S = 400
DOWN_TIMEOUT_S = 300


def kind_kubeconfig() -> Path:
    return gpupoc_home() / "kind" / "kubeconfig"


def gpupoc(*args: str, timeout: float = RUN_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=timeout)


def kubectl(*args: str) -> str:
    kubectl_bin = bin_dir() / "kubectl"  # the build root's: shared by make test's workers (GPUPOC_BUILD_HOME)
    out = subprocess.run([str(kubectl_bin), "--kubeconfig", str(kind_kubeconfig()), *args], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def here(command: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """kind/here.sh COMMAND in a session of its own: on a timeout the whole of it (kind, podman, helm) is killed."""
    with subprocess.Popen(["bash", str(HERE), command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            err += f"\nkind/here.sh {command}: killed after {timeout:g} s"
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.fixture(scope="module")
def kind_here() -> Iterator[Path]:
    with apart_for_inotify():
        try:
            up = here("up", UP_TIMEOUT_S)
            assert up.returncode == 0, up.stderr[-3000:]
            yield kind_kubeconfig()
        finally:
            down = here("down", DOWN_TIMEOUT_S)
            assert down.returncode == 0, down.stderr[-3000:]
            assert "as before up" in down.stderr, down.stderr[-3000:]


def images_in(namespace: str) -> set[str]:
    pods = json.loads(kubectl("-n", namespace, "get", "pods", "-o", "json"))["items"]
    return {s["image"] for p in pods for s in p["status"].get("containerStatuses", [])}


@pytest.mark.timeout(UP_TIMEOUT_S + 2 * RUN_TIMEOUT_S + DOWN_TIMEOUT_S)
def test_chart_installed_kueue_and_volcano_admit_and_hold_gangs_on_kind_in_images_built_here(
        kind_here: Path, tmp_path: Path) -> None:
    pins = load_pins()
    assert images_in("kueue-system") == {f"registry.k8s.io/kueue/kueue:{pins.kueue}"}
    assert images_in("volcano-system") == {f"docker.io/volcanosh/vc-{name}:{pins.volcano}"
                                           for name in ("scheduler", "controller-manager", "webhook-manager")}
    for namespace, deployment in (("kueue-system", "kueue-controller-manager"), ("volcano-system", "volcano-scheduler")):
        made = json.loads(kubectl("-n", namespace, "get", "deployment", deployment, "-o", "json"))["metadata"]
        assert made["labels"].get("app.kubernetes.io/managed-by") == "Helm", made

    setup = gpupoc("setup", "--kubeconfig", str(kind_here), "--profile", "profiles/kind.yaml",
                   "--backends", "kueue,volcano")
    assert setup.returncode == 0, setup.stdout[-2000:] + setup.stderr[-2000:]
    run = gpupoc("run", "--kubeconfig", str(kind_here), "--profile", "profiles/kind.yaml", "--backends", "kueue,volcano",
                 "--queue-model", "keep", "--reports-dir", str(tmp_path), "--progress", "off", "--",
                 "suites/training/test_gang_admission.py")
    assert "2 passed" in run.stdout, run.stdout[-3000:] + run.stderr[-2000:]
    record = json.loads(next(tmp_path.glob("*/record.json")).read_text())
    outcomes = {(r["criterion"], r["backend"], r["outcome"]) for r in record["results"]}
    assert outcomes == {("training.gang_admission", "kueue", "PASS"), ("training.gang_admission", "volcano", "PASS")}
    # a cluster gpupoc knows only by its kubeconfig, which says it is kind
    assert (record["target"]["kind"], record["target"]["providers"]) == ("kubeconfig", ["kind"]), record["target"]

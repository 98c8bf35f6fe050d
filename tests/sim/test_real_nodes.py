"""Real nodes (`gpupoc sim up --real-nodes N`): a pod really runs on a real kubelet (with a simulated GPU from the
sim's device plugin); the suites' cases run there with real containers (profiles/sim-real-nodes.yaml), one backend
per mechanism (the full real-node matrix is `make poc`'s); a platform's refusal ends a case with its reason; and
`sim down` leaves nothing.

One sim for the file, of its own (home, ports and network namespace apart from the worker's sim), like
test_lifecycle.py; its tests run in order (the last takes it down and looks for what is left).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config as kube_config

from harness.config.profile import load_profile
from harness.config.workloads import SAMPLE_ARGS
from harness.core.paths import REPO_ROOT, build_root
from harness.record.model import load_record
from harness.sim import netns, procs, realnode_teardown, realnodes
from tests.heavy import alone, on_a_cpu_of_its_own
from tests.pod_security import restricted

REAL_NODE_PROFILE = REPO_ROOT / "profiles" / "sim-real-nodes.yaml"
GPUS_PER_NODE = 4
PORT_BASE = 20000  # below the side-by-side parts' sims (21000-26000)
REAL_NODES = 2
READY_WITHIN_S = 60.0
POD_TIMEOUT_S = 90.0
LINE = "hello from a real container"
EXIT_CODE = 3


def gpupoc(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def real_node_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Up once for the file: 1 kwok node and 2 real nodes of 4 GPUs each (the real-node profile's shape), Kueue; its cases
    never beside the tests their load would move past a threshold (tests/heavy.py)."""
    env = {**os.environ, "GPUPOC_HOME": str(tmp_path_factory.mktemp("real-nodes")),
           "GPUPOC_BUILD_HOME": str(build_root()), "GPUPOC_SIM_PORT_BASE": str(PORT_BASE),
           "GPUPOC_SIM_SCHEDULERS": "kueue"}
    up = gpupoc(env, "sim", "up", "--nodes", "1", "--real-nodes", str(REAL_NODES), "--gpus-per-node",
                str(GPUS_PER_NODE))
    assert up.returncode == 0, up.stderr + up.stdout
    setup = gpupoc(env, "setup", f"--profile={REAL_NODE_PROFILE}")  # its tenants' namespaces, before a case runs
    assert setup.returncode == 0, setup.stderr + setup.stdout
    env["UP_OUTPUT"] = up.stdout
    yield env
    gpupoc(env, "sim", "down")


@pytest.fixture(autouse=True)
def not_beside_the_other_heavy_tests() -> Iterator[None]:
    with alone():
        yield


@pytest.fixture()
def a_cpu_of_its_own(real_node_sim: dict[str, str]) -> Iterator[None]:
    """The sample's core is its own among pods, not among host processes: those are held off it (tests/heavy.py)."""
    with on_a_cpu_of_its_own(real_node_sim["GPUPOC_HOME"]):
        yield


def core_of(env: dict[str, str]) -> client.CoreV1Api:
    kubeconfig = Path(env["GPUPOC_HOME"]) / "sim" / "kubeconfig"
    return client.CoreV1Api(kube_config.new_client_from_config(config_file=str(kubeconfig)))


Outcome = tuple[str, str, str, str]  # criterion, backend, outcome, message


def suites_on(env: dict[str, str], tmp_path: Path, run_id: str, *args: str,
              profile: Path = REAL_NODE_PROFILE) -> list[Outcome]:
    """Run cases on the real nodes; (criterion, backend, outcome, message) of each."""
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs", *args,
                             f"--profile={profile}", f"--run-id={run_id}", f"--reports-dir={tmp_path}"],
                            cwd=REPO_ROOT, env={k: v for k, v in env.items() if k != "UP_OUTPUT"},
                            capture_output=True, text=True, timeout=900)
    record = tmp_path / run_id / "record.json"
    assert record.exists(), result.stdout[-3000:] + result.stderr[-2000:]
    return [(r.criterion, r.backend, r.outcome, r.message) for r in load_record(record).results]


def busybox_pod(name: str) -> dict[str, object]:
    """Prints a line (and the GPU the device plugin gave it) and exits non-zero, on a real node only (they are tainted
    against the suites' kwok pods)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "restartPolicy": "Never", "nodeSelector": {realnodes.LABEL: "true"},
        "tolerations": [{"key": realnodes.LABEL, "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{"name": "main", "image": "gpupoc.local/trainer:1", "imagePullPolicy": "Never",
                        "command": ["sh", "-c", f"echo '{LINE}' on $NVIDIA_VISIBLE_DEVICES; exit {EXIT_CODE}"],
                        "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


def wait_terminated(core: client.CoreV1Api, name: str, namespace: str) -> client.V1Pod:
    deadline, last = time.monotonic() + POD_TIMEOUT_S, "not seen"
    while time.monotonic() < deadline:
        pod = core.read_namespaced_pod(name, namespace)
        statuses = pod.status.container_statuses or []
        if statuses and statuses[0].state.terminated is not None:
            return pod
        waiting = statuses[0].state.waiting if statuses else None
        last = f"phase={pod.status.phase}" + (f", waiting: {waiting.reason} {waiting.message}" if waiting else "")
        time.sleep(0.5)
    raise AssertionError(f"pod {namespace}/{name}: its container not terminated after {POD_TIMEOUT_S:.0f}s; "
                         f"last: {last}")


def test_a_pod_really_runs_on_a_real_node(real_node_sim: dict[str, str]) -> None:
    ready = re.search(r"real nodes\s+Ready after\s+([\d.]+)s", real_node_sim["UP_OUTPUT"])
    assert ready and float(ready.group(1)) < READY_WITHIN_S, real_node_sim["UP_OUTPUT"]
    core = core_of(real_node_sim)
    real = core.list_node(label_selector=f"{realnodes.LABEL}=true").items
    assert sorted(n.metadata.name for n in real) == [f"real-node-{i}" for i in range(REAL_NODES)]
    assert all(n.status.node_info.container_runtime_version.startswith("containerd://") for n in real)
    core.create_namespaced_pod("default", busybox_pod("hello"))
    pod = wait_terminated(core, "hello", "default")
    assert pod.spec.node_name.startswith(realnodes.NAME_PREFIX)
    assert pod.status.container_statuses[0].state.terminated.exit_code == EXIT_CODE
    log = core.read_namespaced_pod_log("hello", "default").strip()  # API server -> egress proxy -> kubelet
    assert re.fullmatch(rf"{LINE} on GPU-sim-{pod.spec.node_name}-\d", log), log  # the device plugin's Allocate
    assert all(n.metadata.labels.get("nvidia.com/gpu.product") for n in real)  # GFD labels, like the kwok nodes

    status = gpupoc(real_node_sim, "sim", "status")
    assert status.returncode == 0, status.stdout
    for i in range(REAL_NODES):
        assert re.search(rf"kubelet-real-node-{i} .* Kubernetes v1\.36", status.stdout), status.stdout
        assert re.search(rf"containerd-real-node-{i} .* containerd \S+ \+ runc \S+", status.stdout), status.stdout
        assert f"device-plugin-real-node-{i}" in status.stdout


def test_the_cases_run_with_real_containers_on_the_real_nodes(real_node_sim: dict[str, str], tmp_path: Path) -> None:
    """One backend per mechanism (kube-scheduler's designed gang FAIL on real nodes is `make poc`'s): gang admission
    passes on Kueue; failure recovery (a real exit 137, the Job controller's own backoff), cold start and rolling
    release (the kubelet's readiness probes, kube-proxy to real containers) pass on kube-scheduler; the serving pods
    meet Pod Security `restricted`, which their namespaces enforce."""
    with restricted_namespaces(real_node_sim):
        outcomes = suites_on(real_node_sim, tmp_path, "real-nodes", "--backends=default,kueue",
                             "suites/training/test_gang_admission.py",
                             "suites/training/test_failure_recovery.py::test_failure_recovery",
                             "suites/inference/test_cold_start.py", "suites/inference/test_rolling_release.py",
                             "-k", "gang_admission and kueue or not gang_admission and default")
    seen = {(c, b): (o, m) for c, b, o, m in outcomes}
    expected = {("training.gang_admission", "kueue"): "PASS", ("training.failure_recovery", "default"): "PASS",
                ("inference.cold_start", "default"): "PASS",
                ("inference.rolling_release", "default"): "PASS"}
    assert {k: o for k, (o, _) in seen.items()} == expected, seen
    record = load_record(tmp_path / "real-nodes" / "record.json")
    recovery = next(r for r in record.results if r.criterion == "training.failure_recovery")
    ended = next(rows for name, rows in recovery.evidence[0]["tables"].items() if "failed member" in name)
    assert ended[0]["exit code"] == 137 and "exiting with 137 as asked" in ended[0]["log (last lines)"], ended


def measured_twice(run: Callable[[str], list[Outcome]], expected: Callable[[list[Outcome]], bool]) -> list[Outcome]:
    """The sample's statistics on a 2-core host whose own processes may run on any core (a pinned core is the
    sample's alone among pods only): a run outside `expected` is run once more, and that second run is the one
    asserted (the first one's outcomes go into the assertion's message)."""
    first = run("first")
    return first if expected(first) else [*run("second"), *[(c, b, f"(first run: {o})", m) for c, b, o, m in first]]


# Quiet: the other workers' load on both cores moved the slowdown it measures to 1.0 (the sample's p50 alone 119 ms,
# beside the antagonist 117 ms, CI 2026-12-06) and the case passed; with the host's processes on the reserved CPU
# (tests/heavy.py) the sample shares the other one with the antagonist only.
@pytest.mark.usefixtures("a_cpu_of_its_own")
def test_the_isolation_boundary_fails_when_the_kubelet_does_not_isolate_cpus(real_node_sim: dict[str, str],
                                                                           tmp_path: Path) -> None:
    """The kubelets restarted with no CPU manager and no CFS quota: the sample's threads share their cores with the
    antagonist, which is held to no limit; the case FAILs with the slowdown it measured."""
    off = gpupoc(real_node_sim, "sim", "cpu-isolation", "off")
    assert off.returncode == 0, off.stderr + off.stdout
    try:
        outcomes = measured_twice(
            lambda run: suites_on(real_node_sim, tmp_path, f"no-isolation-{run}", "--backends=default",
                                  "suites/training/test_isolation_boundary.py"),
            lambda got: [o for _, _, o, _ in got] == ["FAIL"])
    finally:
        on = gpupoc(real_node_sim, "sim", "cpu-isolation", "on")
    assert on.returncode == 0, on.stderr + on.stdout
    (criterion, _, outcome, message) = outcomes[0]
    assert (criterion, outcome) == ("training.isolation_boundary", "FAIL"), outcomes
    measured = re.search(r"max_slowdown: ([\d.]+)x", message)
    assert measured and float(measured.group(1)) > 1.4, message


def test_step_stability_fails_when_the_checkpoints_do_not_survive_a_restart(real_node_sim: dict[str, str],
                                                                          tmp_path: Path) -> None:
    """The sample writes its checkpoints into its container's own /tmp, not its pod's volume: killed mid-run, the
    restarted container finds none, starts over and redoes every step it had made; the case FAILs with that count."""
    variant = tmp_path / "checkpoints-in-the-container.yaml"
    data = yaml.safe_load(REAL_NODE_PROFILE.read_text())
    data["workloads"]["sample"]["args"] = [*SAMPLE_ARGS, "--checkpoint-dir", "/tmp/checkpoints"]
    variant.write_text(yaml.safe_dump(data))
    outcomes = suites_on(real_node_sim, tmp_path, "lost-checkpoints", "--backends=default",
                         "suites/training/test_step_stability.py", profile=variant)
    [(criterion, _, outcome, message)] = outcomes
    assert (criterion, outcome) == ("training.step_stability", "FAIL"), outcomes
    redone = re.search(r"max_steps_redone: (\d+)", message)
    assert redone and int(redone.group(1)) > 50 and "found no checkpoint: started over" in message, message


def test_pods_refused_by_pod_security_end_the_case_with_the_refusal(real_node_sim: dict[str, str],
                                                                     tmp_path: Path) -> None:
    """A profile whose pods ask for no security context, in namespaces that enforce `restricted`: the API server
    refuses the ReplicaSet's and the Job's pods, and each case ends as an ERROR naming the refusal (no timeout)."""
    variant = tmp_path / "no-security-context.yaml"
    data = yaml.safe_load(REAL_NODE_PROFILE.read_text())
    data["workloads"]["pod_defaults"]["security"] = "none"
    variant.write_text(yaml.safe_dump(data))
    with restricted_namespaces(real_node_sim, serving_only=False):
        outcomes = suites_on(real_node_sim, tmp_path, "refused", "--backends=default",
                             "suites/inference/test_cold_start.py",
                             "suites/training/test_failure_recovery.py::test_failure_recovery", profile=variant)
    assert sorted((c, o, "could not create its pods" in m and "violates PodSecurity" in m, "not done after" in m)
                  for c, _, o, m in outcomes) == [("inference.cold_start", "ERROR", True, False),
                                                  ("training.failure_recovery", "ERROR", True, False)], outcomes


@pytest.mark.usefixtures("a_cpu_of_its_own")
def test_the_workload_sample_runs_resumes_and_is_isolated(real_node_sim: dict[str, str], tmp_path: Path) -> None:
    """The sample in real containers: on Kueue it is killed mid-run and resumes from its last checkpoint; on
    kube-scheduler it runs alone, then beside another tenant's antagonist, on a node whose kubelet gives it a core of
    its own (the static CPU manager): both PASS."""
    outcomes = measured_twice(
        lambda run: suites_on(real_node_sim, tmp_path, f"sample-{run}", "--backends=default,kueue",
                              "suites/training/test_step_stability.py", "suites/training/test_isolation_boundary.py",
                              "-k", "step_stability and kueue or isolation_boundary and default"),
        lambda got: sorted((c, b, o) for c, b, o, _ in got) == [("training.isolation_boundary", "default", "PASS"),
                                                                ("training.step_stability", "kueue", "PASS")])
    assert sorted((c, b, o) for c, b, o, _ in outcomes[:2]) == [
        ("training.isolation_boundary", "default", "PASS"), ("training.step_stability", "kueue", "PASS")], outcomes
    run_id = "sample-second" if len(outcomes) > 2 else "sample-first"
    record = load_record(tmp_path / run_id / "record.json")
    stability = next(r for r in record.results if r.criterion == "training.step_stability")
    runs = stability.evidence[0]["tables"]["the sample's runs (from its log's summary)"]
    assert runs[0]["resumed from step"] > 0 and runs[0]["CPU threads"] == 1, runs  # its own core, its checkpoint


def test_sim_down_leaves_nothing(real_node_sim: dict[str, str]) -> None:
    home = Path(real_node_sim["GPUPOC_HOME"])
    state = json.loads((home / "sim" / "state.json").read_text())
    down = gpupoc(real_node_sim, "sim", "down")
    assert down.returncode == 0, down.stderr + down.stdout
    assert not [n for n, c in state["components"].items() if procs.is_running(c["pid"], c["binary"])]
    assert not realnode_teardown.mounts_under(home) and not realnode_teardown.mounts_under(realnodes.NODES_ROOT)
    assert not Path(state["real_nodes"]["dir"]).exists()
    assert not [h for h in realnodes.cgroup_hierarchies() if (h / f"gpupoc-{PORT_BASE}").exists()]
    assert not [s for n in state["real_nodes"]["nodes"] for s in realnode_teardown.stray_shims(n["socket"])]
    assert not netns.exists(netns.name_for(PORT_BASE))


def restricted_namespaces(env: dict[str, str], serving_only: bool = True) -> contextlib.AbstractContextManager[None]:
    """The tenants' serving namespaces (and their training ones too: `serving_only=False`), which the fixture's
    `gpupoc setup` made, enforce Pod Security's `restricted` level meanwhile."""
    tenants = load_profile(REAL_NODE_PROFILE).tenants
    names = [t.inference_namespace for t in tenants] + ([] if serving_only else [t.namespace for t in tenants])
    return restricted(core_of(env), names)

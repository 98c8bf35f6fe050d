"""The harness core against the sim: detection, submit and track per backend, inventory, Prometheus, cleanup."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from harness import backends
from harness.backends import Backend
from harness.jobs.model import GangJob
from harness.backends.detect import missing_crd_reason
from harness.backends.kueue import API_VERSION as KUEUE_API_VERSION, WORKLOAD_KIND
from harness.cluster.manifests import MANAGED_LABEL, MANAGER
from harness.config.profile import Profile
from harness.cluster.prometheus import Prometheus
from harness.sim import cluster
from harness.core.paths import REPO_ROOT
from harness.targets.target import Target
from harness.jobs.kubernetes import Workloads, job_object
from tests.fixtures.interrupt import interruptible

# What each backend reaches on the sim (a RayJob completes through the sim's Ray dashboard stand-in).
FINAL_ON_SIM = "succeeded"  # every backend's job ends so on the sim (the kueue-volcano pair's too)


def test_detection_finds_the_sim_stack_and_says_why_a_backend_is_absent(target: Target) -> None:
    found = backends.detect(target, ("volcano", "kueue", "kuberay", "kai", "default"))
    kai = {"kai"} if cluster.component_running("kai-scheduler") else set()
    expected = {"volcano", "kueue", "kuberay", "default"} | kai
    assert {name for name, reason in found.items() if reason is None} == expected, found
    absent = missing_crd_reason(target.api, "example.invalid", "Thing", "slurm")
    assert absent is not None and "Thing (example.invalid) is not served" in absent
    assert "drop it from --backends" in absent


def test_a_gang_is_submitted_tracked_and_finishes(backend: Backend, workloads: Workloads,
                                                  queue_model: Profile) -> None:
    tenant = queue_model.tenant("team-a")
    job = GangJob(f"core-{backend.name}", tenant, pods=2, gpus_per_pod=1, run_for_s=2)
    workloads.submit(job)
    final = FINAL_ON_SIM
    jobs = workloads.jobs(tenant.namespace)
    done = jobs.wait_until(f"{backend.name} job {job.name} {final}",
                           lambda objs: (s := workloads.status_of(job, objs)) is not None and s.state == final,
                           timeout_s=queue_model.timeouts.complete,
                           failed=lambda objs: "failed" if (s := workloads.status_of(job, objs)) and
                           s.state == "failed" else None)
    obj = job_object(job, done)
    assert obj is not None and backend.status(obj).submitted_at is not None
    states = [t.state for t in workloads.timeline.transitions if t.kind == jobs.kind]
    assert states[-1] == final
    pods_seen = {t.name for t in workloads.timeline.transitions if t.kind == "Pod"}
    assert len(pods_seen) >= 2, workloads.timeline.as_rows()


def test_inventory_command_shows_the_gpus(sim_api: client.ApiClient) -> None:
    result = subprocess.run([sys.executable, "-m", "harness.cli", "inventory", "--probe-namespace=default"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "NVIDIA-H100-80GB-HBM3" in result.stdout and "550.90.07" in result.stdout
    assert "GPU node(s)" in result.stdout
    assert "driver probe skipped: every accelerator node is simulated" in result.stdout


def test_prometheus_answers_histogram_quantiles(prometheus: Prometheus) -> None:
    samples = prometheus.histogram_quantile(0.95, "apiserver_request_duration_seconds", by=("verb",))
    assert any(s.labels.get("verb") == "LIST" for s in samples)


def run_pytest(tmp_path: Path, body: str, *options: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    test_file = tmp_path / "test_probe.py"
    test_file.write_text(body)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "harness.plugin", "-q", "-rA", "-p",
                           "no:cacheprovider", str(test_file), *options], capture_output=True, text=True,
                          timeout=timeout, cwd=tmp_path)


def test_unreachable_prometheus_makes_only_its_tests_error(tmp_path: Path) -> None:
    result = run_pytest(tmp_path, "def test_needs_prometheus(prometheus):\n    pass\n"
                                  "def test_needs_only_the_api(api):\n    pass\n",
                        "--prometheus-url=http://127.0.0.1:9")
    assert result.returncode == 1
    assert "1 passed, 1 error" in result.stdout, result.stdout
    assert "Prometheus at http://127.0.0.1:9 did not answer" in result.stdout


def test_malformed_profile_stops_the_run_before_any_test(tmp_path: Path) -> None:
    profile = tmp_path / "bad.yaml"
    profile.write_text((REPO_ROOT / "profiles" / "sim.yaml").read_text().replace("weight: 3", "weight: -1", 1))
    result = run_pytest(tmp_path, "def test_x():\n    pass\n", f"--profile={profile}")
    assert result.returncode == 4
    assert "tenants[0].weight: must be greater than 0" in result.stderr


def test_bad_targets_fail_clearly_and_leave_nothing(tmp_path: Path, target: Target) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(f"""apiVersion: v1
kind: Config
current-context: nowhere
clusters: [{{name: nowhere, cluster: {{server: "https://127.0.0.1:9"}}}}]
users: [{{name: u, user: {{token: not-a-real-token}}}}]
contexts: [{{name: nowhere, context: {{cluster: nowhere, user: u}}}}]
""")
    unreachable = subprocess.run([sys.executable, "-m", "harness.cli", "inventory", f"--kubeconfig={kubeconfig}"],
                                 capture_output=True, text=True, timeout=120)
    assert unreachable.returncode == 1
    assert "API server https://127.0.0.1:9 (context nowhere) is unreachable" in unreachable.stderr
    assert "not-a-real-token" not in unreachable.stderr + unreachable.stdout
    no_context = subprocess.run([sys.executable, "-m", "harness.cli", "inventory", f"--kubeconfig={kubeconfig}",
                                 "--context=staging-9"], capture_output=True, text=True, timeout=120)
    assert no_context.returncode == 2
    assert "context 'staging-9' is not in kubeconfig" in no_context.stderr and "nowhere" in no_context.stderr


def test_destructive_steps_are_refused_on_a_context_not_allowed(tmp_path: Path, target: Target) -> None:
    """The sim under another context name stands in for a staging cluster."""
    from harness.sim import cluster
    staging = tmp_path / "staging.kubeconfig"
    config = yaml.safe_load(cluster.layout().kubeconfig.read_text())
    config["contexts"][0]["name"] = config["current-context"] = "staging-1"
    staging.write_text(yaml.safe_dump(config))
    body = "def test_fail_a_pod(destructive):\n    destructive('fail a pod')\n"
    refused = run_pytest(tmp_path, body, f"--kubeconfig={staging}")
    assert "1 skipped" in refused.stdout and "--allow-destructive staging-1" in refused.stdout, refused.stdout
    allowed = run_pytest(tmp_path, body, f"--kubeconfig={staging}", "--allow-destructive=staging-1")
    assert "1 passed" in allowed.stdout, allowed.stdout


def test_interrupted_run_still_cleans_up(tmp_path: Path, sim_api: client.ApiClient) -> None:
    import signal
    import time
    body = ("import time\n"
            "def test_slow(namespace):\n"
            "    open('ready', 'w').write(namespace)\n"
            "    time.sleep(120)\n")
    (tmp_path / "test_probe.py").write_text(body)
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "harness.plugin", "-q", "-p", "no:cacheprovider",
                             "--run-id=ctrlc-test", "test_probe.py"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, preexec_fn=interruptible)
    deadline = time.monotonic() + 120
    while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    namespace = (tmp_path / "ready").read_text()
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    core = client.CoreV1Api(sim_api)
    left = core.list_namespace(label_selector="gpupoc.io/run-id=ctrlc-test").items
    assert [n.metadata.name for n in left if n.status.phase != "Terminating"] == [], namespace


def test_clean_sweeps_what_a_run_left(sim_api: client.ApiClient, queue_model: Profile) -> None:
    from harness.cluster.apply import apply_objects
    from harness.cluster.manifests import dressed, labelled
    tenant = queue_model.tenant("team-b")
    apply_objects(sim_api, dressed(labelled(backends.ALL["default"].manifests(
        GangJob("left-behind", tenant, 1, 1, run_for_s=600)), "sweep-test"), queue_model.workloads))
    result = subprocess.run([sys.executable, "-m", "harness.cli", "clean", "--run-id=sweep-test"],
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"deleted Job {tenant.namespace}/left-behind" in result.stdout
    batch = client.BatchV1Api(sim_api)
    assert batch.list_namespaced_job(tenant.namespace, label_selector="gpupoc.io/run-id=sweep-test").items == []
    assert client.CoreV1Api(sim_api).list_namespace(label_selector="kubernetes.io/metadata.name=poc-team-b").items


def test_setup_replaces_our_priority_class_whose_value_changed(sim_api: client.ApiClient, queue_model: Profile) -> None:
    """A PriorityClass's value is immutable: an older reference model (gpupoc-low at 100) is replaced."""
    scheduling = client.SchedulingV1Api(sim_api)
    scheduling.delete_priority_class("gpupoc-low")
    scheduling.create_priority_class({"metadata": {"name": "gpupoc-low", "labels": {MANAGED_LABEL: MANAGER}},
                                      "value": 100, "preemptionPolicy": "Never"})
    result = subprocess.run([sys.executable, "-m", "harness.cli", "setup"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PriorityClass gpupoc-low (100 -> 50)" in result.stdout
    assert scheduling.read_priority_class("gpupoc-low").value == 50


def test_a_kai_job_whose_pod_kai_reclaimed_has_failed_and_says_who_took_it(sim_api: client.ApiClient,
                                                                          queue_model: Profile) -> None:
    """KAI evicts by deleting the pod, and a bare pod is not recreated: the job is lost, not stuck admitted."""
    if not cluster.component_running("kai-scheduler"):
        pytest.skip("the sim runs without KAI-Scheduler (GPUPOC_SIM_SCHEDULERS)")
    # team-a may hold the whole cluster (limit_gpus 32, quota 24); team-b then claims a node within its quota
    team_a, team_b = queue_model.tenant("team-a"), queue_model.tenant("team-b")
    tracked = Workloads(sim_api, backends.ALL["kai"], "kai-reclaim", "test_kai_reclaim", queue_model.timeouts.delete,
                        workload_spec=queue_model.workloads)
    per_node = queue_model.gpu.per_node
    nodes = tracked.capacity_nodes(queue_model.gpu.resource, per_node)
    try:
        for i in range(nodes):  # team-a takes every GPU, beyond its quota
            tracked.submit(GangJob(f"over-{i}", team_a, pods=1, gpus_per_pod=per_node, run_for_s=600))
        over = tracked.jobs(team_a.namespace)
        states = lambda objs: [tracked.job_status(o) for o in objs.values()]  # noqa: E731
        over.wait_until("team-a runs on every GPU", lambda objs: [s.state for s in states(objs)] == ["running"] * nodes,
                        timeout_s=queue_model.timeouts.admit)
        tracked.submit(GangJob("claim", team_b, pods=1, gpus_per_pod=per_node, run_for_s=600))  # within team-b's
        done = over.wait_until("KAI reclaims one team-a job", lambda objs: any(s.state == "failed" for s in states(objs)),
                               timeout_s=queue_model.timeouts.admit)
        [lost] = [s for s in states(done) if s.state == "failed"]
        assert "evicted: PreemptionByScheduler: " in lost.reason and "by workload poc-team-b/claim" in lost.reason
        tracked.pods(team_a.namespace).wait_until("the evicted pod is gone", lambda objs: len(objs) == nodes - 1,
                                                  timeout_s=queue_model.timeouts.delete)
        assert [s.state for s in states(over.objects)].count("failed") == 1  # lost, not back to "admitted"
    finally:
        assert tracked.close() == []


@pytest.mark.parametrize("name", ["kueue", "kuberay"])
def test_teardown_waits_until_the_kueue_workloads_of_its_jobs_are_gone(sim_api: client.ApiClient,
                                                                       queue_model: Profile, name: str) -> None:
    """A Workload outlives its job for a moment; the next test must not find it. The job asks for more GPUs
    than the sim has, so it stays queued with no pod whose deletion teardown could wait for instead."""
    tenant = queue_model.tenant("team-a")
    tracked = Workloads(sim_api, backends.ALL[name], "wl-teardown", f"test_wl_teardown_{name}",
                        queue_model.timeouts.delete, workload_spec=queue_model.workloads)
    per_node = queue_model.gpu.per_node
    nodes = tracked.capacity_nodes(queue_model.gpu.resource, per_node)
    job = GangJob(f"teardown-{name}", tenant, pods=nodes + 1, gpus_per_pod=per_node,
                  run_for_s=600)
    tracked.submit(job)
    owned = tracked.owned(tenant.namespace)
    assert owned is not None
    queued = owned.wait_until(
        f"a Workload queues {job.name}", lambda objs: job_object(job, objs) is not None,
        timeout_s=queue_model.timeouts.admit)
    workload = job_object(job, queued)
    assert workload is not None
    assert tracked.close() == []
    uid_label = WORKLOAD_KIND.job_uid_label
    left = DynamicClient(sim_api).resources.get(api_version=KUEUE_API_VERSION, kind="Workload").get(
        namespace=tenant.namespace, label_selector=f"{uid_label}={workload['metadata']['labels'][uid_label]}")
    assert [w.metadata.name for w in left.items] == []

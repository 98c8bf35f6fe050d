"""Pure state readers of every backend, on objects recorded from the sim (tests/fixtures/record.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import backends
from harness.backends import kai
from harness.cluster.manifests import dressed
from harness.jobs.model import GangJob
from harness.jobs.service import ModelService
from harness.config.profile import load_profile
from harness.core.paths import REPO_ROOT
from harness.targets.target import SIM_FEATURES

RECORDED = Path(__file__).parents[2] / "fixtures" / "recorded"


def recorded(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((RECORDED / f"{name}.yaml").read_text())
    return data


@pytest.mark.parametrize("backend_name, state", [
    ("default", "running"), ("default", "succeeded"),
    ("kueue", "queued"), ("kueue", "running"), ("kueue", "succeeded"),
    ("volcano", "queued"), ("volcano", "running"), ("volcano", "succeeded"),
    ("kuberay", "queued"), ("kuberay", "running"),
    ("kai", "queued"), ("kai", "admitted"),
])
def test_recorded_object_reads_as_its_state(backend_name: str, state: str) -> None:
    status = backends.ALL[backend_name].status(recorded(f"{backend_name}-{state}"))
    assert status.state == state
    assert status.submitted_at is not None


def test_kueue_queued_says_why_and_admission_time_comes_from_the_server() -> None:
    queued = backends.ALL["kueue"].status(recorded("kueue-queued"))
    assert "nvidia.com/gpu" in queued.reason
    running = backends.ALL["kueue"].status(recorded("kueue-running"))
    assert running.admitted_at is not None and running.submitted_at is not None
    assert running.admitted_at >= running.submitted_at


def test_kueue_preempted_workload_reads_as_preempted() -> None:
    obj = recorded("kueue-running")
    obj["status"]["conditions"] = [
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "lastTransitionTime": "2026-01-01T00:00:05Z"},
        {"type": "Admitted", "status": "False", "reason": "NoReservation", "lastTransitionTime": "2026-01-01T00:00:05Z"},
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "Preempted to accommodate a workload",
         "lastTransitionTime": "2026-01-01T00:00:05Z"}]
    status = backends.ALL["kueue"].status(obj)
    assert status.state == "preempted" and "Preempted" in status.reason


def test_volcano_aborted_job_reads_as_failed_with_its_phase() -> None:
    obj = recorded("volcano-running")
    obj["status"]["state"] = {"phase": "Aborted", "reason": "PodFailed", "lastTransitionTime": "2026-01-01T00:00:05Z"}
    status = backends.ALL["volcano"].status(obj)
    assert status.state == "failed" and status.reason.startswith("Aborted")


@pytest.fixture(scope="module")
def team() -> Any:
    return load_profile(REPO_ROOT / "profiles" / "sim.yaml").tenant("team-a")


def test_manifests_put_the_gang_in_the_tenants_queue(team: Any) -> None:
    job = GangJob("g", team, pods=4, gpus_per_pod=8, priority_class="gpupoc-high", max_retries=2)
    [volcano] = backends.ALL["volcano"].manifests(job)
    assert (volcano["spec"]["minAvailable"], volcano["spec"]["queue"], volcano["spec"]["schedulerName"]) == \
        (4, "team-a", "volcano")
    assert volcano["spec"]["priorityClassName"] == "gpupoc-high"
    assert {"event": "PodFailed", "action": "RestartJob"} in volcano["spec"]["policies"]
    [kueue] = backends.ALL["kueue"].manifests(job)
    assert kueue["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert (kueue["spec"]["parallelism"], kueue["spec"]["completions"], kueue["spec"]["backoffLimit"]) == (4, 4, 2)
    [default] = backends.ALL["default"].manifests(job)
    assert "kueue.x-k8s.io/queue-name" not in default["metadata"]["labels"]
    [ray] = backends.ALL["kuberay"].manifests(job)
    assert ray["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] == 3
    group, *pods = backends.ALL["kai"].manifests(job)
    assert (group["kind"], group["spec"]["minMember"], group["spec"]["queue"], group["spec"]["priorityClassName"]) \
        == ("PodGroup", 4, "team-a", "gpupoc-high")
    assert [p["metadata"]["name"] for p in pods] == ["g-0", "g-1", "g-2", "g-3"]
    assert all(p["spec"]["schedulerName"] == "kai-scheduler" and p["metadata"]["annotations"]["pod-group-name"] == "g"
               and p["metadata"]["labels"]["kai.scheduler/queue"] == "team-a" for p in pods)


def test_no_recovery_policy_aborts_the_volcano_job(team: Any) -> None:
    [volcano] = backends.ALL["volcano"].manifests(GangJob("g", team, 2, 1, restart_on_failure=False))
    assert {"event": "PodFailed", "action": "AbortJob"} in volcano["spec"]["policies"]


def test_kai_queued_podgroup_says_why_and_start_time_comes_from_kai() -> None:
    queued = backends.ALL["kai"].status(recorded("kai-queued"))
    assert "required for gang scheduling" in queued.reason
    admitted = backends.ALL["kai"].status(recorded("kai-admitted"))
    assert admitted.admitted_at is not None and admitted.submitted_at is not None


def test_kai_job_state_folds_its_pods() -> None:
    group = backends.ALL["kai"].status(recorded("kai-admitted"))
    pods = list(yaml.safe_load_all((RECORDED / "kai-pods-succeeded.yaml").read_text()))
    done = kai.job_status(group, pods, members=2)
    assert done.state == "succeeded" and done.finished_at is not None
    assert kai.job_status(group, pods[:1], members=2).state == "running"  # one member still to finish
    failed = [pods[0], {**pods[1], "status": {**pods[1]["status"], "phase": "Failed"}}]
    result = kai.job_status(group, failed, members=2)
    assert result.state == "failed" and "rec-kai-1" in result.reason
    assert kai.job_status(group, [], members=2) == group


def test_a_kai_job_whose_pod_kai_evicted_has_failed_and_says_who_took_it() -> None:
    group = backends.ALL["kai"].status(recorded("kai-admitted"))
    evicted = recorded("kai-pod-evicted")  # the DELETED event: bare pods are not recreated
    result = kai.job_status(group, [evicted], members=1)
    assert result.state == "failed"
    assert "rb-2-0 evicted: PreemptionByScheduler: Pod poc-team-b/rb-2-0 was preempted by workload" in result.reason
    assert "\n" not in result.reason  # KAI's per-queue usage lines stay in the pod's condition
    finished = {**evicted, "status": {**evicted["status"], "phase": "Succeeded"}}
    assert kai.job_status(group, [finished], members=1).state == "succeeded"  # deleted after it finished


def test_kuberay_serves_a_model_through_a_ray_service_of_gpu_workers(team: Any) -> None:
    """The head keeps the dashboard and stays out of the serve Service; each GPU worker is a Serve replica of the
    profile's application, put in with Ray's image when dressed for a real cluster (no sim annotation left)."""
    kind = load_profile(REPO_ROOT / "profiles" / "kind.yaml")
    service = ModelService("llm-load", team, replicas=2, server={"ttft": "40ms"})
    ray = backends.ALL["kuberay"]
    [rayservice] = dressed(ray.serving_manifests(service), kind.workloads)
    assert ray.serving_route(service) == ("llm-load-stable-serve-svc", 8000, "serve")
    spec = rayservice["spec"]
    assert rayservice["kind"] == "RayService" and spec["excludeHeadPodFromServeSvc"] is True
    [app] = yaml.safe_load(spec["serveConfigV2"])["applications"]
    assert app["import_path"] == kind.workloads.ray_serve_app and app["route_prefix"] == "/"
    head = spec["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert {p["name"] for p in head["ports"]} >= {"dashboard", "serve"} and "nvidia.com/gpu" not in head["resources"]
    [group] = spec["rayClusterConfig"]["workerGroupSpecs"]
    assert group["replicas"] == group["minReplicas"] == group["maxReplicas"] == 2
    worker = group["template"]
    assert worker["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert worker["spec"]["containers"][0]["image"] == kind.workloads.ray_image
    assert worker["metadata"]["labels"]["gpupoc.io/app"] == "llm-load"
    assert not any(k.startswith("sim.gpupoc.io/") for k in worker["metadata"].get("annotations") or {})


def test_kuberay_resizes_an_elastic_ray_cluster_and_the_others_say_why_not(team: Any) -> None:
    """Kueue's elastic job: the annotation, and every pod behind its scheduling gate until its slice is admitted;
    the worker group may grow to the most asked; dressed for a real cluster, Ray's image and no sim annotation."""
    kind = load_profile(REPO_ROOT / "profiles" / "kind.yaml")
    elastic = backends.ALL["kuberay"].elastic(GangJob("r", team, pods=2, gpus_per_pod=1), max_workers=3)
    [cluster] = dressed(elastic.manifests, kind.workloads)
    assert cluster["kind"] == "RayCluster"
    assert cluster["metadata"]["annotations"] == {"kueue.x-k8s.io/elastic-job": "true"}
    assert cluster["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    [group] = cluster["spec"]["workerGroupSpecs"]
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (1, 1, 3)
    for template in (cluster["spec"]["headGroupSpec"]["template"], group["template"]):
        assert template["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/elastic-job"}]
        assert template["spec"]["containers"][0]["image"] == kind.workloads.ray_image
        assert not any(k.startswith("sim.gpupoc.io/") for k in template["metadata"].get("annotations") or {})
    assert elastic.is_worker({"metadata": {"labels": {"ray.io/node-type": "worker"}}})
    assert not elastic.is_worker({"metadata": {"labels": {"ray.io/node-type": "head"}}})
    for name in ("default", "kueue", "volcano", "kai", "slurm"):
        assert "not built" in (backends.ALL[name].lacks("elastic workers", SIM_FEATURES) or "")
    assert backends.ALL["kuberay"].lacks("elastic workers", SIM_FEATURES) is None


def test_kueue_in_front_of_volcano_queues_the_job_and_names_volcano_for_its_gang(team: Any) -> None:
    """Kueue's batch Job (its LocalQueue), Volcano's scheduler for the pods, and the gang's size where Volcano's
    pod-group controller reads it (the Job's group-min-member annotation); the others lack the pair's case."""
    pair = backends.ALL["kueue-volcano"]
    [job] = pair.manifests(GangJob("g", team, pods=2, gpus_per_pod=8))
    assert (job["kind"], job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]) == ("Job", "team-a")
    assert job["metadata"]["annotations"] == {"scheduling.volcano.sh/group-min-member": "2"}
    assert job["spec"]["template"]["spec"]["schedulerName"] == "volcano"
    assert pair.sim_schedulers == ("kueue", "volcano") and pair.lacks("combined schedulers", SIM_FEATURES) is None
    assert backends.ALL["kueue"].lacks("combined schedulers", SIM_FEATURES) is None  # Kueue before kube-scheduler
    assert all(backends.ALL[n].lacks("combined schedulers", SIM_FEATURES) for n in backends.ALL
               if n not in ("kueue-volcano", "kueue"))


def test_kube_schedulers_own_gang_is_a_pod_group_its_jobs_pods_name(team: Any) -> None:
    """kube-gang: the Workload API's PodGroup (gang of all the job's pods) before the plain batch Job, whose pods
    name it; measured only where a gang decides, the rest being default's."""
    gang = backends.ALL["kube-gang"]
    group, job = gang.manifests(GangJob("g", team, pods=4, gpus_per_pod=8, priority_class="gpupoc-high"))
    assert (group["apiVersion"], group["kind"], group["metadata"]["name"]) == ("scheduling.k8s.io/v1alpha2",
                                                                                "PodGroup", "g")
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}
    assert (job["kind"], job["spec"]["template"]["spec"]["schedulingGroup"]) == ("Job", {"podGroupName": "g"})
    assert gang.status(recorded("default-running")).state == "running"  # read as default's Job
    assert gang.sim_schedulers == () and gang.lacks("gang admission", SIM_FEATURES) is None
    assert "training.gang_admission" in gang.criteria and "inference.latency" not in gang.criteria
    assert not backends.ALL["default"].criteria  # every other backend: every criterion


def test_a_kueue_workload_reserves_its_admissions_gpus_in_its_cluster_queue_and_its_pod_sets_before() -> None:
    """What Kueue's usage metric counts: the admission's resource usage; with no admission, what it requests."""
    from harness.backends.kueue import workload_reservation
    assert workload_reservation(recorded("kueue-running"), "nvidia.com/gpu") == ("team-a", 2.0)
    queue, gpus = workload_reservation(recorded("kueue-queued"), "nvidia.com/gpu")
    assert (queue, gpus) == ("", 64.0)
    assert workload_reservation(recorded("kueue-running"), "amd.com/gpu") == ("team-a", 0.0)


@pytest.mark.parametrize("backend_name", ["kueue", "volcano", "kai", "default"])
def test_a_served_models_replica_is_charged_to_the_queue_its_pod_names(team: Any, backend_name: str) -> None:
    """Cost per queue: a replica is no job, so its queue is read from the pod serving_pod made (none on default)."""
    backend = backends.ALL[backend_name]
    shape = backend.serving_pod(team)
    pod = {"metadata": {"labels": shape.get("labels", {}), "annotations": shape.get("annotations", {})}}
    assert backend.queue_named_on(pod) == ("" if backend_name == "default" else team.queues[backend_name])

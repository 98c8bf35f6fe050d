"""One queue over clusters on recorded objects: GPU-seconds from a Job's status, jobs seen on two workers at once,
the GPU-hours error per tenant; what the harness creates on the manager and on a worker, and when the manager's
Kueue has read it."""

import base64

import yaml

from harness.config.profile import Tenant
from harness.criteria.operations.multicluster import job_gpu_seconds, relative_error, run_twice, seconds_between
from harness.setup.multicluster import QUEUE, kubeconfig, manager_objects, tenant_on_queue, unseen, worker_objects

TENANTS = [Tenant("team-a", "team-a", "team-a-submitter", 3, 16, {"kueue": "team-a"}),
           Tenant("team-b", "team-b", "team-b-submitter", 1, 16, {"kueue": "team-b"})]


def test_gpu_seconds_come_from_the_jobs_start_and_completion() -> None:
    job = {"status": {"startTime": "2026-12-04T10:00:00Z", "completionTime": "2026-12-04T10:00:31Z"}}
    assert job_gpu_seconds(job, 8) == 248.0
    assert job_gpu_seconds({"status": {"startTime": "2026-12-04T10:00:00Z"}}, 8) is None  # still running
    assert seconds_between(None, "2026-12-04T10:00:00Z") is None


def test_a_job_is_run_twice_only_when_one_sample_sees_it_on_two_workers() -> None:
    samples = [{"a": {"worker-1"}, "b": set()}, {"a": {"worker-2"}, "b": {"worker-1", "worker-2"}}]
    assert run_twice(samples) == {"b"}  # a moved from one worker to the other: not twice


def test_gpu_hours_error_is_the_worst_tenants_relative_difference() -> None:
    assert relative_error({"team-a": 1.0, "team-b": 0.5}, {"team-a": 1.0, "team-b": 0.4}) == 0.2
    assert relative_error({"team-a": 1.0}, {}) == 1.0  # the clusters read nothing of it
    assert relative_error({}, {}) == 0.0


def test_the_manager_dispatches_through_one_checked_queue_holding_the_workers_gpus() -> None:
    workers = [{"name": "worker-1", "gpus": 16, "kubeconfig": "k1"},
               {"name": "worker-2", "gpus": 16, "kubeconfig": "k2"}]
    objects = manager_objects(TENANTS, workers, "nvidia.com/gpu")
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert {("MultiKueueCluster", "worker-1"), ("MultiKueueCluster", "worker-2"), ("MultiKueueConfig", QUEUE),
            ("AdmissionCheck", QUEUE), ("ClusterQueue", QUEUE), ("Secret", f"{QUEUE}-worker-1")} <= kinds
    check = next(o for o in objects if o["kind"] == "AdmissionCheck")
    assert check["spec"]["controllerName"] == "kueue.x-k8s.io/multikueue"
    queue = next(o for o in objects if o["kind"] == "ClusterQueue")
    assert queue["spec"]["admissionChecksStrategy"]["admissionChecks"] == [{"name": QUEUE}]
    gpus = queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]
    assert gpus == {"name": "nvidia.com/gpu", "nominalQuota": 32}  # one resource view: the workers' together
    assert {o["metadata"]["namespace"] for o in objects if o["kind"] == "LocalQueue"} == {"team-a", "team-b"}
    secret = next(o for o in objects if o["kind"] == "Secret")
    assert secret["metadata"]["namespace"] == "kueue-system" and secret["stringData"] == {"kubeconfig": "k1"}


def test_a_worker_has_the_same_queue_name_and_the_managers_identity_with_kueues_listed_rights() -> None:
    objects = worker_objects(TENANTS, 16, "nvidia.com/gpu")
    assert {o["metadata"]["namespace"] for o in objects if o["kind"] == "LocalQueue"} == {"team-a", "team-b"}
    assert all(o["metadata"]["name"] == QUEUE for o in objects if o["kind"] in ("LocalQueue", "ClusterQueue"))
    role = next(o for o in objects if o["kind"] == "ClusterRole")
    rights = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert ("batch", "jobs") in rights and ("kueue.x-k8s.io", "workloads/status") in rights
    assert all(o["metadata"].get("labels") is None for o in objects
               if o["kind"] == "Namespace" and o["metadata"]["name"].startswith("team-"))  # not ours to delete


def test_the_kubeconfig_carries_its_ca_as_data_unless_asked_to_name_a_path() -> None:
    config = yaml.safe_load(kubeconfig("worker-1", "https://127.0.0.1:20443", "tok", b"PEM"))
    cluster = config["clusters"][0]["cluster"]
    assert cluster == {"server": "https://127.0.0.1:20443",
                       "certificate-authority-data": base64.b64encode(b"PEM").decode()}
    assert config["users"][0]["user"] == {"token": "tok"}
    by_path = yaml.safe_load(kubeconfig("worker-1", "https://127.0.0.1:20443", "tok", b"PEM", "/ca.crt"))
    assert by_path["clusters"][0]["cluster"]["certificate-authority"] == "/ca.crt"


def test_a_tenant_on_the_shared_queue_keeps_everything_but_its_kueue_queue() -> None:
    moved = tenant_on_queue(TENANTS[0])
    assert moved.queues == {"kueue": QUEUE} and moved.namespace == "team-a" and moved.weight == 3


def _queue(kind: str, name: str, reason: str | None, namespace: str = "") -> dict:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    status = {"conditions": [{"type": "Active", "status": "False", "reason": reason}]} if reason else {}
    return {"kind": kind, "metadata": meta, "status": status}


def test_the_shared_queue_is_read_once_each_object_has_an_active_condition_naming_a_known_check() -> None:
    read = [_queue("AdmissionCheck", QUEUE, "Inactive"), _queue("ClusterQueue", QUEUE, "AdmissionCheckInactive"),
            _queue("LocalQueue", QUEUE, "Ready", "team-a")]
    assert unseen(read, 3) == []  # inactive (a worker unreachable) is read: the case measures that
    assert unseen(read, 4) == ["1 not listed yet"]
    not_yet = [_queue("AdmissionCheck", QUEUE, None), _queue("ClusterQueue", QUEUE, "AdmissionCheckNotFound"),
               _queue("LocalQueue", QUEUE, None, "team-a")]
    assert unseen(not_yet, 3) == [f"AdmissionCheck {QUEUE}", f"ClusterQueue {QUEUE} (AdmissionCheckNotFound)",
                                  f"LocalQueue team-a/{QUEUE}"]

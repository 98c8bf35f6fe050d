"""Schedulers combined on recorded objects: binds against admission in whole server seconds, the wait from
admission to placement, and who owned the job."""

from harness.criteria.operations.combined import bound_before, owners, unplaced_s


def test_a_bind_in_the_same_second_as_its_admission_is_not_before_it() -> None:
    assert bound_before(100.0, [100.0, 101.0, None]) == 0
    assert bound_before(101.0, [100.0, 101.0]) == 1  # an earlier second: bound before its admission
    assert bound_before(None, [100.0, None, 102.0]) == 2  # never admitted: every bound pod counts


def test_admitted_to_placed_runs_to_the_end_for_a_job_never_placed_whole() -> None:
    assert unplaced_s(100.0, [101.0, 103.0], 2, 200.0) == 3.0
    assert unplaced_s(100.0, [101.0, None], 2, 130.0) == 30.0
    assert unplaced_s(None, [101.0], 1, 130.0) is None


def test_owners_are_read_from_the_workload_and_the_pods() -> None:
    workload = {"metadata": {"name": "job-x-1a2b3"}, "spec": {"queueName": "team-a"},
                "status": {"admission": {"clusterQueue": "team-a"},
                           "conditions": [{"type": "Admitted", "status": "True"}]}}
    pod = {"metadata": {"annotations": {"scheduling.k8s.io/group-name": "podgroup-77"},
                        "ownerReferences": [{"kind": "Job", "name": "job-x", "controller": True}]},
           "spec": {"schedulerName": "volcano"}}
    assert owners(workload, [pod]) == {
        "queue": "Kueue LocalQueue team-a -> ClusterQueue team-a",
        "admission": "Kueue: Workload job-x-1a2b3 (Admitted)", "placement": "volcano (PodGroup podgroup-77)", "lifecycle": "Job job-x"}
    assert owners(None, [])["admission"].startswith("none: no Workload")

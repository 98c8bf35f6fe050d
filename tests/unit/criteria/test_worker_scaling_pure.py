"""Worker scaling on recorded pods: each worker's state as the record tells it, and their tally."""

from harness.criteria.training.worker_scaling import pod_state, tally


def pod(gates: bool = False, phase: str = "Pending", ready: bool = False, going: bool = False) -> dict:
    return {"metadata": {"deletionTimestamp": "2026-12-04T00:00:00Z"} if going else {},
            "spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/elastic-job"}]} if gates else {},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_a_workers_state_reads_going_then_gated_then_ready() -> None:
    assert pod_state(pod(going=True, ready=True)) == "going"
    assert pod_state(pod(gates=True)) == "gated"
    assert pod_state(pod(phase="Running", ready=True)) == "ready"
    assert pod_state(pod(phase="Running")) == "running"
    assert pod_state(pod()) == "pending"


def test_the_tally_is_in_a_fixed_order() -> None:
    assert tally(["gated", "ready", "ready", "going"]) == "2 ready, 1 gated, 1 going"
    assert tally([]) == "none"

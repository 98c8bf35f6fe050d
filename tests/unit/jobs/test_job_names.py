"""Job names: a case run again (its verdict undecided) names its jobs afresh, so no name is reused while the first
run's jobs may still sit in a controller's cache (Volcano's wedged a new job of a deleted one's name)."""

from __future__ import annotations

from harness.jobs.kubernetes import Workloads


def workloads(run_id: str, test: str) -> Workloads:
    return Workloads(api=None, backend=None, run_id=run_id, test=test, delete_timeout_s=1.0)  # type: ignore[arg-type]


def test_a_case_run_again_names_its_jobs_afresh_and_the_first_run_keeps_its_names() -> None:
    first = workloads("run-names-1", "suites/x.py::test_a[volcano]")
    again = workloads("run-names-1", "suites/x.py::test_a[volcano]")
    other = workloads("run-names-1", "suites/x.py::test_b[volcano]")
    assert first.job_name("fair-team-a-0") != again.job_name("fair-team-a-0")
    assert first.job_name("fair-team-a-0") != other.job_name("fair-team-a-0")
    assert first.job_name("fair-team-a-0") == first.job_name("fair-team-a-0")
    assert first.job_name("fair-team-a-0").startswith("fair-team-a-0-")
    assert len(first.job_name("x")) == len(again.job_name("x"))

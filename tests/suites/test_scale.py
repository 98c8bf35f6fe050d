"""The scale suite on the sim, at a smoke size (50 nodes x 250 jobs, one backend: Volcano), as it runs: its figures
and charts in the record; not run unless asked; and FAILing the throughput threshold with the measured rate when
the scheduler is throttled (a scheduling period of 20 s, not 1 s). The full size is `bench/scale.py`'s job."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client

from harness.record.model import load_record
from harness.sim import cluster
from tests.heavy import alone
from tests.suites.test_governance import suite
from tests.suites.test_training_sensitivity import profile_variant

SMOKE = {"nodes": 50, "jobs": 250, "rate_per_s": 50, "run_for_s": 2, "cap_s": 150, "submitters": 8}
# 50 nodes and jobs of 2 s (about 4 s from admission to a free node again): the cluster runs about 12 jobs/s at most,
# so the last jobs wait about 20 s however fast the scheduler (500 jobs: 40 s, and the case 90 s alone, 170 s in make
# test, the API server a whole core for it, 2026-12-07). This test shows the suite runs and what it records, not
# how fast Volcano is here: its thresholds have room for the other workers' load (make test, 2026-12-06: 4.82 jobs/s
# and p95 81 s beside them, 3.1 jobs/s beside kind's bring-up; p95 under 60 s alone), and 3 jobs/s still stands
# well above the throttled scheduler's 1.5 (the sensitivity below)
SMOKE_THRESHOLDS = {"min_sustained_jobs_per_s": 3, "admission_p95_s": 120, "drain_within_s": 150,
                    "min_jain_index": 0.9, "max_harness_rss_mib": 1024}
THROTTLED_PERIOD = "20s"


def smoke(tmp_path: Path, **changes: object) -> Path:
    def change(data: dict[str, object]) -> None:
        data["scale"] = {**SMOKE, **changes}
        data["thresholds"]["scale.throughput"] = SMOKE_THRESHOLDS  # type: ignore[index]
    return profile_variant(tmp_path, change)


def run_scale(tmp_path: Path, run_id: str, profile: Path, *args: str) -> object:
    return suite("suites/scale", "--backends=volcano", f"--run-id={run_id}", f"--reports-dir={tmp_path}",
                 f"--profile={profile}", *args)


def test_the_scale_suite_at_smoke_size_passes_with_its_figures_and_charts(tmp_path: Path,
                                                                         sim_api: client.ApiClient) -> None:
    with alone():  # never beside the real nodes' sim or the training scenarios (tests/heavy.py): CI, 2026-12-06, beside
        result = run_scale(tmp_path, "scale", smoke(tmp_path))  # the real nodes' bring-up: 4.5 jobs/s, p95 92 s
    record = load_record(tmp_path / "scale" / "record.json")
    [found] = [r for r in record.results if r.criterion == "scale.throughput"]
    assert found.outcome == "PASS", f"{found.message}\n{result.stdout[-3000:]}"  # type: ignore[attr-defined]
    [ev] = found.evidence
    notes = "\n".join(ev["notes"])
    admitted = f"admitted {SMOKE['jobs']} of {SMOKE['jobs']} jobs"
    assert admitted in notes and "API requests" in notes and "volcano-scheduler: " in notes, notes
    assert {c["name"] for c in ev["checks"]} == {"min_sustained_jobs_per_s", "admission_p95_s", "drain_within_s",
                                                 "min_jain_index", "max_harness_rss_mib"}
    assert ev["series"]["admissions"]["admitted"][-1][1] == SMOKE["jobs"]
    nodes = client.CoreV1Api(sim_api).list_node().items
    assert len(nodes) < 10, "the nodes the scale run added are still there"
    assert "jobs submitted and admitted over time" in (tmp_path / "scale" / "record.html").read_text()


def test_the_scale_suite_is_not_run_unless_asked(tmp_path: Path, sim_api: client.ApiClient) -> None:
    result = suite("suites", "--backends=volcano", "--run-id=notrun", f"--reports-dir={tmp_path}",
                   "-k", "test_scheduler_throughput")
    record = load_record(tmp_path / "notrun" / "record.json")
    assert [(r.criterion, r.outcome) for r in record.results] == [("scale.throughput", "SKIP")], result.stdout[-2000:]
    assert record.results[0].message.startswith("not run: the scale suite runs when asked"), record.results[0].message


@pytest.fixture()
def volcano_throttled(disrupts: Callable[[str], None]) -> Iterator[None]:
    """Volcano's scheduler restarted with a scheduling period of 20 s (1 s is its default); its own arguments after."""
    disrupts("volcano-scheduler")
    with cluster.started_with_extra_args("volcano-scheduler", f"--schedule-period={THROTTLED_PERIOD}",
                                         say=lambda _: None):
        yield


def test_throughput_fails_with_the_measured_rate_when_the_scheduler_is_throttled(
        tmp_path: Path, sim_api: client.ApiClient, volcano_throttled: None) -> None:
    # each 20 s cycle fills the 30 nodes with 2 s jobs, which then stand idle: about 1.5 jobs/s, not 12
    result = run_scale(tmp_path, "throttled", smoke(tmp_path, nodes=30, jobs=200, cap_s=45))
    record = load_record(tmp_path / "throttled" / "record.json")
    [found] = [r for r in record.results if r.criterion == "scale.throughput"]
    assert found.outcome == "FAIL", f"{found.message}\n{result.stdout[-3000:]}"  # type: ignore[attr-defined]
    assert "measured min_sustained_jobs_per_s: " in found.message, found.message
    rate = float(found.message.split("min_sustained_jobs_per_s: ")[1].split("/s")[0])
    assert rate < SMOKE_THRESHOLDS["min_sustained_jobs_per_s"], found.message

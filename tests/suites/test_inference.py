"""The inference suite on the sim: each criterion once on kube-scheduler (the suite as it runs, outcomes as designed),
and each FAILing, with the measured value, on a deliberately misconfigured service. The criterion x backend
matrix (Volcano, KAI) is `make poc`'s job. The probe runs where it must: inside the sim's network namespace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from harness.backends import Backend
from harness.criteria.inference import (canary_release, capacity, cold_start, latency, prefix_routing,
                                        rolling_release, service_discovery)
from harness.core.errors import CriterionViolation
from harness.run.outcomes import load_expected, unexpected
from harness.serving.availability_probe import refuse_reason
from harness.config.profile import Profile
from harness.record.evidence import Evidence
from harness.record.model import load_record
from harness.sim import cluster, netns
from harness.targets.target import Target
from harness.serving.traffic import Traffic
from harness.jobs.kubernetes import Workloads
from suites.inference.test_canary_release import canary_run
from suites.inference.test_cold_start import cold_start_run
from suites.inference.test_rolling_release import rollout_run
from suites.inference.test_service_discovery import discovery_run
from harness.config.profile import load_profile
from tests.pod_security import restricted
from tests.suites.test_governance import suite
from tests.suites.test_training_sensitivity import SIM_PROFILE

CRITERIA = ("inference.cold_start", "inference.elasticity", "inference.autoscaling", "inference.rolling_release",
            "inference.canary_release", "inference.service_discovery", "inference.latency")


def test_each_inference_criterion_on_kube_scheduler(tmp_path: Path, sim_api: client.ApiClient,
                                                    restricted_serving_namespaces: None) -> None:
    """Every serving pod meets Pod Security's restricted level: the tenants' serving namespaces enforce it."""
    # capacity's sweep (a minute of load) and prefix routing's two run once each, in their sensitivity tests
    # (test_inference_sensitivity.py)
    result = suite("suites/inference", "--backends=default", "--run-id=inference", f"--reports-dir={tmp_path}",
                   "--deselect=suites/inference/test_capacity.py::test_capacity[default]",
                   "--deselect=suites/inference/test_prefix_routing.py::test_prefix_routing[default]")
    record = load_record(tmp_path / "inference" / "record.json")
    outcomes = [(r.criterion, r.backend, r.outcome) for r in record.results]
    assert not unexpected(outcomes, load_expected()), "\n".join(
        f"{r.nodeid}: {r.outcome} {r.message}" for r in record.results) + result.stdout[-3000:]
    assert {(c, "default", "PASS") for c in CRITERIA} <= set(outcomes), outcomes
    html = (tmp_path / "inference" / "record.html").read_text()
    assert "probe success per second during the rollout" in html and "network namespace gpupoc-sim-" in html


def test_the_probe_runs_inside_the_sims_namespace_and_refuses_pod_addresses_from_the_host(
        sim_api: client.ApiClient, tmp_path: Path) -> None:
    name = cluster.data_plane_netns()
    assert name and netns.exists(name)
    host = netns.current_inode()
    assert refuse_reason("10.96.0.1") is not None and refuse_reason("10.244.0.7") is not None  # from the host
    assert refuse_reason("127.0.0.1") is None
    with netns.entered(name):
        assert netns.current_inode() == netns.inode(name) != host
    probe = Traffic(name, enter=lambda: netns.enter_for_exec(name)).probe("http://127.0.0.1:9/", rate=1, duration_s=1, out=tmp_path / "probe.jsonl")
    probe.samples(30)
    assert probe.netns_inode == netns.inode(name) != host  # the probe ran inside the sim's namespace


def evidence_of(criterion_id: str, backend: Backend, profile: Profile) -> Evidence:
    criteria = {c.id: c for c in (cold_start.CRITERION, rolling_release.CRITERION, canary_release.CRITERION,
                                  service_discovery.CRITERION, latency.CRITERION, capacity.CRITERION,
                                  prefix_routing.CRITERION)}
    return Evidence.of(criteria[criterion_id], backend.name, profile.thresholds[criterion_id])


@pytest.mark.parametrize("backend", ["default"], indirect=True)
def test_rolling_release_fails_when_new_pods_are_ready_before_their_server(
        target: Target, backend: Backend, workloads: Workloads, queue_model: Profile, tmp_path: Path) -> None:
    ev = evidence_of(rolling_release.CRITERION.id, backend, queue_model)
    with pytest.raises(CriterionViolation, match=r"min_success_rate: 0\.\d+ \(wanted >= 0\.99\)"):
        rollout_run(backend, workloads, queue_model, target, ev, tmp_path, gated=False)


@pytest.mark.parametrize("backend", ["default"], indirect=True)
def test_service_discovery_fails_when_the_service_publishes_not_ready_addresses(
        target: Target, backend: Backend, workloads: Workloads, queue_model: Profile) -> None:
    ev = evidence_of(service_discovery.CRITERION.id, backend, queue_model)
    with pytest.raises(CriterionViolation, match=r"converge_within_s: [4-9]\.\d+ s(?: \[[^]]*\])? \(wanted <= 2 s\)"):
        discovery_run(backend, workloads, queue_model, target, ev, publish_not_ready=True, load_time="5s")


@pytest.mark.parametrize("backend", ["default"], indirect=True)
def test_canary_fails_when_its_share_differs_from_the_intended_split(
        target: Target, backend: Backend, workloads: Workloads, queue_model: Profile, tmp_path: Path) -> None:
    ev = evidence_of(canary_release.CRITERION.id, backend, queue_model)
    with pytest.raises(CriterionViolation, match=r"max_split_outside_interval: 1 \(wanted <= 0\)"):
        canary_run(backend, workloads, queue_model, target, ev, tmp_path, stable_replicas=2, canary_replicas=2,
                   intended=0.25)


@pytest.mark.parametrize("backend", ["default", "kuberay"], indirect=True)  # a Deployment's pods; a RayService's
def test_cold_start_fails_when_the_model_loads_slower_than_the_threshold(
        target: Target, backend: Backend, workloads: Workloads, queue_model: Profile, tmp_path: Path) -> None:
    ev = evidence_of(cold_start.CRITERION.id, backend, queue_model)
    # 8 s beyond the threshold: the interval (the harness's observation lag, seconds on a loaded host) stays above it
    with pytest.raises(CriterionViolation, match=r"all_ready_within_s: (?:2[89]|3\d)\.\d+ s(?: \[[^]]*\])? "
                                                 r"\(wanted <= 20 s\)"):
        cold_start_run(backend, workloads, queue_model, target, ev, tmp_path, load_time="28s")


@pytest.fixture()
def restricted_serving_namespaces(sim_api: client.ApiClient) -> Iterator[None]:
    """The tenants' serving namespaces enforce Pod Security's `restricted` level (a common real-cluster setting)."""
    with restricted(client.CoreV1Api(sim_api), [t.inference_namespace for t in load_profile(SIM_PROFILE).tenants]):
        yield

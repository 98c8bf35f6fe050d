"""Pure parts of the harness core: templates, labels, timelines, configuration, inventory, safety."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pytest

from harness.config.options import resolve
from harness.core.errors import ConfigError
from harness.cluster.inventory import cross_check, dcgm_gpus, gpu_inventory, provider_of
from harness.config.accelerators import parse_nvidia_smi
from harness.cluster.manifests import is_ours, labelled, render, label_value_for_test
from harness.config.profile import load_profile
from harness.setup.queue_model import queue_model
from harness.cluster.safety import NotAllowed, destructive_refusal, require_ours
from harness.sim.config import GpuSpec
from harness.sim.nodes import node_manifest
from harness.core.paths import REPO_ROOT
from harness.core.timeline import Timeline, Transition, percentile, seconds_between


@dataclass
class FakeTenant:
    name: str


def test_template_renders_with_exactly_its_parameters() -> None:
    [cm] = render("testdata/configmap.yaml.j2", name="x", tenant=FakeTenant("team-a"), size=4)
    assert cm["data"] == {"owner": "team-a", "size": "4"}


def test_template_syntax_error_names_file_and_line() -> None:
    with pytest.raises(ConfigError, match=r"manifests/testdata/broken-syntax.yaml.j2:6: template error"):
        render("testdata/broken-syntax.yaml.j2", name="x")


def test_missing_parameter_names_file_and_line() -> None:
    with pytest.raises(ConfigError, match=r"configmap.yaml.j2:7: missing parameter 'size'"):
        render("testdata/configmap.yaml.j2", name="x", tenant=FakeTenant("a"))


def test_unknown_parameter_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"configmap.yaml.j2: unknown parameter 'sise'"):
        render("testdata/configmap.yaml.j2", name="x", tenant=FakeTenant("a"), size=1, sise=2)


def test_undefined_attribute_names_the_line() -> None:
    with pytest.raises(ConfigError, match=r"configmap.yaml.j2:6: .*has no attribute 'name'"):
        render("testdata/configmap.yaml.j2", name="x", tenant=object(), size=1)


def test_labelled_marks_objects_and_pod_templates() -> None:
    [job] = labelled([{"kind": "Job", "metadata": {"name": "j"}, "spec": {"template": {"spec": {"containers": []}}}}], "r1",
                     "suites/training/test_x.py::test_gang[volcano]")
    assert is_ours(job)
    assert job["spec"]["template"]["metadata"]["labels"]["gpupoc.io/run-id"] == "r1"
    assert label_value_for_test("a/b.py::t[x y]") == "a-b.py-t-x-y"
    assert not is_ours({"metadata": {"labels": {"app": "x"}}})


def transition(state: str, seen: float, server: int | None = None) -> Transition:
    stamp = datetime(2026, 1, 1, 0, 0, server, tzinfo=timezone.utc) if server is not None else None
    return Transition("Job", "j", state, seen, server_time=stamp)


def test_timeline_keeps_transitions_not_repeats_and_prefers_server_time() -> None:
    timeline = Timeline()
    for t in (transition("queued", 10.0, 0), transition("queued", 10.5, 0), transition("running", 13.0, 2)):
        timeline.add(t)
    assert [t.state for t in timeline.of("Job", "j")] == ["queued", "running"]
    assert seconds_between(timeline.first("Job", "j", "queued"), timeline.first("Job", "j", "running")) == 2.0
    assert seconds_between(transition("a", 1.0), transition("b", 4.5)) == 3.5
    assert seconds_between(None, transition("b", 1.0)) is None


def test_percentile_interpolates() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([5], 95) == 5
    with pytest.raises(ValueError):
        percentile([], 50)


def test_options_override_environment_and_validate(tmp_path: Path) -> None:
    env = {"GPUPOC_BACKENDS": "volcano,kueue", "GPUPOC_RUN_ID": "nightly-1"}
    cfg = resolve({}, env)
    assert cfg.backends == ("volcano", "kueue") and cfg.run_id == "nightly-1" and cfg.targets_sim
    assert resolve({"backends": "default"}, env).backends == ("default",)
    with pytest.raises(ConfigError, match="--backends: unknown lsf"):
        resolve({"backends": "lsf"}, {})
    with pytest.raises(ConfigError, match="--kubeconfig .*: no such file"):
        resolve({"kubeconfig": str(tmp_path / "nope")}, {})
    with pytest.raises(ConfigError, match="--run-id"):
        resolve({"run_id": "a b"}, {})


def test_inventory_provider_dcgm_and_nvidia_smi() -> None:
    node = node_manifest("gpu-node-0", GpuSpec())
    assert provider_of(node) == "gpupoc sim"
    assert provider_of({"spec": {"providerID": "aws:///us-east-1a/i-0abc"}}) == "AWS"
    inventory = gpu_inventory([node])
    agree = dcgm_gpus([{"Hostname": "gpu-node-0", "gpu": "0", "modelName": "NVIDIA H100 80GB HBM3",
                        "DCGM_FI_DRIVER_VERSION": "550.90.07"}])
    assert cross_check(inventory, agree) == []
    differ = dcgm_gpus([{"Hostname": "gpu-node-0", "gpu": "1", "modelName": "NVIDIA A100-SXM4-80GB",
                         "DCGM_FI_DRIVER_VERSION": "535.1.1"}])
    assert len(cross_check(inventory, differ)) == 2
    csv = "name, driver_version, memory.total [MiB]\nNVIDIA H100 80GB HBM3, 550.90.07, 81559 MiB\n"
    assert parse_nvidia_smi(csv) == [("NVIDIA H100 80GB HBM3", "550.90.07", "81559 MiB")]


def test_destructive_steps_need_the_sim_or_an_allowed_context() -> None:
    assert destructive_refusal(True, "gpupoc-sim", (), "fail a pod") is None
    assert destructive_refusal(False, "staging-1", ("staging-1",), "fail a pod") is None
    reason = destructive_refusal(False, "staging-1", (), "fail a pod")
    assert reason is not None and "--allow-destructive staging-1" in reason
    with pytest.raises(NotAllowed, match="not created by gpupoc"):
        require_ours({"kind": "Pod", "metadata": {"name": "theirs", "namespace": "prod"}}, "fail a pod")


def test_queue_model_has_tenants_priorities_and_queues_of_present_backends() -> None:
    profile = load_profile(REPO_ROOT / "profiles" / "sim.yaml")
    kinds = [(o["kind"], o["metadata"]["name"]) for o in queue_model(profile, ["kueue"])]
    assert ("ClusterQueue", "team-a") in kinds and ("LocalQueue", "team-b") in kinds
    assert ("PriorityClass", "gpupoc-high") in kinds and ("Namespace", "poc-team-a") in kinds
    assert not any(kind == "Queue" for kind, _ in kinds)


def test_labelled_reaches_volcano_tasks_and_ray_groups() -> None:
    from harness.backends import ALL
    from harness.jobs.model import GangJob
    team = load_profile(REPO_ROOT / "profiles" / "sim.yaml").tenant("team-a")
    job = GangJob("g", team, 3, 1)
    [volcano] = labelled(ALL["volcano"].manifests(job), "r1")
    assert volcano["spec"]["tasks"][0]["template"]["metadata"]["labels"]["gpupoc.io/run-id"] == "r1"
    [ray] = labelled(ALL["kuberay"].manifests(job), "r1")
    cluster = ray["spec"]["rayClusterSpec"]
    assert cluster["headGroupSpec"]["template"]["metadata"]["labels"]["gpupoc.io/run-id"] == "r1"
    assert cluster["workerGroupSpecs"][0]["template"]["metadata"]["labels"]["gpupoc.io/run-id"] == "r1"


def test_queue_wait_disagreement_allows_the_metrics_bucket() -> None:
    from harness.criteria.training.queue_wait import bucket_around, disagreement, summarize
    assert bucket_around([1, 2, 5, 10, 20], 18.5) == (10, 20)
    assert disagreement(12.0, 18.5, [1, 2, 5, 10, 20]) == 0.0
    assert disagreement(3.0, 18.5, [1, 2, 5, 10, 20]) == 7.0
    assert bucket_around([1, 2, 5, 10, 20], 20) == (20, float("inf"))  # the quantile fell in +Inf
    assert disagreement(25.0, 20, [1, 2, 5, 10, 20]) == 0.0
    assert summarize("q", [1, 2, 3, 4]).p50_s == 2.5


def test_histogram_quantile_of_the_tests_own_observations() -> None:
    from harness.criteria.training.queue_wait import bucket_delta, bucket_quantile
    inf = float("inf")
    before = {1.0: 3.0, 2.0: 3.0, 5.0: 4.0, inf: 4.0}  # what earlier tests left in the histogram
    after = {1.0: 3.0, 2.0: 8.0, 5.0: 14.0, inf: 14.0}
    delta = bucket_delta(before, after)
    assert delta == {1.0: 0.0, 2.0: 5.0, 5.0: 10.0, inf: 10.0}
    assert bucket_quantile(0.5, delta) == 2.0
    assert round(bucket_quantile(0.95, delta) or 0, 3) == 4.7
    assert bucket_quantile(0.95, {1.0: 0.0, 2.0: 1.0, inf: 4.0}) == 2.0  # in +Inf: the highest finite bound
    assert bucket_quantile(0.95, {1.0: 0.0, inf: 0.0}) is None


def test_pods_are_their_tenants_intervals_by_name() -> None:
    from harness.criteria.training import queue_fairness as fairness
    running = [("fair-team-a-0-x-0", 0.0, 5.0), ("fair-team-b-3-x-0", 1.0, 2.0), ("other-0", 0.0, 9.0)]
    assert fairness.tenant_intervals(running, ["team-a", "team-b"], "fair-", 4) == [
        fairness.Interval("team-a", 0.0, 5.0, 4), fairness.Interval("team-b", 1.0, 2.0, 4)]


def test_fairness_math() -> None:
    from harness.criteria.training import queue_fairness as fairness
    ivs = [fairness.Interval("a", 0, 10, 4), fairness.Interval("b", 0, 10, 4), fairness.Interval("a", 10, 20, 8)]
    totals = fairness.gpu_seconds(ivs, (0, 20))
    assert totals == {"a": 120.0, "b": 40.0}
    shares = fairness.shares(totals, ["a", "b"])
    assert shares == {"a": 0.75, "b": 0.25}
    expected = {"a": 0.5, "b": 0.5}
    assert fairness.max_deviation(shares, expected) == 0.25
    assert round(fairness.jain_index(shares, expected), 3) == 0.8
    assert fairness.jain_index(expected, expected) == 1.0
    assert fairness.contended_window({"a": 1, "b": 3}, {"a": 30, "b": 20}) == (3, 20)


def test_late_tenant_time_to_its_share() -> None:
    from harness.criteria.training import queue_fairness as fairness
    # b arrives at 10 and gets one 4-GPU job at 12, a second at 15: its 8 GPUs (0.25 of 32) from 15 on
    ivs = [fairness.Interval("a", 0, 30, 24), fairness.Interval("b", 12, 30, 4), fairness.Interval("b", 15, 30, 4)]
    assert fairness.entitled(0.25, 32, 4) == 8
    assert fairness.time_to_share(ivs, "b", 10.0, 8) == 5.0
    assert fairness.time_to_share(ivs, "b", 10.0, 12) is None
    # FIFO: b gets nothing until a's backlog drains; over the contended window its share is 0
    fifo = [fairness.Interval("a", 0, 20, 32), fairness.Interval("b", 20, 30, 32)]
    shares = fairness.shares(fairness.gpu_seconds(fifo, (10, 20)), ["a", "b"])
    assert shares == {"a": 1.0, "b": 0.0}
    assert fairness.jain_index(shares, {"a": 0.75, "b": 0.25}) == 0.5


def test_gang_watch_keeps_the_worst_partial_binding() -> None:
    from harness.criteria.training.gang_admission import GangWatch
    watch = GangWatch(3)

    def pod(name: str, node: str | None) -> dict[str, object]:
        return {"metadata": {"name": name}, "spec": {"nodeName": node} if node else {}}
    watch.observe("ADDED", pod("a", "n1"), 1.0)
    watch.observe("ADDED", pod("b", "n2"), 2.0)
    watch.observe("DELETED", pod("b", "n2"), 3.0)
    assert watch.partial_while_blocked() == 2 and watch.all_bound_at is None
    for name, t in (("b", 4.0), ("c", 5.0)):
        watch.observe("MODIFIED", pod(name, "n3"), t)
    assert watch.all_bound_at == 5.0


def test_gang_watch_knows_when_the_scheduler_refused_every_pod() -> None:
    from harness.criteria.training.gang_admission import GangWatch
    watch = GangWatch(2)

    def pod(name: str, refused: bool, node: str | None = None) -> dict[str, object]:
        conditions = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}] if refused else []
        return {"metadata": {"name": name}, "spec": {"nodeName": node} if node else {},
                "status": {"conditions": conditions}}
    watch.observe("ADDED", pod("a", True), 1.0)
    assert watch.refused_since() is None  # one of two
    watch.observe("ADDED", pod("b", True), 2.0)
    watch.observe("MODIFIED", pod("a", True), 3.0)  # refused again: still since its first refusal
    assert watch.refused_since() == 2.0
    watch.observe("MODIFIED", pod("a", False, "n1"), 4.0)  # bound after all: no longer refused
    assert watch.refused_since() is None and watch.partial_while_blocked() == 1

"""Pure parts of the scheduler stack: Kueue's configuration and webhook rewrite, Volcano's wrapper module."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from harness.core.errors import ConfigError
from harness.sim import build, karpenter, kueue, stack
from harness.sim.components import Layout
from harness.sim.config import SCHEDULERS_ENV, GpuSpec, Ports, SimConfig, parse_schedulers
from harness.config.versions import load_pins

SHIPPED = [{
    "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
    "metadata": {"name": "mutating-webhook-configuration"},
    "webhooks": [
        {"name": "mjob.kb.io", "clientConfig": {"service": {"name": "webhook-service", "namespace": "system",
                                                             "path": "/mutate-batch-v1-job"}},
         "rules": [{"apiGroups": ["batch"], "resources": ["jobs"], "apiVersions": ["v1"], "operations": ["CREATE"]}]},
        {"name": "mpod.kb.io", "clientConfig": {"service": {"name": "webhook-service", "namespace": "system",
                                                             "path": "/mutate--v1-pod"}},
         "rules": [{"apiGroups": [""], "resources": ["pods"], "apiVersions": ["v1"], "operations": ["CREATE"]}]},
        {"name": "mclusterqueue.kb.io", "clientConfig": {"service": {"name": "webhook-service",
                                                                     "path": "/mutate-kueue-x-k8s-io-v1beta2-clusterqueue"}},
         "rules": [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues"]}]},
    ]}]


def test_webhooks_point_at_loopback_with_the_ca_and_only_enabled_integrations() -> None:
    [config] = kueue.webhook_configurations(SHIPPED, 37600, b"CA PEM")
    names = [w["name"] for w in config["webhooks"]]
    assert names == ["mjob.kb.io", "mpod.kb.io", "mclusterqueue.kb.io"]
    selectors = {w["name"]: w.get("namespaceSelector") for w in config["webhooks"]}
    assert selectors["mpod.kb.io"] == {"matchLabels": {"gpupoc.io/serving": "true"}}  # never a training pod
    assert selectors["mjob.kb.io"] is None
    job = config["webhooks"][0]["clientConfig"]
    assert job == {"url": "https://127.0.0.1:37600/mutate-batch-v1-job",
                   "caBundle": base64.b64encode(b"CA PEM").decode()}
    assert config["metadata"]["name"] == "kueue-mutating-webhook-configuration"


def test_kueue_configuration_turns_on_what_the_poc_needs(tmp_path: Path) -> None:
    config = kueue.configuration(1, 2, 3, tmp_path)
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert config["internalCertManagement"] == {"enable": False}
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["metrics"] == {"bindAddress": "127.0.0.1:2", "enableClusterQueueResources": True}
    assert "timeout" in config["waitForPodsReady"] and "fairSharing" in config
    assert config["integrations"]["frameworks"] == ["batch/job", "ray.io/rayjob", "ray.io/raycluster", "pod",
                                                    "deployment"]
    assert "managedJobsNamespaceSelector" not in config  # Kueue's default: training Jobs stay managed


def test_volcano_wrapper_keeps_its_replaces_and_pins_the_published_apis(monkeypatch: pytest.MonkeyPatch) -> None:
    upstream = ("module volcano.sh/volcano\n\ngo 1.25.0\n\nrequire volcano.sh/apis v1.15.1\n\nreplace (\n"
                "\tk8s.io/api => k8s.io/api v0.35.3\n\tvolcano.sh/apis => ./staging/src/volcano.sh/apis\n)\n")
    monkeypatch.setattr(build, "_module_go_mod", lambda *_: upstream)
    pins = load_pins()
    wrapper = build.volcano_wrapper(pins, Path("/dev/null"))
    assert "\tk8s.io/api => k8s.io/api v0.35.3" in wrapper
    assert "./staging" not in wrapper
    assert f"\tvolcano.sh/apis => volcano.sh/apis {pins.volcano_apis}" in wrapper


def test_schedulers_flag() -> None:
    assert parse_schedulers("kueue, volcano,kueue") == ("kueue", "volcano")
    assert parse_schedulers("none") == ()
    with pytest.raises(ConfigError, match="unknown lsf"):
        SimConfig(schedulers=("lsf",))


def test_kai_is_built_only_when_asked(tmp_path: Path) -> None:
    recipes = build.recipes(load_pins(), tmp_path)
    assert "kai-scheduler" not in [r.name for r in build.selected(recipes, (), ())]
    assert "kai-scheduler" in [r.name for r in build.selected(recipes, (), ("kai",))]
    kai = next(r for r in recipes if r.name == "kai-scheduler")
    assert kai.packages[0] == "github.com/NVIDIA/KAI-scheduler/cmd/scheduler" and len(kai.binaries) == 6
    with pytest.raises(ConfigError, match="--with takes kai"):
        build.selected(recipes, (), ("slurm",))


def test_schedulers_default_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SCHEDULERS_ENV, "kueue,kai")
    assert SimConfig().schedulers == ("kueue", "kai")
    monkeypatch.delenv(SCHEDULERS_ENV)
    assert SimConfig().schedulers == ("kueue", "volcano", "kuberay")


def test_kai_processes_listen_on_loopback_and_read_the_kubeconfig_from_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stack, "binary", lambda name, _hint="": name)
    ports = Ports(37000)
    components = stack.kai_components(Layout(tmp_path), ports, "v0.12.0")
    assert [c.name for c in components][-1] == "kai-scheduler"  # its controllers first: it schedules last
    assert "--update-pod-eviction-condition" in components[-1].argv  # an evicted pod says who took it
    for component in components:
        assert dict(component.env)["KUBECONFIG"] == str(tmp_path / "kai-scheduler.kubeconfig")
        assert component.health_url.startswith("http://127.0.0.1:")
        if component.name == "kai-gpu-reservations":  # the simulated device side: no controller of KAI's
            continue
        assert "--leader-elect=false" in component.argv
        addresses = [a.split("=", 1)[1] for a in component.argv if "address=" in a]
        assert addresses and all(a.startswith("127.0.0.1:") for a in addresses)
    jobs = {j["job_name"] for j in stack.scrape_jobs(ports, ("kai",), tmp_path / "token")}
    assert {"kai-scheduler", "kai-queuecontroller"} <= jobs


def test_karpenter_pool_is_tainted_labelled_and_sized_from_the_sims_gpus(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(karpenter, "binary", lambda name, _hint="": name)  # a unit test: the build may not be there
    gpu = GpuSpec()
    node_class, pool = karpenter.pool_objects(gpu)
    assert node_class["kind"] == "KWOKNodeClass" and pool["spec"]["template"]["spec"]["nodeClassRef"]["name"] == \
        node_class["metadata"]["name"]
    template = pool["spec"]["template"]
    assert template["metadata"]["labels"]["nvidia.com/gpu.product"] == gpu.product  # GFD labels, as its nodes have
    assert template["metadata"]["labels"]["gpupoc.io/simulated"] == "true"
    assert template["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert pool["spec"]["limits"] == {"nvidia.com/gpu": str(karpenter.POOL_NODES * gpu.count)}
    [kind] = karpenter.instance_types(gpu)
    assert kind["name"] == template["spec"]["requirements"][0]["values"][0]
    assert kind["resources"]["nvidia.com/gpu"] == str(gpu.count)
    component = karpenter.component(Layout(tmp_path), Ports(40000), "v1.13.0")
    env = dict(component.env)
    assert env["DISABLE_LEADER_ELECTION"] == "true" and env["HEALTH_PROBE_PORT"] == str(Ports(40000).karpenter_health)
    assert "karpenter" in stack.crd_sources(load_pins()) and parse_schedulers("kueue,karpenter")[-1] == "karpenter"


def test_kais_pod_webhooks_are_registered_by_url_for_pods_in_a_kai_queue_only() -> None:
    from harness.sim import kai_sharing
    mutating, validating = kai_sharing.webhook_configurations(37652, b"CA", ("kube-system", "kai-scheduler"))
    for config, path in ((mutating, "/mutate--v1-pod"), (validating, "/validate--v1-pod")):
        (hook,) = config["webhooks"]
        assert hook["clientConfig"]["url"] == f"https://127.0.0.1:37652{path}" and hook["failurePolicy"] == "Fail"
        assert hook["objectSelector"] == {"matchExpressions": [{"key": "kai.scheduler/queue", "operator": "Exists"}]}
        assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-system", "kai-scheduler"]
    assert mutating["webhooks"][0]["rules"][0]["operations"] == ["CREATE"]
    assert mutating["webhooks"][0]["name"] != validating["webhooks"][0]["name"]


def test_the_sim_nodepools_node_names_stay_within_a_label_value_which_kai_binds_by() -> None:
    """KAI labels each BindRequest with its node's name; a node name past 63 characters is never bound."""
    assert karpenter.longest_node_name(karpenter.POOL) <= karpenter.LABEL_VALUE_MAX
    assert karpenter.longest_node_name("gpupoc-elastic") > karpenter.LABEL_VALUE_MAX  # what failed 2 of 5 runs

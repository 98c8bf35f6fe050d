"""Quota per GPU model as profile data (its malformed fields: tests/unit/config/test_profile.py): the models and each
tenant's quota of them, Kueue's flavor per model and the tenant's queue of those flavors, Volcano's and KAI's queue
per tenant and model, the backends that cannot express it yet saying why, and the pure reads of the case."""

from __future__ import annotations

from harness import backends
from harness.backends.base import MODEL_QUOTA
from harness.config.profile import Tenant, load_profile
from harness.core.paths import REPO_ROOT
from harness.criteria.governance.model_quota import misplaced, nodes_by_model
from harness.jobs.model import GangJob
from harness.setup.queue_model import queue_model
from harness.targets.target import SIM_FEATURES

PRODUCT = "nvidia.com/gpu.product"
TEAM = Tenant("team-a", "poc-team-a", "sa", 1.0, 8, {"kueue": "team-a", "volcano": "team-a", "kai": "team-a"})


def test_the_reference_profile_gives_each_tenant_a_quota_of_two_models() -> None:
    models = load_profile(REPO_ROOT / "profiles" / "sim.yaml").gpu.models
    assert [m.model for m in models] == ["NVIDIA-H100-80GB-HBM3", "NVIDIA-L40S"]
    assert (models[1].of("team-a"), models[1].of("nobody")) == (4, 0)


def test_kueue_gets_a_flavor_per_model_on_its_nodes_and_each_tenant_a_queue_of_its_quota_of_each() -> None:
    profile = load_profile(REPO_ROOT / "profiles" / "sim.yaml")
    made = {(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")): o for o in queue_model(profile, ["kueue"])}
    assert made[("ResourceFlavor", "gpupoc-nvidia-l40s", None)]["spec"] == {"nodeLabels": {PRODUCT: "NVIDIA-L40S"}}
    queue = made[("ClusterQueue", "team-a-models", None)]["spec"]
    assert "cohortName" not in queue  # outside the cohort: nothing borrowed between models
    quotas = {f["name"]: next(r["nominalQuota"] for r in f["resources"] if r["name"] == "nvidia.com/gpu")
              for f in queue["resourceGroups"][0]["flavors"]}
    assert quotas == {"gpupoc-nvidia-h100-80gb-hbm3": 8, "gpupoc-nvidia-l40s": 4}
    assert made[("LocalQueue", "gpupoc-models", "poc-team-a")]["spec"] == {"clusterQueue": "team-a-models"}


def test_volcano_and_kai_get_a_queue_per_tenant_and_model_capped_at_its_quota_of_it() -> None:
    profile = load_profile(REPO_ROOT / "profiles" / "sim.yaml")
    made = {(o["apiVersion"], o["metadata"]["name"]): o for o in queue_model(profile, ["volcano", "kai"])}
    volcano = made[("scheduling.volcano.sh/v1beta1", "team-a-nvidia-l40s")]["spec"]
    assert (volcano["capability"], volcano["reclaimable"]) == ({"nvidia.com/gpu": "4"}, False)
    kai = made[("scheduling.run.ai/v2", "team-a-nvidia-l40s")]["spec"]
    assert kai["parentQueue"] == "gpupoc"  # a leaf beside the tenant's queue: KAI runs jobs in leaves only
    assert (kai["resources"]["gpu"]["quota"], kai["resources"]["gpu"]["limit"]) == (4, 4)


def test_a_job_of_a_model_goes_to_its_models_queue_and_the_others_say_why_not() -> None:
    job = GangJob("m", TEAM, 1, 1, node_selector={PRODUCT: "NVIDIA-L40S"}, gpu_model="NVIDIA-L40S")
    [batch] = backends.ALL["kueue"].manifests(job)
    assert batch["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpupoc-models"
    assert batch["spec"]["template"]["spec"]["nodeSelector"][PRODUCT] == "NVIDIA-L40S"
    [vcjob] = backends.ALL["volcano"].manifests(job)
    assert vcjob["spec"]["queue"] == "team-a-nvidia-l40s"
    group = backends.ALL["kai"].manifests(job)[0]
    assert group["spec"]["queue"] == "team-a-nvidia-l40s"
    [paired] = backends.ALL["kueue-volcano"].manifests(job)  # Kueue's flavors admit it, Volcano places it
    assert paired["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpupoc-models"
    assert paired["spec"]["template"]["spec"]["schedulerName"] == "volcano"
    for name in ("kueue", "volcano", "kai", "kueue-volcano"):
        assert backends.ALL[name].lacks(MODEL_QUOTA, SIM_FEATURES) is None, name
    for name in ("slurm", "default", "kuberay"):
        assert backends.ALL[name].lacks(MODEL_QUOTA, SIM_FEATURES), name


def test_nodes_are_grouped_by_model_and_a_pod_on_another_model_is_named() -> None:
    model_of = {"h1": "H100", "l1": "L40S", "h0": "H100"}
    found = nodes_by_model(model_of)
    assert found == {"H100": ["h0", "h1"], "L40S": ["l1"]}
    pods = [{"name": "p0", "job": "a", "node": "l1"}, {"name": "p1", "job": "a", "node": "h0"},
            {"name": "p2", "job": "a", "node": None}, {"name": "p3", "job": "x", "node": "h0"}]
    assert misplaced(pods, {"a": "L40S"}, model_of) == ["p1 on h0 (H100)"]


def test_a_job_of_a_model_is_charged_to_the_queue_its_scheduler_counts_it_in() -> None:
    """Cost attribution sets each queue's GPU-hours beside the scheduler's usage of that queue: a job of a model counts
    in its tenant's queue of models (Kueue's ClusterQueue, Volcano's and KAI's Queue of that model), one of no model
    in the tenant's own queue."""
    profile = load_profile(REPO_ROOT / "profiles" / "sim.yaml")
    team = profile.tenants[0]
    made = {o["metadata"]["name"] for o in queue_model(profile, ["kueue", "volcano", "kai"])
            if o["kind"] in ("ClusterQueue", "Queue")}
    of_a_model = GangJob("m", team, 1, 1, gpu_model="NVIDIA-L40S")
    charged = {name: backends.ALL[name].charged_queue(of_a_model) for name in ("kueue", "volcano", "kai")}
    assert charged == {"kueue": "team-a-models", "volcano": "team-a-nvidia-l40s", "kai": "team-a-nvidia-l40s"}
    assert set(charged.values()) <= made
    plain = GangJob("p", team, 1, 1)
    assert {backends.ALL[name].charged_queue(plain) for name in ("kueue", "volcano", "kai", "kuberay",
                                                                  "kueue-volcano")} == {"team-a"}

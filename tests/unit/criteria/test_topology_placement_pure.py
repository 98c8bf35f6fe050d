"""Topology placement on recorded pod events: the domains a gang's bound pods span at each moment, the pods bound
while no domain could hold it, and each scheduler's way of asking for one domain."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness import backends
from harness.config.profile import Tenant, Topology, load_profile
from harness.core.errors import ConfigError
from harness.core.paths import REPO_ROOT
from harness.criteria.training.topology_placement import (PlacementWatch, domains_of, fewest_domains, fragmentation,
                                                          members)
from harness.jobs.model import GangJob, Placement
from harness.sim.nodes import LEAF, SPINE, node_manifest, topology_labels
from harness.sim.config import GpuSpec

DOMAIN_OF = {"n0": "leaf-0", "n1": "leaf-0", "n2": "leaf-1", "n3": "leaf-1"}
TEAM = Tenant("team-a", "poc-team-a", "sa", 1.0, 8, {"kueue": "team-a", "volcano": "team-a", "kai": "team-a"})
LEVELS = (SPINE, LEAF, "kubernetes.io/hostname")


def pod(name: str, node: str | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"nodeName": node} if node else {}}


def test_a_gang_split_over_two_leaves_while_none_could_hold_it_is_counted_at_its_worst() -> None:
    watch = PlacementWatch(2, DOMAIN_OF)
    watch.observe("ADDED", pod("a"), 1.0)
    watch.observe("MODIFIED", pod("a", "n1"), 2.0)
    watch.observe("MODIFIED", pod("b", "n3"), 2.5)
    assert (watch.max_spanned, watch.bound_while_blocked, watch.all_bound_at) == (2, 2, 2.5)
    assert watch.spans == [(1.0, ()), (2.0, ("leaf-0",)), (2.5, ("leaf-0", "leaf-1"))]


def test_a_gang_held_until_a_leaf_frees_then_landing_whole_in_it_passes() -> None:
    watch = PlacementWatch(2, DOMAIN_OF)
    watch.observe("ADDED", pod("a"), 1.0)
    watch.observe("ADDED", pod("b"), 1.0)
    watch.free_a_domain()
    watch.observe("MODIFIED", pod("a", "n0"), 5.0)
    watch.observe("MODIFIED", pod("b", "n1"), 5.1)
    watch.observe("DELETED", pod("b", "n1"), 9.0)  # a pod gone is no longer where the gang is
    assert (watch.max_spanned, watch.bound_while_blocked, watch.all_bound_at) == (1, 0, 5.1)
    assert watch.domains() == ("leaf-0",)


def test_after_a_lost_node_a_replacement_outside_the_gangs_domain_is_a_straggler() -> None:
    placed = {"a": "n0", "b": "n1"}
    held = PlacementWatch(2, DOMAIN_OF, nodes=dict(placed), blocked=False, home="leaf-0",
                          placed_before=frozenset(placed.items()))
    held.observe("DELETED", pod("a", "n0"), 1.0)        # evicted from the lost node
    held.observe("ADDED", pod("a2"), 11.0)              # the Job's replacement, after its backoff: it waits
    held.observe("MODIFIED", pod("a2", "n0"), 30.0)     # the node back: it lands in the domain
    assert held.max_outside == 0 and held.domains() == ("leaf-0",)
    straggling = PlacementWatch(2, DOMAIN_OF, nodes=dict(placed), blocked=False, home="leaf-0",
                                placed_before=frozenset(placed.items()))
    straggling.observe("DELETED", pod("a", "n0"), 1.0)
    straggling.observe("MODIFIED", pod("a2", "n2"), 11.0)  # a free node of the other leaf took it
    assert straggling.max_outside == 1 and straggling.max_spanned == 2
    split = {"a": "n1", "b": "n3"}  # a gang already split: its pod that stays defines its domain, not a straggler
    already = PlacementWatch(2, DOMAIN_OF, nodes=dict(split), blocked=False, home="leaf-1",
                             placed_before=frozenset(split.items()))
    already.observe("DELETED", pod("a", "n1"), 1.0)
    assert already.max_outside == 0
    already.observe("MODIFIED", pod("a2", "n0"), 11.0)
    assert already.max_outside == 1


def test_a_node_without_the_levels_label_is_a_domain_of_its_own() -> None:
    watch = PlacementWatch(2, DOMAIN_OF)
    watch.observe("MODIFIED", pod("a", "n0"), 1.0)
    watch.observe("MODIFIED", pod("b", "stray"), 1.0)
    assert watch.max_spanned == 2 and "(unlabelled: stray)" in watch.domains()


def test_the_sims_nodes_sit_two_to_a_leaf_under_one_spine() -> None:
    nodes = [node_manifest(f"gpu-node-{i}", GpuSpec()) for i in range(4)]
    assert members(domains_of(nodes, LEAF)) == {"leaf-0": ["gpu-node-0", "gpu-node-1"],
                                                "leaf-1": ["gpu-node-2", "gpu-node-3"]}
    assert {topology_labels(n["metadata"]["name"])[SPINE] for n in nodes} == {"spine-0"}


def test_the_reference_profile_names_the_sims_levels_and_a_tier_for_volcano() -> None:
    topology = load_profile(REPO_ROOT / "profiles" / "sim.yaml").gpu.topology
    assert topology == Topology(LEVELS, LEAF, (("nvidia.com/gpu.present", "true"),))
    assert (topology.tier(LEAF), topology.tier(SPINE)) == (1, 2)


@pytest.mark.parametrize("section, says", [
    ({"levels": [], "gang_level": LEAF}, "levels"), ({"levels": [SPINE, LEAF], "gang_level": "rack"}, "gang_level"),
    ({"levels": [SPINE, LEAF], "gang_level": LEAF}, "node_labels")])
def test_a_topology_the_profile_gets_wrong_is_a_one_line_error(tmp_path: Path, section: dict[str, Any],
                                                               says: str) -> None:
    import yaml
    data = yaml.safe_load((REPO_ROOT / "profiles" / "sim.yaml").read_text())
    data["gpu"]["topology"] = section
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=f"gpu.topology.{says}"):
        load_profile(path)


def test_each_scheduler_is_asked_for_one_domain_in_its_own_words() -> None:
    job = GangJob("g", TEAM, pods=2, gpus_per_pod=8, placement=Placement(LEAF, tier=1))
    [kueue] = backends.ALL["kueue"].manifests(job)
    assert kueue["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpupoc-topology"
    assert kueue["spec"]["template"]["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] == LEAF
    [volcano] = backends.ALL["volcano"].manifests(job)
    assert volcano["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    group, _ = backends.ALL["kube-gang"].manifests(job)
    assert group["spec"]["schedulingConstraints"] == {"topology": [{"key": LEAF}]}
    kai_group, *_ = backends.ALL["kai"].manifests(job)
    assert kai_group["spec"]["topologyConstraint"] == {"topology": "gpupoc", "requiredTopologyLevel": LEAF}
    [plain] = backends.ALL["default"].manifests(job)  # the baseline: kube-scheduler is asked for nothing
    assert "networkTopology" not in plain["spec"] and not plain["spec"]["template"]["spec"].get("schedulingGroup")


def test_volcanos_hypernodes_are_the_leaves_of_the_nodes_labels_and_the_spine_above_them() -> None:
    from harness.setup.topology import hypernodes
    topology = Topology(LEVELS, LEAF, (("nvidia.com/gpu.present", "true"),))
    nodes = [node_manifest(f"gpu-node-{i}", GpuSpec()) for i in range(4)]
    found = {h["metadata"]["name"]: h["spec"] for h in hypernodes(topology, nodes, {})}
    assert found["gpupoc-leaf-leaf-1"] == {"tier": 1, "members": [
        {"type": "Node", "selector": {"labelMatch": {"matchLabels": {LEAF: "leaf-1"}}}}]}
    assert found["gpupoc-spine-spine-0"] == {"tier": 2, "members": [
        {"type": "HyperNode", "selector": {"exactMatch": {"name": f"gpupoc-leaf-leaf-{i}"}}} for i in (0, 1)]}
    assert len(found) == 3


def test_kueue_and_kai_get_a_topology_of_the_profiles_levels() -> None:
    from harness.setup.queue_model import queue_model
    profile = load_profile(REPO_ROOT / "profiles" / "sim.yaml")
    made = {(o["apiVersion"], o["kind"]): o for o in queue_model(profile, ["kueue", "kai"])}
    for api in ("kueue.x-k8s.io/v1beta2", "kai.scheduler/v1alpha1"):
        assert [level["nodeLabel"] for level in made[(api, "Topology")]["spec"]["levels"]] == list(LEVELS)


def test_the_fewest_domains_holding_a_gang_count_the_fullest_first() -> None:
    assert fewest_domains({"leaf-0": 2, "leaf-1": 1}, 2) == 1
    assert fewest_domains({"leaf-0": 1, "leaf-1": 1, "leaf-2": 1}, 2) == 2
    assert fewest_domains({"a": 3, "b": 4}, 4) == 1 and fewest_domains({"a": 0}, 1) == 1  # never fits: all it has


def test_small_jobs_packed_into_one_leaf_leave_the_other_whole_and_spread_ones_break_both() -> None:
    domains = {"leaf-0": ["n0", "n1"], "leaf-1": ["n2", "n3"]}
    packed = fragmentation({"n0": 8, "n1": 8}, domains, 8)
    assert (packed.touched, packed.wholly_free, packed.largest_gang_nodes, packed.extra_domains) == \
        (("leaf-0",), ("leaf-1",), 2, 0)
    spread = fragmentation({"n0": 4, "n1": 4, "n2": 4, "n3": 4}, domains, 8)  # kube-scheduler's least allocated
    assert (spread.wholly_free, spread.largest_gang_nodes, spread.fewest, spread.extra_domains) == ((), 0, 1, 1)
    one_node_each = fragmentation({"n1": 8, "n2": 8}, domains, 8)  # packed by node, not by domain
    assert (one_node_each.largest_gang_nodes, one_node_each.extra_domains) == (1, 1)

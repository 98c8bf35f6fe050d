"""Which release a verdict holds for: the release each component ran, read from a record, and the caveat a cell gets
when a later release is known to change it. The data (suites/expected.yaml's holds_for, suites/releases.yaml) stays
true to the pins of sim/versions.toml."""

from __future__ import annotations

import re
import tomllib

from harness.core.paths import VERSIONS_FILE
from harness.criteria import registered
from harness.record.model import Record, Result
from harness.record.caveats import Change, caveats, running, version_tuple
from harness.run.outcomes import load_changes, load_expected

DRA_KAI = "training.dra_allocation [kai]"
CHANGE = Change("kai-scheduler", "v0.13.0", (DRA_KAI,), "DRA claims count against queue quota", "KAI #1")


def a_record(schedulers: list[dict[str, str]]) -> Record:
    result = Result(nodeid="n", criterion="training.dra_allocation", backend="kai", outcome="FAIL")
    return Record(run_id="r", started_at="", harness_version="", commit="", schedulers=schedulers,
                  target={"kubernetes_version": "v1.36.3"}, slurm={"version": "22.05.8"}, results=[result])


def test_the_release_is_read_from_the_sims_components_and_from_a_clusters_images() -> None:
    sim = a_record([{"name": "kai-scheduler", "version": "kai-scheduler v0.12.0"},
                    {"name": "volcano-scheduler", "version": "volcano v1.14.1"}])
    cluster = a_record([
        {"name": "kai-scheduler/kai-scheduler", "version": "ghcr.io/nvidia/kai-scheduler/scheduler:v0.14.2"},
        {"name": "kueue-system/kueue-controller-manager", "version": "registry.k8s.io/kueue/kueue:v0.19.2"}])
    assert (running(sim, "kai-scheduler"), running(sim, "volcano"), running(sim, "kueue")) == (
        "v0.12.0", "v1.14.1", None)
    assert (running(cluster, "kai-scheduler"), running(cluster, "kueue")) == ("v0.14.2", "v0.19.2")
    assert (running(sim, "kubernetes"), running(sim, "slurm")) == ("v1.36.3", "22.05.8")
    assert version_tuple("no version") is None


def test_a_cell_gets_the_caveat_of_a_later_release_and_none_once_its_cluster_runs_it() -> None:
    older = caveats(a_record([{"name": "kai-scheduler", "version": "kai-scheduler v0.12.0"}]), [CHANGE])
    assert older == {DRA_KAI: "valid for kai-scheduler v0.12.0; v0.13.0 changes this: "
                              "\u201cDRA claims count against queue quota\u201d (KAI #1)"}
    assert caveats(a_record([{"name": "kai-scheduler", "version": "kai-scheduler v0.13.0"}]), [CHANGE]) == {}
    unknown = caveats(a_record([]), [CHANGE])
    assert unknown[DRA_KAI].startswith("kai-scheduler's release not known; v0.13.0 changes this")
    assert caveats(a_record([]), [Change("volcano", "v1.15.0", ("training.dra_allocation [volcano]",), "w", "s")]) == {}


def pins() -> dict[str, str]:
    return {name: table["version"] for name, table in tomllib.loads(VERSIONS_FILE.read_text()).items()
            if "version" in table}


def test_each_designed_outcome_names_the_pinned_releases_it_holds_for() -> None:
    """A bumped pin in sim/versions.toml fails here until the designed outcomes it decides are looked at again."""
    pinned = pins()
    for designed in load_expected():
        named = dict(re.findall(r"([a-z-]+) (v[\d.]+)", designed.holds_for))
        assert named, f"{designed.criterion} [{designed.backend}]: holds_for {designed.holds_for!r} names no release"
        for component, version in named.items():
            assert pinned.get(component) == version, (
                f"{designed.criterion} [{designed.backend}] holds for {component} {version}; "
                f"sim/versions.toml pins {pinned.get(component)}")


def test_each_known_change_is_later_than_the_pin_and_names_cells_of_registered_criteria() -> None:
    pinned, criteria = pins(), set(registered())
    changes = load_changes()
    assert changes
    for change in changes:
        assert change.words and change.source, change
        if change.component in pinned:
            later, pin = version_tuple(change.release), version_tuple(pinned[change.component])
            assert later is not None and pin is not None and later > pin, change
        for cell in change.cells:
            criterion = cell.split(" [", 1)[0]
            assert criterion in criteria, f"{change.component} {change.release}: {cell} names no registered criterion"


def test_a_clusters_release_is_its_images_tag_not_a_sidecars_nor_a_registrys_port() -> None:
    cluster = a_record([
        {"name": "kueue-system/kueue-controller-manager",
         "version": "quay.io/brancz/kube-rbac-proxy:v0.16.0, 10.0.0.5:5000/kueue/kueue:v0.10.1@sha256:abc"},
        {"name": "kai-scheduler/kai-scheduler", "version": "10.0.0.5:5000/nvidia/kai-scheduler/scheduler:latest"}])
    assert (running(cluster, "kueue"), running(cluster, "kai-scheduler")) == ("v0.10.1", None)


def test_a_skipped_cell_gets_no_caveat() -> None:
    skipped = a_record([])
    skipped.results[0].outcome = "SKIP"
    assert caveats(skipped, [CHANGE]) == {}

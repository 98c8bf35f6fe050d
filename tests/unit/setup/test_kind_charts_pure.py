"""Pure parts of the kind checks: which charts at which pins, helm's arguments, splitting rendered objects;
the helm and actionlint build recipes."""

from __future__ import annotations

from pathlib import Path

import yaml

from harness.setup import kind_charts as charts
from harness.sim import build
from harness.config.versions import load_pins


def test_charts_are_taken_at_the_sims_pins() -> None:
    pins = load_pins()
    sources = {s.name: s for s in charts.chart_sources(pins)}
    assert (sources["kueue"].version, sources["volcano"].version, sources["kai-scheduler"].version,
            sources["kube-state-metrics"].version) == (pins.kueue, pins.volcano, pins.kai_scheduler,
                                                       pins.kube_state_metrics)
    assert sources["kai-scheduler"].module == pins.kai_scheduler_module
    assert [n.name for n in charts.not_rendered(pins)] == ["kuberay"]


def test_helm_template_args_pin_the_kubernetes_version_and_include_crds() -> None:
    source = charts.ChartSource("volcano", "volcano.sh/volcano", "v1.14.1", "installer/helm/chart/volcano",
                                charts.HELM, "volcano-system", (("basic.image_tag_version", "v1.14.1"),))
    args = charts.helm_template_args(source, Path("/m/chart"), "v1.36.3", Path("/v/volcano-values.yaml"))
    assert args[:3] == ["template", "volcano", "/m/chart"]
    assert args[args.index("--namespace") + 1] == "volcano-system"
    assert args[args.index("--kube-version") + 1] == "v1.36.3"
    assert "--include-crds" in args
    assert args[-4:] == ["--set", "basic.image_tag_version=v1.14.1", "--values", "/v/volcano-values.yaml"]


def test_reference_values_give_the_charts_the_sims_scheduler_configuration() -> None:
    """Volcano's chart runs the sim's actions (preempt and reclaim); Kueue's keeps its own configuration file with
    the reference settings kind takes so far laid over it (the per-queue resource metrics)."""
    from harness.config.reference_schedulers import VOLCANO_SCHEDULER_CONF
    volcano = charts.reference_values("volcano", {})
    assert volcano == {"custom": {"scheduler_config_override": VOLCANO_SCHEDULER_CONF}}
    shipped = ("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nhealth:\n  healthProbeBindAddress: :8081\n"
               "metrics:\n  bindAddress: :8443\n")
    kueue = charts.reference_values("kueue", {"managerConfig": {"controllerManagerConfigYaml": shipped}})
    config = yaml.safe_load(kueue["managerConfig"]["controllerManagerConfigYaml"])
    assert config["health"] == {"healthProbeBindAddress": ":8081"}
    assert config["metrics"] == {"bindAddress": ":8443", "enableClusterQueueResources": True}
    assert "fairSharing" not in config  # kind: not yet (harness/config/reference_schedulers.py)
    assert charts.reference_values("kai-scheduler", {}) == {}


def test_split_documents_drops_empty_documents_and_flattens_lists() -> None:
    text = ("---\n# only a comment\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\n---\n"
            "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n")
    assert [charts.describe(o) for o in charts.split_documents(text)] == ["ServiceAccount a", "ConfigMap b"]


def test_namespaces_needed_leave_out_the_ones_the_chart_creates() -> None:
    objects = [{"kind": "Namespace", "metadata": {"name": "kai-resource-reservation"}},
               {"kind": "ServiceAccount", "metadata": {"name": "a", "namespace": "kai-resource-reservation"}},
               {"kind": "Deployment", "metadata": {"name": "b"}},
               {"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "monitoring"}}]
    assert charts.namespaces_needed(objects, "kai-scheduler") == {"kai-scheduler", "monitoring"}


def test_namespace_of_cluster_scoped_objects_is_none() -> None:
    obj = {"kind": "ClusterRole", "metadata": {"name": "r"}}
    assert charts.namespace_of(obj, "kueue-system", namespaced=False) is None
    assert charts.namespace_of(obj, "kueue-system", namespaced=True) == "kueue-system"


def test_manifest_files_skip_the_kustomization(tmp_path: Path) -> None:
    for name in ("kustomization.yaml", "service.yaml", "deployment.yaml", "README.md"):
        (tmp_path / name).write_text("")
    assert [p.name for p in charts.manifest_files(tmp_path)] == ["deployment.yaml", "service.yaml"]


def test_dry_run_says_what_was_not_checked() -> None:
    outcome = charts.DryRun(unknown_kinds={"ServiceMonitor (monitoring.coreos.com/v1)"}, unnamed=["Job x/<no name>"])
    assert outcome.not_checked() == ("kinds the sim does not serve: ServiceMonitor (monitoring.coreos.com/v1); "
                                     "objects without a name (generateName): Job x/<no name>")
    assert charts.DryRun().not_checked() == ""


def test_helm_and_actionlint_are_optional_recipes_at_their_pins() -> None:
    pins = load_pins()
    recipes = {r.name: r for r in build.recipes(pins, Path("/dev/null"))}
    assert (recipes["helm"].version, recipes["actionlint"].version) == (pins.helm, pins.actionlint)
    assert recipes["helm"].optional and recipes["actionlint"].optional
    defaults = [r.name for r in build.selected(list(recipes.values()), (), ())]
    assert "helm" not in defaults and "actionlint" not in defaults
    chosen = [r.name for r in build.selected(list(recipes.values()), (), ("helm", "actionlint"))]
    assert "helm" in chosen and "actionlint" in chosen


def test_helm_ldflags_stamp_its_version_and_default_kubernetes_version() -> None:
    flags = build.helm_ldflags("v3.21.4", "v1.36.3")
    assert "-X helm.sh/helm/v3/internal/version.version=v3.21.4" in flags
    assert "-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=36" in flags
    assert "-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1" in flags

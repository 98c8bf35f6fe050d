"""kind/up.sh's charts: each renders at its pinned version and the sim's real API server accepts every rendered
object in a server-side dry run (dryRun=All: admission and schema validation run, nothing is stored).

Objects of kinds the sim does not serve (a CRD it does not install) are listed as not checked, by kind, in a
warning; a chart that should render and does not is a FAIL, as is an object the API server refuses.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator

import pytest
from kubernetes import client

from harness.setup import kind_charts as charts
from harness.cluster.cleanup import delete_namespace
from harness.config.options import RunConfig
from harness.core.errors import BuildError, ConfigError
from harness.cluster.manifests import MANAGED_LABEL, MANAGER, RUN_LABEL
from harness.config.versions import load_pins

pytestmark = pytest.mark.sim

PINS = load_pins()
SOURCES = {source.name: source for source in charts.chart_sources(PINS)}
NOT_RENDERED = {item.name: item.reason for item in charts.not_rendered(PINS)}


@pytest.fixture(scope="module")
def chart_namespaces(sim_api: client.ApiClient, gpupoc_config: RunConfig) -> Iterator[Callable[[set[str]], None]]:
    """Creates the namespaces a dry run needs that the sim lacks (labelled as gpupoc's); deletes them after."""
    core, created = client.CoreV1Api(sim_api), []

    def ensure(names: set[str]) -> None:
        existing = {ns.metadata.name for ns in core.list_namespace().items}
        for name in sorted(names - existing):
            core.create_namespace({"metadata": {"name": name, "labels": {
                MANAGED_LABEL: MANAGER, RUN_LABEL: gpupoc_config.run_id}}})
            created.append(name)

    yield ensure
    leftovers = [line for name in created
                 if (line := delete_namespace(core, name, gpupoc_config.profile.timeouts.cleanup))]
    assert not leftovers, "; ".join(leftovers)


def rendered(source: charts.ChartSource) -> list[dict[str, object]]:
    try:
        return charts.render(source, PINS.kubernetes)
    except ConfigError as exc:  # helm not built: nothing rendered, so nothing judged
        pytest.skip(f"{source.name}: not checked: {exc}")
    except BuildError as exc:
        pytest.fail(f"{source.name} {source.version} should render and did not: {exc}")


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_chart_renders_and_the_api_server_accepts_every_object(
        name: str, sim_api: client.ApiClient, chart_namespaces: Callable[[set[str]], None]) -> None:
    source = SOURCES[name]
    objects = rendered(source)
    assert objects, f"{name} {source.version}: {source.path} rendered no objects"
    chart_namespaces(charts.namespaces_needed(objects, source.namespace))
    outcome = charts.dry_run_apply(sim_api, objects, source.namespace)
    print(f"{name} {source.version}: {len(outcome.accepted)} of {len(objects)} objects accepted "
          f"({len(outcome.replaced)} on the sim already, checked as a replace)")
    if outcome.not_checked():
        warnings.warn(f"{name} {source.version}: not checked: {outcome.not_checked()}", stacklevel=1)
    assert not outcome.refused, f"{name} {source.version}: the API server refused " + "; ".join(outcome.refused)
    assert outcome.accepted, f"{name} {source.version}: no object was checked ({outcome.not_checked()})"


@pytest.mark.parametrize("name", sorted(NOT_RENDERED))
def test_component_without_a_chart_here(name: str) -> None:
    pytest.skip(f"{name}: not checked: {NOT_RENDERED[name]}")


def test_the_dry_run_judges_and_stores_nothing(sim_api: client.ApiClient) -> None:
    """Sensitivity: an invalid object is refused with the server's reason; a valid one is accepted, not created."""
    name = "gpupoc-dry-run-probe"
    broken = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
              "spec": {"selector": {"matchLabels": {"app": name}}, "template": {
                  "metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "no-image"}]}}}}
    valid = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}
    outcome = charts.dry_run_apply(sim_api, [broken, valid], "kube-system")
    assert [line.split(":")[0] for line in outcome.refused] == [f"Deployment {name}"]
    assert "image: Required value" in outcome.refused[0]
    assert outcome.accepted == [f"ConfigMap {name}"]
    with pytest.raises(client.ApiException) as gone:
        client.CoreV1Api(sim_api).read_namespaced_config_map(name, "kube-system")
    assert gone.value.status == 404

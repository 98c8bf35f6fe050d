"""Fixtures shared by the suites and the project's tests: the cluster and a namespace per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client

from harness.sim import cluster
from harness.sim.config import SimConfig

RUN_ID = uuid.uuid4().hex[:8]
RUN_LABEL = "gpupoc.io/run-id"
TEST_LABEL = "gpupoc.io/test"
NAMESPACE_DELETE_TIMEOUT_S = 60


@pytest.fixture(scope="session")
def sim_api() -> Iterator[client.ApiClient]:
    """An API client for the running sim; starts it (and stops it afterwards) when it is not up."""
    started_here = cluster.up(SimConfig()) if not cluster.is_up() else False
    api = cluster.api_client()
    yield api
    api.close()
    if started_here:
        cluster.down()


@pytest.fixture()
def core(sim_api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(sim_api)


@pytest.fixture()
def namespace(core: client.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[str]:
    """A labelled namespace for this test, deleted at teardown without waiting."""
    name = f"t-{RUN_ID}-{uuid.uuid4().hex[:6]}"
    test = request.node.name[:63].strip("-_.[]").replace("[", "-").replace("]", "")
    core.create_namespace({"metadata": {"name": name, "labels": {RUN_LABEL: RUN_ID, TEST_LABEL: test[:63]}}})
    yield name
    try:
        core.delete_namespace(name, propagation_policy="Background")
    except client.ApiException as exc:
        if exc.status != 404:
            raise

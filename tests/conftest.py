"""Fixtures of the project's own tests: the integration tests run against the sim."""

from __future__ import annotations

import pytest
from kubernetes import client

from harness.targets.target import Target


@pytest.fixture(scope="session")
def sim_api(target: Target) -> client.ApiClient:
    """The sim's API; these tests exercise the sim itself, so another target is a usage error."""
    if target.kind != "sim":
        pytest.fail(f"the project's integration tests run against the sim, not {target.kind} {target.context}")
    return target.api


@pytest.fixture()
def core(sim_api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(sim_api)

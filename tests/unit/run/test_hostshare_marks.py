"""Which cases run alone on a shared host: the quiet mark, for every backend or for those it names."""

from __future__ import annotations

import pytest

from harness.run import hostshare


@pytest.mark.quiet(backends=("kuberay",))
@pytest.mark.parametrize("backend", ["kuberay", "kueue"])
def test_a_case_quiet_on_one_backend_runs_alone_there_only(request: pytest.FixtureRequest, backend: str) -> None:
    assert hostshare.is_quiet(request.node) == (backend == "kuberay")


@pytest.mark.quiet
@pytest.mark.parametrize("backend", ["kuberay", "kueue"])
def test_a_case_quiet_everywhere_runs_alone_on_each_backend(request: pytest.FixtureRequest, backend: str) -> None:
    assert hostshare.is_quiet(request.node)


def test_an_unmarked_case_shares_the_host(request: pytest.FixtureRequest) -> None:
    assert not hostshare.is_quiet(request.node)

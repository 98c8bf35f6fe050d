"""The parts of `gpupoc run --side-by-side` (harness/cli/side_by_side.py): what a spec means, what it refuses."""

from __future__ import annotations

import pytest

from harness import backends as backend_registry
from harness.cli.side_by_side import DEFAULT_PARTS, PART_PORT_BASES, exit_code, plan
from harness.core.errors import ConfigError


def test_the_default_parts_cover_every_backend_once_each_with_its_own_ports() -> None:
    parts = plan(DEFAULT_PARTS, "poc-20261203-120000")
    assert sorted(b for p in parts for b in p.backends) == sorted(backend_registry.ALL)
    pair = next(p for p in parts if "kueue-volcano" in p.backends)  # Kueue in front of Volcano: both run there
    assert (pair.name, pair.schedulers) == ("volcano-kueue", "volcano,kueue")
    assert plan("kuberay", "r")[0].schedulers == "kueue,kuberay"  # Kueue queues its RayJobs
    assert len({p.port_base for p in parts}) == len(parts) and all(b + 700 < 29000 for b in PART_PORT_BASES)
    slurm = next(p for p in parts if "slurm" in p.backends)
    assert slurm.schedulers == "slurm" and slurm.run_id == "poc-20261203-120000-slurm-default"
    assert plan("kueue,default", "r")[1].schedulers == "none" == plan("kube-gang", "r")[0].schedulers
    assert [p.schedulers for p in plan("kueue,default", "r", ("karpenter",))] == ["kueue,karpenter", "karpenter"]
    env = slurm.env()
    assert env["GPUPOC_HOME"].endswith("parts/slurm-default") and env["GPUPOC_SIM_PORT_BASE"] == str(slurm.port_base)


@pytest.mark.parametrize(("spec", "says"), [
    ("kueue+ray", r"unknown backend\(s\) ray"),
    ("kueue,volcano+kueue", "kueue in more than one part"),
    ("kueue+volcano,kueue-volcano", "two parts would share the name kueue-volcano"),
    (",".join(["kueue", "volcano", "kuberay", "kai", "default", "slurm", "kueue"]), "kueue in more than one part"),
])
def test_a_bad_spec_is_one_line(spec: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        plan(spec, "r")


def test_a_run_id_too_long_for_its_parts_is_refused() -> None:
    with pytest.raises(ConfigError, match="over 40 characters"):
        plan("kueue+kuberay", "a" * 30)


def test_the_run_exits_as_its_worst_part_and_a_killed_or_missing_part_broke_it() -> None:
    parts = plan("kueue,volcano", "r")
    assert exit_code({"kueue": 0, "volcano": 1}, parts) == 1  # a missed threshold is a result
    assert exit_code({"kueue": 0, "volcano": 137}, parts) == 137  # killed (128 + SIGKILL): broken
    assert exit_code({"kueue": 0}, parts) == 2  # no code at all: broken
    assert exit_code({"kueue": 4, "volcano": 1}, parts) == 2  # pytest's usage error is the CLI's

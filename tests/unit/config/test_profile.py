"""POC profile validation: the reference profiles load; every malformed field is named."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.core.errors import ConfigError
from harness.config.profile import criteria_thresholds, load_profile, parse_profile
from harness.core.paths import REPO_ROOT

SIM = REPO_ROOT / "profiles" / "sim.yaml"


@pytest.fixture()
def data() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(SIM.read_text())
    return loaded


@pytest.mark.parametrize("path", ["sim.yaml", "kind.yaml"])
def test_reference_profiles_are_valid_and_cover_every_criterion(path: str) -> None:
    profile = load_profile(REPO_ROOT / "profiles" / path)
    assert set(profile.thresholds) == set(criteria_thresholds())
    assert abs(sum(profile.expected_shares().values()) - 1) < 1e-9


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["thresholds"].pop("training.gang_admission"), "thresholds.training.gang_admission: missing"),
    (lambda d: d["thresholds"]["training.queue_fairness"].update(min_jain=1), "min_jain: unknown field"),
    (lambda d: d["thresholds"]["training.queue_wait"].update(p95_s="fast"), "p95_s: must be a number"),
    (lambda d: d["thresholds"].update({"training.checkpointing": {"save_within_s": 5}}),
     "training.checkpointing: unknown field"),
    (lambda d: d["scale"].update(jobs=0), "scale.jobs: must be greater than 0"),
    (lambda d: d["scale"].update(pods=5), "scale.pods: unknown field"),
    (lambda d: d.update(submit_as="root"), "submit_as: must be one of runner, tenant"),
    (lambda d: d["tenants"][1].update(weight=0), "tenants[1].weight: must be greater than 0"),
    (lambda d: d["tenants"][1].update(limit_gpus=4), "tenants[1].limit_gpus: must be at least quota_gpus"),
    (lambda d: d["tenants"][1].update(limit_gpus="lots"), "tenants[1].limit_gpus: must be a number"),
    (lambda d: d["tenants"][0]["queues"].update(lsf="q"), "tenants[0].queues.lsf: unknown field"),
    (lambda d: d["tenants"][1].update(name="team-a"), "tenant names must be unique"),
    (lambda d: d["timeouts"].update(admit=-5), "timeouts.admit: must be greater than 0 seconds"),
    (lambda d: d["timeouts"].update(forever=5), "timeouts.forever: unknown field"),
    (lambda d: d["gpu"]["job_sizes"].update(small=0), "gpu.job_sizes.small: must be at least 1 GPU"),
    (lambda d: d.update(tenants=[]), "tenants: needs at least one tenant"),
    (lambda d: d["gpu"].update(models={"NVIDIA-L40S": {"team-a": 4}}),
     "gpu.models.NVIDIA-L40S: a quota per model needs two models or more"),
    (lambda d: d["gpu"].update(models={"NVIDIA-L40S": {"team-z": 4}, "NVIDIA-H100": {"team-a": 1}}),
     "gpu.models.NVIDIA-L40S.team-z: not a tenant"),
    (lambda d: d["gpu"].update(models={"NVIDIA-L40S": {"team-a": -1}, "NVIDIA-H100": {"team-a": 1}}),
     "gpu.models.NVIDIA-L40S.team-a: must be 0 GPUs or more"),
])
def test_malformed_profile_names_the_field(data: dict[str, Any], mutate: Any, message: str) -> None:
    broken = copy.deepcopy(data)
    mutate(broken)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_profile(broken, "p.yaml")


def test_profile_that_is_not_yaml_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("name: x\ntenants: [\n  - {name: a\n")
    with pytest.raises(ConfigError, match=r"p.yaml: line \d+: not valid YAML"):
        load_profile(path)

"""What the run keeps on the pytest config and items: the stash keys, and the run's configuration."""

from __future__ import annotations


import pytest

from harness.run import headstart
from harness.core import hostload
from harness.config.options import RunConfig
from harness.criteria.governance.audit import Submitted
from harness.criteria.governance.cost_attribution import Held
from harness.run.environment import EnvironmentWatch
from harness.record.evidence import Evidence
from harness.cluster.runlock import RunLock
from harness.targets.target import Target



CONFIG_KEY = pytest.StashKey[RunConfig]()


TARGET_KEY = pytest.StashKey[Target]()


WATCH_KEY = pytest.StashKey[EnvironmentWatch]()


LOCK_KEY = pytest.StashKey[RunLock]()


SETUP_START_KEY = pytest.StashKey[float]()


LOAD_KEY = pytest.StashKey[hostload.Snapshot]()  # the host's CPU counters when the case's set-up ended


DISRUPTED_KEY = pytest.StashKey[set[str]]()


SUBMITTED_KEY = pytest.StashKey[list[Submitted]]()


HELD_KEY = pytest.StashKey[list[Held]]()
RESERVED_KEY = pytest.StashKey[list[Held]]()  # quota a queue reserved for a job while admitted (Kueue's Workloads)


HEAD_STARTS_KEY = pytest.StashKey[dict[str, headstart.HeadStart]]()


LATE_KEY = pytest.StashKey[set[str]]()


def run_config(config: pytest.Config) -> RunConfig:
    return config.stash[CONFIG_KEY]


EVIDENCE_KEY = pytest.StashKey[list[Evidence]]()


CALL_REPORT_KEY = pytest.StashKey[pytest.TestReport]()

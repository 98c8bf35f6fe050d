"""Acceptance criteria as units: one module per criterion, found from its id.

`training.queue_wait` lives in `harness/criteria/training/queue_wait.py`. Each module registers a
`Criterion` (statement, thresholds with unit and direction, charts) and holds the criterion's pure
measurement: timelines and samples in, numbers out. The suite module sets up the scenario, hands
the criterion its facts and records the checks through `Evidence`. The profile and the record know
only registered criteria, so no threshold is listed as if a test covered it.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass

from harness.core.errors import ConfigError

AT_MOST, AT_LEAST = "<=", ">="


@dataclass(frozen=True)
class Threshold:
    name: str          # the key in the profile, e.g. "p95_s"
    meaning: str
    direction: str     # AT_MOST: the measured value must be <= the threshold; AT_LEAST: >=
    unit: str = ""


@dataclass(frozen=True)
class Chart:
    key: str           # the Evidence.series entry it draws
    title: str
    ylabel: str
    xlabel: str = "seconds"
    style: str = "steps"  # "steps": a value held until the next; "points": measured points joined by lines


@dataclass(frozen=True)
class Criterion:
    id: str            # suite.name, e.g. "training.queue_wait"
    statement: str     # the criterion in words (ACCEPTANCE.md)
    thresholds: tuple[Threshold, ...]
    charts: tuple[Chart, ...] = ()

    def threshold(self, name: str) -> Threshold:
        for threshold in self.thresholds:
            if threshold.name == name:
                return threshold
        raise ConfigError(f"criterion {self.id} has no threshold {name!r}; it has "
                          f"{', '.join(t.name for t in self.thresholds)}")


_REGISTRY: dict[str, Criterion] = {}


def register(criterion: Criterion) -> Criterion:
    """Called by each criterion module at import: the one place that makes a criterion known."""
    if criterion.id in _REGISTRY and _REGISTRY[criterion.id] != criterion:
        raise ConfigError(f"criterion {criterion.id} is registered twice")
    _REGISTRY[criterion.id] = criterion
    return criterion


def registered() -> dict[str, Criterion]:
    """Every implemented criterion, by id (imports each criterion module once)."""
    for suite in pkgutil.iter_modules(__path__):
        if suite.ispkg:
            package = importlib.import_module(f"{__name__}.{suite.name}")
            for module in pkgutil.iter_modules(package.__path__):
                importlib.import_module(f"{package.__name__}.{module.name}")
    return dict(sorted(_REGISTRY.items()))


def get(criterion_id: str) -> Criterion:
    found = registered().get(criterion_id)
    if found is None:
        raise ConfigError(f"no criterion {criterion_id!r}; implemented: {', '.join(registered())}")
    return found

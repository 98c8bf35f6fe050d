"""What a test's outcome means, the same in every criterion.

    PASS   every check met its threshold (checks that could not be made are listed as not checked)
    FAIL   a measured value beyond its threshold, or an invariant violated (CriterionViolation, assert)
    INCONCLUSIVE  a measured interval straddles its threshold after every run the profile allows (Inconclusive):
           neither passed nor failed
    ERROR  the environment or the harness broke: an API or transport error of the runner's own
           requests, a profile gap, a harness timeout, a bug of the harness
    SKIP   a backend or capability is absent, with the reason

The outcomes the reference sim is designed to produce (the baselines that must FAIL) are data, in
`suites/expected.yaml`, read by the tests, `make poc` and the benches.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import urllib3
import yaml
from kubernetes.client.exceptions import ApiException

from harness.core.errors import ConfigError, CriterionViolation, HarnessError, Inconclusive
from harness.core.paths import EXPECTED_FILE, RELEASES_FILE
from harness.record.caveats import Change

PASS, FAIL, ERROR, SKIP, INCONCLUSIVE = "PASS", "FAIL", "ERROR", "SKIP", "INCONCLUSIVE"


def classify(exc: BaseException) -> str:
    """Pure: the outcome of a test that raised `exc` in its call phase."""
    if isinstance(exc, CriterionViolation):
        return FAIL
    if isinstance(exc, Inconclusive):
        return INCONCLUSIVE
    if isinstance(exc, (HarnessError, ApiException, urllib3.exceptions.HTTPError, OSError)):
        return ERROR
    if isinstance(exc, AssertionError):
        return FAIL
    return ERROR  # anything else is a bug of the harness, not a verdict on the cluster


@dataclass(frozen=True)
class DesignedOutcome:
    criterion: str
    backend: str
    outcome: str
    why: str
    holds_for: str  # the releases it is a fact of: "kai-scheduler v0.12.0" (sim/versions.toml's names)
    race: str = ""  # a race of the components themselves that lets the same cluster PASS too: either is as designed


def load_expected(path: Path = EXPECTED_FILE) -> list[DesignedOutcome]:
    """The outcomes other than PASS/SKIP the reference sim is designed to produce."""
    entries = yaml.safe_load(path.read_text()) or []
    try:
        found = [DesignedOutcome(e["criterion"], e["backend"], e["outcome"], e["why"], e["holds_for"],
                                 " ".join(str(e.get("race") or "").split())) for e in entries]
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: each entry needs criterion, backend, outcome, why and holds_for ({exc})") from exc
    bad = [d for d in found if d.outcome not in (FAIL, ERROR)]
    if bad:
        raise ConfigError(f"{path}: outcome of {bad[0].criterion} [{bad[0].backend}] must be FAIL or ERROR")
    return found


def load_changes(path: Path = RELEASES_FILE) -> list[Change]:
    """The later upstream releases known to change a verdict (harness/record/caveats.py)."""
    entries = yaml.safe_load(path.read_text()) or []
    try:
        return [Change(e["component"], e["release"], tuple(e["cells"]), " ".join(e["words"].split()), e["source"])
                for e in entries]
    except (KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{path}: each entry needs component, release, cells, words and source ({exc})") from exc


def unexpected(results: list[tuple[str, str, str]], designed: list[DesignedOutcome]) -> list[str]:
    """Pure: (criterion, backend, outcome) results that differ from the design: a FAIL/ERROR not designed,
    or a designed FAIL that did not happen (SKIP aside: an absent backend proves nothing either way; INCONCLUSIVE
    aside: not decided either way, listed apart by `undecided`; a PASS where a known race lets it: `raced`)."""
    wanted = {(d.criterion, d.backend): d.outcome for d in designed}
    won_races = raced_cells(results, designed)
    problems = []
    for criterion, backend, outcome in results:
        expected = wanted.get((criterion, backend))
        if outcome in (SKIP, INCONCLUSIVE) or (criterion, backend, outcome) in won_races:
            continue
        if expected is None and outcome in (FAIL, ERROR):
            problems.append(f"{criterion} [{backend}]: {outcome}, designed to pass")
        elif expected is not None and outcome != expected:
            problems.append(f"{criterion} [{backend}]: {outcome}, designed to {expected}")
    return problems


def raced_cells(results: list[tuple[str, str, str]], designed: list[DesignedOutcome]) -> set[tuple[str, str, str]]:
    """Pure: the results that PASSed where the design is a FAIL that a race of the components decides (the same
    cluster gives either outcome from run to run: the race itself is the finding, in the designed outcome's `race`)."""
    racy = {(d.criterion, d.backend) for d in designed if d.race and d.outcome == FAIL}
    return {r for r in results if r[:2] in racy and r[2] == PASS}


def raced(results: list[tuple[str, str, str]], designed: list[DesignedOutcome]) -> list[str]:
    """Pure: each raced result named with its race."""
    race = {(d.criterion, d.backend): d.race for d in designed}
    return [f"{c} [{b}]: PASS this run, a designed FAIL that a race decides: {race[(c, b)]}"
            for c, b, _ in sorted(raced_cells(results, designed))]


MAX_UNDECIDED_SHARE = 0.02  # of a run's cells: more undecided than this, and the run itself did not decide


def undecided(results: list[tuple[str, str, str]]) -> list[str]:
    """Pure: the cells that ended INCONCLUSIVE, each named."""
    return [f"{criterion} [{backend}]" for criterion, backend, outcome in results if outcome == INCONCLUSIVE]

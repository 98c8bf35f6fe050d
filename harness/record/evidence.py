"""What one test measured, against which thresholds, and what it saw: the data behind a matrix cell."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.criteria import Criterion
from harness.core import estimate as est
from harness.core.errors import CriterionViolation, Inconclusive
from harness.core.estimate import Estimate

COMPARISONS = ("<=", ">=")
SECONDS = " s"  # the unit of durations: a bare number in seconds is a one-shot duration (estimate.duration)


@dataclass(frozen=True)
class Check:
    name: str         # threshold name in the profile, e.g. "all_bound_within_s"
    measured: float | None
    threshold: float
    comparison: str   # "<=" or ">="
    unit: str = ""
    not_checked: str = ""  # why this check could not be made on this backend (then it is neither PASS nor FAIL)
    low: float | None = None   # the interval the measured value lies in (estimate.py); None: as measured
    high: float | None = None
    how: str = ""              # how the interval was made
    runs: int = 1              # runs of the case pooled into it
    estimate: Estimate | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, name: str, measured: float | Estimate | None, threshold: float, comparison: str, unit: str = "",
           not_checked: str = "") -> Check:
        if comparison not in COMPARISONS:
            raise ValueError(f"unknown comparison {comparison!r}")
        if not isinstance(measured, Estimate):  # exact (a count), or nothing measured
            value = None if measured is None else float(measured)
            return cls(name, value, threshold, comparison, unit, not_checked, value, value)
        return cls(name, measured.value, threshold, comparison, unit, not_checked, measured.low, measured.high,
                   measured.how, measured.runs, measured)

    @property
    def interval(self) -> Estimate | None:
        if self.estimate is not None:
            return self.estimate
        return None if self.measured is None else est.exact(self.measured)

    @property
    def verdict(self) -> str:
        """NOT CHECKED, or PASS / FAIL / INCONCLUSIVE from the whole interval against the threshold."""
        if self.not_checked:
            return "NOT CHECKED"
        interval = self.interval
        return est.FAIL if interval is None else est.decide(interval, self.threshold, self.comparison)

    @property
    def passed(self) -> bool:
        return self.verdict == est.PASS

    def describe(self) -> str:
        if self.not_checked:
            return f"{self.name}: not checked ({self.not_checked})"
        interval = self.interval
        measured = "nothing measured" if interval is None else interval.describe(self.unit)
        runs = f", {self.runs} runs" if self.runs > 1 else ""
        return f"{self.name}: {measured} (wanted {self.comparison} {self.threshold:g}{self.unit}{runs})"

    def pooled(self, before: Check) -> Check:
        """This check with the samples of the same check of an earlier run of the case (estimate.pool)."""
        if self.estimate is None or before.estimate is None:
            return self
        return Check.of(self.name, est.pool(before.estimate, self.estimate), self.threshold, self.comparison,
                        self.unit, self.not_checked)


@dataclass
class Evidence:
    criterion: str                  # e.g. "training.gang_admission"
    backend: str
    statement: str = ""             # the criterion in words
    thresholds: dict[str, float] = field(default_factory=dict)    # this criterion's, from the profile
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    series: dict[str, dict[str, list[tuple[float, float]]]] = field(default_factory=dict)  # chart key -> lines
    charts: list[dict[str, str]] = field(default_factory=list)     # the criterion's chart specs
    timeline: list[dict[str, Any]] = field(default_factory=list)
    promql: list[tuple[str, str]] = field(default_factory=list)  # (query, answer)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # title -> rows (column -> value)
    diagnostics: list[str] = field(default_factory=list)         # events and logs on failure
    leftovers: list[str] = field(default_factory=list)
    host: dict[str, Any] = field(default_factory=dict)  # the harness's observation lag and the host's CPU load
    _spec: Criterion | None = field(default=None, repr=False, compare=False)
    _before: list[Check] = field(default_factory=list, repr=False, compare=False)  # earlier runs' checks (pooled)
    _lag_probe: Callable[[], float | None] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, spec: Criterion, backend: str, thresholds: dict[str, float], before: list[Check] | None = None,
           lag_probe: Callable[[], float | None] | None = None) -> Evidence:
        return cls(spec.id, backend, spec.statement, dict(thresholds),
                   charts=[{"key": c.key, "title": c.title, "ylabel": c.ylabel, "xlabel": c.xlabel, "style": c.style}
                           for c in spec.charts], _spec=spec, _before=list(before or []), _lag_probe=lag_probe)

    def expect(self, name: str, measured: float | Estimate | None, label: str = "") -> Check:
        """Record a measurement against the profile's threshold `name` (direction and unit from the criterion);
        `verdict()` decides from its interval. A bare number is exact, except a duration in seconds: a one-shot
        duration that the harness's observation lag in this case may have lengthened (estimate.duration).
        `label` tells apart checks of one threshold (per queue)."""
        return self._add(name, measured, label)

    def not_checked(self, name: str, reason: str, label: str = "") -> Check:
        """A sub-check this backend cannot give the facts for: shown as not checked, never as passed."""
        return self._add(name, None, label, reason)

    def _add(self, name: str, measured: float | Estimate | None, label: str, not_checked: str = "") -> Check:
        if self._spec is None:
            raise ValueError(f"evidence of {self.criterion} was not made from its criterion (Evidence.of)")
        spec = self._spec.threshold(name)
        if isinstance(measured, (int, float)) and spec.unit == SECONDS and not not_checked:
            measured = est.duration(float(measured), resolution_s=0.0, lag_s=self.lag_s())
        check = Check.of(f"{name}[{label}]" if label else name, measured, self.thresholds[name], spec.direction,
                         spec.unit, not_checked)
        self.checks.append(check)
        return check

    def note(self, text: str) -> None:
        self.notes.append(text)

    @property
    def unchecked(self) -> list[Check]:
        return [c for c in self.checks if c.not_checked]

    def lag_s(self) -> float:
        """The harness's observation lag measured in this case so far (0 where no probe runs: unit tests)."""
        if self._lag_probe is not None and "observation_lag_s" not in self.host:
            measured = self._lag_probe()
            if measured is not None:
                self.host["observation_lag_s"] = round(measured, 4)
        return float(self.host.get("observation_lag_s", 0.0))

    def verdict(self) -> None:
        """Decide every check from its interval, pooled with the same check of the case's earlier runs: FAIL
        (CriterionViolation) where any interval misses its threshold whole, else INCONCLUSIVE (Inconclusive) where
        any straddles it; the case may then run again (harness/run/repeat.py)."""
        earlier = {c.name: c for c in self._before}
        self.checks = [c.pooled(earlier[c.name]) if c.name in earlier else c for c in self.checks]
        missed = [c for c in self.checks if c.verdict == est.FAIL]
        undecided = [c for c in self.checks if c.verdict == est.INCONCLUSIVE]
        if not (missed or undecided):
            return
        seen = "; ".join(c.describe() for c in missed or undecided)
        if self.notes:
            seen += " | " + " | ".join(self.notes)
        wanted = ", ".join(f"{c.name} {c.comparison} {c.threshold:g}{c.unit}" for c in missed or undecided)
        if missed:
            raise CriterionViolation(f"{self.criterion} [{self.backend}]", seen, wanted)
        raise Inconclusive(f"{self.criterion} [{self.backend}]", seen, wanted)

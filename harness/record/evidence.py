"""What one test measured, against which thresholds, and what it saw: the data behind a matrix cell."""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

from harness.criteria import Criterion
from harness.core.errors import CriterionViolation

COMPARISONS = {"<=": operator.le, ">=": operator.ge}


@dataclass(frozen=True)
class Check:
    name: str         # threshold name in the profile, e.g. "all_bound_within_s"
    measured: float | None
    threshold: float
    comparison: str   # "<=" or ">="
    unit: str = ""
    not_checked: str = ""  # why this check could not be made on this backend (then it is neither PASS nor FAIL)

    @property
    def passed(self) -> bool:
        return self.measured is not None and COMPARISONS[self.comparison](self.measured, self.threshold)

    @property
    def verdict(self) -> str:
        return "NOT CHECKED" if self.not_checked else ("PASS" if self.passed else "FAIL")

    def describe(self) -> str:
        if self.not_checked:
            return f"{self.name}: not checked ({self.not_checked})"
        measured = "nothing measured" if self.measured is None else f"{self.measured:g}{self.unit}"
        return f"{self.name}: {measured} (wanted {self.comparison} {self.threshold:g}{self.unit})"


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
    _spec: Criterion | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, spec: Criterion, backend: str, thresholds: dict[str, float]) -> Evidence:
        return cls(spec.id, backend, spec.statement, dict(thresholds),
                   charts=[{"key": c.key, "title": c.title, "ylabel": c.ylabel, "xlabel": c.xlabel}
                           for c in spec.charts], _spec=spec)

    def expect(self, name: str, measured: float | None, label: str = "") -> Check:
        """Record a measurement against the profile's threshold `name` (direction and unit from the criterion);
        `verdict()` raises if any missed. `label` tells apart checks of one threshold (per queue)."""
        return self._add(name, measured, label)

    def not_checked(self, name: str, reason: str, label: str = "") -> Check:
        """A sub-check this backend cannot give the facts for: shown as not checked, never as passed."""
        return self._add(name, None, label, reason)

    def _add(self, name: str, measured: float | None, label: str, not_checked: str = "") -> Check:
        if self._spec is None:
            raise ValueError(f"evidence of {self.criterion} was not made from its criterion (Evidence.of)")
        spec = self._spec.threshold(name)
        check = Check(f"{name}[{label}]" if label else name, measured, self.thresholds[name], spec.direction,
                      spec.unit, not_checked)
        self.checks.append(check)
        return check

    def note(self, text: str) -> None:
        self.notes.append(text)

    @property
    def unchecked(self) -> list[Check]:
        return [c for c in self.checks if c.not_checked]

    def verdict(self) -> None:
        """FAIL (CriterionViolation) with every missed threshold and its measured value."""
        missed = [c for c in self.checks if not c.not_checked and not c.passed]
        if missed:
            seen = "; ".join(c.describe() for c in missed)
            if self.notes:
                seen += " | " + " | ".join(self.notes)
            raise CriterionViolation(f"{self.criterion} [{self.backend}]", seen,
                                     ", ".join(f"{c.name} {c.comparison} {c.threshold:g}{c.unit}" for c in missed))

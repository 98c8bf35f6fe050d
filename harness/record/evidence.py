"""What one test measured, against which thresholds, and what it saw: the data behind a matrix cell."""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

from harness.errors import CriterionViolation

COMPARISONS = {"<=": operator.le, ">=": operator.ge}


@dataclass(frozen=True)
class Check:
    name: str         # threshold name in the profile, e.g. "all_bound_within_s"
    measured: float | None
    threshold: float
    comparison: str   # "<=" or ">="
    unit: str = ""

    @property
    def passed(self) -> bool:
        return self.measured is not None and COMPARISONS[self.comparison](self.measured, self.threshold)

    def describe(self) -> str:
        measured = "nothing measured" if self.measured is None else f"{self.measured:g}{self.unit}"
        return f"{self.name}: {measured} (wanted {self.comparison} {self.threshold:g}{self.unit})"


@dataclass
class Evidence:
    criterion: str                  # e.g. "training.gang_admission"
    backend: str
    statement: str = ""             # the criterion in words
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # chart name -> (t, value)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    promql: list[tuple[str, str]] = field(default_factory=list)  # (query, answer)
    diagnostics: list[str] = field(default_factory=list)         # events and logs on failure
    leftovers: list[str] = field(default_factory=list)

    def expect(self, name: str, measured: float | None, threshold: float, comparison: str = "<=",
               unit: str = "") -> Check:
        """Record a measurement against its threshold; `verdict()` raises if any missed."""
        check = Check(name, measured, threshold, comparison, unit)
        self.checks.append(check)
        return check

    def note(self, text: str) -> None:
        self.notes.append(text)

    def verdict(self) -> None:
        """FAIL (CriterionViolation) with every missed threshold and its measured value."""
        missed = [c for c in self.checks if not c.passed]
        if missed:
            seen = "; ".join(c.describe() for c in missed)
            if self.notes:
                seen += " | " + " | ".join(self.notes)
            raise CriterionViolation(f"{self.criterion} [{self.backend}]", seen,
                                     ", ".join(f"{c.name} {c.comparison} {c.threshold:g}{c.unit}" for c in missed))

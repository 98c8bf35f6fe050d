"""Errors of gpupoc.

    GpupocError
    ├── CriterionViolation      a measured value missed its threshold (test FAIL)
    ├── Inconclusive            a measured interval straddles its threshold (test INCONCLUSIVE)
    └── HarnessError            the run itself broke (test ERROR)
        ├── ConfigError         bad flag, profile or environment; exit status 2
        ├── BuildError          a component of the sim did not build
        ├── SimError            the sim could not start, stop or be reached
        └── WaitTimeout         a wait ran out of time; says what it last saw
"""

from __future__ import annotations


class GpupocError(Exception):
    """Root of every error gpupoc raises on purpose."""


class CriterionViolation(GpupocError, AssertionError):
    """A measurement missed its threshold: the criterion FAILS."""

    def __init__(self, criterion: str, measured: object, wanted: str) -> None:
        super().__init__(f"{criterion}: measured {measured}, wanted {wanted}")
        self.criterion = criterion
        self.measured = measured
        self.wanted = wanted


class Inconclusive(GpupocError):
    """A measured interval straddles its threshold, after every run the profile allows: not decided, neither
    passed nor failed."""

    def __init__(self, criterion: str, measured: object, wanted: str) -> None:
        super().__init__(f"{criterion}: not decided: measured {measured}, wanted {wanted}")
        self.criterion = criterion
        self.measured = measured
        self.wanted = wanted


class HarnessError(GpupocError):
    """The environment or the harness broke: the test is an ERROR, not a FAIL."""


class Refused(HarnessError):
    """A job system that is not Kubernetes refused a request as not allowed for its user (Slurm: an account
    the user has no association with, another user's job); Kubernetes answers client.ApiException 403."""


class ConfigError(HarnessError):
    """Invalid input from the user: a flag, a profile field, a missing tool."""


class BuildError(HarnessError):
    """A component of the sim failed to build."""


class SimError(HarnessError):
    """The sim could not be started, stopped or reached."""


class WaitTimeout(HarnessError):
    """A wait ran past its timeout; the message names the object and its last state."""

"""Head starts (harness/run/headstart.py): which backends' cases go last, and a head start's outcome and waits."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import pytest

from harness.backends import ALL
from harness.core.errors import HarnessError
from harness.run.headstart import HeadStart, late_backends, order


@dataclass
class Spec:
    params: dict[str, str]


@dataclass
class Mark:
    args: tuple[Any, ...]


@dataclass
class Item:
    """What headstart reads of a pytest item: its backend parameter and its markers."""

    backend: str
    marked: bool = False
    name: str = ""
    last: bool = False
    skip: bool = False
    callspec: Spec = field(init=False)

    def __post_init__(self) -> None:
        self.callspec = Spec({"backend": self.backend})

    def get_closest_marker(self, name: str) -> Mark | None:
        if name == "head_start" and self.marked:
            return Mark((lambda *_: None, lambda backend, kind: backend.name == "slurm" and kind == "sim"))
        return Mark(()) if (name == "gpupoc_last" and self.last) or (name == "skip" and self.skip) else None

    def iter_markers(self, name: str) -> list[Mark]:
        return []


def late(items: list[Item], kind: str = "sim") -> set[str]:
    return late_backends(items, ALL, kind)  # type: ignore[arg-type]


def test_the_cases_of_a_backend_with_a_head_start_go_last_when_other_cases_run() -> None:
    assert late([Item("kueue", True), Item("slurm", True), Item("kueue"), Item("slurm")]) == {"slurm"}


def test_no_backend_goes_last_when_its_head_start_has_nothing_to_run_beside() -> None:
    assert late([Item("slurm", True), Item("slurm")]) == set()


def test_the_head_started_case_goes_first_of_its_backend_and_the_last_cases_stay_last() -> None:
    items = [Item("slurm", name="quota[slurm]"), Item("kueue", name="quota[kueue]"),
             Item("kueue", True, "fairness[kueue]"), Item("slurm", True, "fairness[slurm]"),
             Item("slurm", name="wait[slurm]"), Item("slurm", name="audit[slurm]", last=True)]
    slow = late(items)
    ordered = sorted(items, key=lambda i: order(i, slow, ALL, "sim"))  # type: ignore[arg-type]
    assert [i.name for i in ordered] == ["quota[kueue]", "fairness[kueue]", "fairness[slurm]", "quota[slurm]",
                                         "wait[slurm]", "audit[slurm]"]


def test_no_backend_goes_last_beside_only_the_cases_that_run_last_or_when_its_case_is_skipped() -> None:
    assert late([Item("slurm", True), Item("kueue", last=True)]) == set()
    assert late([Item("slurm", True, skip=True), Item("kueue")]) == set()


def test_no_head_start_where_the_case_does_not_want_one() -> None:
    assert late([Item("kueue", True), Item("slurm", True), Item("kueue")], kind="kubeconfig") == set()
    assert late([Item("kueue", True), Item("volcano")]) == set()


def started(observe: Any) -> HeadStart:
    return HeadStart("suites/x.py::test_x[slurm]", "slurm", jobs=None).run(  # type: ignore[arg-type]
        lambda *_: observe(), ALL["slurm"], None)  # type: ignore[arg-type]


def test_the_case_takes_what_the_observation_returned() -> None:
    assert started(lambda: 42).outcome(5) == 42


def test_the_observation_s_error_is_raised_in_the_case() -> None:
    def broken() -> None:
        raise HarnessError("slurmrestd unreachable")
    with pytest.raises(HarnessError, match="slurmrestd unreachable"):
        started(broken).outcome(5)


def test_a_wait_that_outlasts_its_timeout_names_the_head_start() -> None:
    release = threading.Event()
    head_start = started(release.wait)
    try:
        with pytest.raises(HarnessError, match=r"head start of suites/x.py::test_x\[slurm\] did not end within 0s"):
            head_start.wait(0.05, "the observation")
        assert not head_start.done
    finally:
        release.set()
    assert head_start.outcome(5) is True

"""Timeouts per operation, in one place; a profile may override any of them."""

from __future__ import annotations

from dataclasses import dataclass

OPERATIONS = ("apply", "admit", "run", "complete", "delete", "cleanup", "scale", "metric", "observe",
              "request", "retry_budget")


@dataclass(frozen=True)
class Timeouts:
    apply: float = 30.0      # an object is accepted by the API server
    admit: float = 120.0     # a workload is admitted / its pods bound
    run: float = 120.0       # admitted pods are Running
    complete: float = 300.0  # a job finishes
    delete: float = 60.0     # an object is gone
    cleanup: float = 120.0   # a test's namespace is gone
    scale: float = 120.0     # a Deployment reaches a new size
    metric: float = 60.0     # a series appears in Prometheus
    observe: float = 10.0    # how long a blocked state is watched to show it holds
    request: float = 20.0    # one API request's read timeout (a frozen API server is an ERROR, never a hang)
    retry_budget: float = 30.0  # how long transient API failures are retried before the test is an ERROR

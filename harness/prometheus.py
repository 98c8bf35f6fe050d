"""The one seam to Prometheus: instant, range and histogram-quantile queries over prometheus-api-client.

An unreachable or refusing Prometheus raises PrometheusUnavailable (a HarnessError): only the
criteria that need Prometheus become ERROR, with this reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
import time
from collections.abc import Callable
from typing import Any, TypeVar

import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException

from harness.errors import HarnessError

QUERY_TIMEOUT_S = 10.0
POLL_S = 1.0  # Prometheus scrapes on its own schedule: there is no event to watch for a sample
T = TypeVar("T")


class PrometheusUnavailable(HarnessError):
    """Prometheus could not be reached or refused the query."""


@dataclass(frozen=True)
class Sample:
    labels: dict[str, str]
    value: float
    at: float  # epoch seconds of the sample


def histogram_quantile_query(q: float, metric: str, by: tuple[str, ...] = (), window: str = "5m") -> str:
    """PromQL for the q-quantile of a histogram's increase over `window`, per `by` labels."""
    group = ", ".join(("le", *by))
    return f"histogram_quantile({q}, sum by ({group}) (increase({metric}_bucket[{window}])))"


def poll(read: Callable[[], T], done: Callable[[T], bool], timeout_s: float, poll_s: float = POLL_S) -> T:
    """Read until `done(reading)` or the timeout; the last reading either way (the caller says what a miss means)."""
    deadline = time.monotonic() + timeout_s
    reading = read()
    while not done(reading) and time.monotonic() < deadline:
        time.sleep(poll_s)
        reading = read()
    return reading


class Prometheus:
    def __init__(self, url: str, timeout_s: float = QUERY_TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        self._client = PrometheusConnect(url=self.url, disable_ssl=True)
        self._timeout = timeout_s

    def _ask(self, promql: str, call: Any, **kwargs: Any) -> Any:
        try:
            return call(promql, params={"timeout": f"{self._timeout:g}s"}, **kwargs)
        except (PrometheusApiClientException, requests.RequestException, ValueError) as exc:
            raise PrometheusUnavailable(f"Prometheus at {self.url} did not answer {promql!r}: {exc}") from exc

    def instant(self, promql: str) -> list[Sample]:
        result = self._ask(promql, self._client.custom_query)
        return [Sample(r["metric"], float(r["value"][1]), float(r["value"][0])) for r in result]

    def range(self, promql: str, start: datetime, end: datetime, step_s: float) -> list[tuple[dict[str, str],
                                                                                             list[tuple[float, float]]]]:
        result = self._ask(promql, self._client.custom_query_range, start_time=start, end_time=end,
                           step=f"{step_s:g}s")
        return [(r["metric"], [(float(t), float(v)) for t, v in r["values"]]) for r in result]

    def histogram_quantile(self, q: float, metric: str, by: tuple[str, ...] = (), window: str = "5m") -> list[Sample]:
        return self.instant(histogram_quantile_query(q, metric, by, window))

    def histogram_buckets(self, metric: str, by: str = "", scale: float = 1.0) -> tuple[dict[str, dict[float, float]],
                                                                                     float]:
        """A histogram's cumulative buckets per `by` label value ('all' without one), bounds times `scale`, and
        the time of its latest scrape (0 when it has no series yet)."""
        found: dict[str, dict[float, float]] = {}
        for sample in self.instant(f"sum by (le{', ' + by if by else ''}) ({metric}_bucket)"):
            le = float(sample.labels["le"]) * scale  # inf * scale stays inf
            found.setdefault(sample.labels.get(by, "all") if by else "all", {})[le] = sample.value
        stamps = self.instant(f"max(timestamp({metric}_count))")
        return found, (stamps[0].value if stamps else 0.0)

    def reachable_reason(self) -> str | None:
        """None when Prometheus answers a trivial query, else why not."""
        try:
            self.instant("vector(1)")
        except PrometheusUnavailable as exc:
            return str(exc)
        return None

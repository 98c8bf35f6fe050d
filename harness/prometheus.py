"""The one seam to Prometheus: instant, range and histogram-quantile queries over prometheus-api-client.

An unreachable or refusing Prometheus raises PrometheusUnavailable (a HarnessError): only the
criteria that need Prometheus become ERROR, with this reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException

from harness.errors import HarnessError

QUERY_TIMEOUT_S = 10.0


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

    def reachable_reason(self) -> str | None:
        """None when Prometheus answers a trivial query, else why not."""
        try:
            self.instant("vector(1)")
        except PrometheusUnavailable as exc:
            return str(exc)
        return None

"""The one seam to Prometheus: instant, range and histogram-quantile queries over prometheus-api-client.

An unreachable or refusing Prometheus raises PrometheusUnavailable (a HarnessError): only the
criteria that need Prometheus become ERROR, with this reason.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from datetime import datetime
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import requests
from urllib3.util.retry import Retry
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException

from harness.core.errors import ConfigError, HarnessError
from harness.cluster.seam import DEFAULT_RETRY_BUDGET_S, Outage, RetryLog, pause_before_retry

QUERY_TIMEOUT_S = 10.0
READ_MARGIN_S = 5.0  # the client waits a little longer than the query's own timeout on the server
_HTTP_STATUS = re.compile(r"HTTP Status Code (\d{3})")  # how prometheus-api-client words a refusal
# A Prometheus behind auth: a bearer token, or basic auth (a user and its password), each from the environment or
# from a file the variable names. Never printed; a URL's own user:password@ is taken as basic auth and left out of
# every message.
TOKEN_ENV, TOKEN_FILE_ENV = "GPUPOC_PROMETHEUS_TOKEN", "GPUPOC_PROMETHEUS_TOKEN_FILE"
USER_ENV, PASSWORD_ENV, PASSWORD_FILE_ENV = ("GPUPOC_PROMETHEUS_USER", "GPUPOC_PROMETHEUS_PASSWORD",
                                             "GPUPOC_PROMETHEUS_PASSWORD_FILE")


def _secret(value_env: str, file_env: str, environ: Mapping[str, str]) -> str | None:
    if environ.get(value_env):
        return environ[value_env]
    if environ.get(file_env):
        try:
            return Path(environ[file_env]).expanduser().read_text().strip()
        except OSError as exc:
            raise ConfigError(f"{file_env} {environ[file_env]}: cannot read it ({exc.strerror})") from None
    return None


def credentials(url: str, environ: Mapping[str, str] = os.environ
                ) -> tuple[str, dict[str, str] | None, tuple[str, str] | None]:
    """(the URL without user:password@, the bearer header, basic auth) of a Prometheus."""
    parts = urlsplit(url)
    bare = urlunsplit(parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else ""))) \
        if parts.username and parts.hostname else url
    token = _secret(TOKEN_ENV, TOKEN_FILE_ENV, environ)
    user = environ.get(USER_ENV) or (unquote(parts.username) if parts.username else None)
    password = _secret(PASSWORD_ENV, PASSWORD_FILE_ENV, environ) or (
        unquote(parts.password) if parts.password else None)
    if user and password is None:
        raise ConfigError(f"{USER_ENV} is set without a password: set {PASSWORD_ENV} or {PASSWORD_FILE_ENV}")
    return bare, ({"Authorization": f"Bearer {token}"} if token else None), ((user, password) if user and password
                                                                              else None)


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


def transient(exc: BaseException) -> str | None:
    """Pure: why a failed query is worth retrying: no connection, a timeout, or a Prometheus not ready yet
    (502/503/504, 429: it answers HTTP before its storage is ready); None when retrying will not help."""
    if isinstance(exc, (requests.ConnectionError, requests.Timeout)):
        return type(exc).__name__
    status = _HTTP_STATUS.search(str(exc))
    if status and int(status.group(1)) in (429, 502, 503, 504):
        return f"HTTP {status.group(1)}"
    return None


def refusal(exc: BaseException) -> str:
    """Pure: a refused query in a few words: its HTTP status and what the body says (an HTML page, a login form:
    not a Prometheus API), never the whole body."""
    text = str(exc)
    status = _HTTP_STATUS.search(text)
    if status is None:
        return text[:200]
    code = int(status.group(1))
    if code in (401, 403):
        return f"HTTP {code}: Prometheus refuses the credentials (GPUPOC_PROMETHEUS_TOKEN_FILE, GPUPOC_PROMETHEUS_USER)"
    body = text[status.end():]
    said = re.search(r'"error"\s*:\s*"([^"]{1,160})', body)
    if said:
        return f"HTTP {code}: {said.group(1)}"
    return f"HTTP {code}" + (": an HTML page, not the Prometheus API" if "<html" in body.lower() else "")


class Prometheus:
    """Queries with a timeout each; a Prometheus that cannot be reached is retried within `budget_s` (the
    cluster seam's retry budget), the outage noted in `log` like the API server's, then PrometheusUnavailable."""

    def __init__(self, url: str, timeout_s: float = QUERY_TIMEOUT_S, budget_s: float = DEFAULT_RETRY_BUDGET_S,
                 log: RetryLog | None = None) -> None:
        bare, headers, auth = credentials(url)
        self.url = bare.rstrip("/")
        # the client's own retries off (the budget here is the only one); a read timeout, so a frozen Prometheus
        # is an outage, never a hang
        self._client = PrometheusConnect(url=self.url, disable_ssl=True, retry=Retry(total=0, raise_on_status=False),
                                         timeout=timeout_s + READ_MARGIN_S, headers=headers, auth=auth)
        self._timeout, self._budget_s = timeout_s, budget_s
        self.log = log if log is not None else RetryLog()

    def _ask(self, promql: str, call: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        retries = 0
        while True:
            try:
                answer = call(promql, params={"timeout": f"{self._timeout:g}s"}, **kwargs)
            except (requests.ConnectionError, requests.Timeout, PrometheusApiClientException) as exc:
                cause = transient(exc)
                if cause is None:
                    raise PrometheusUnavailable(f"Prometheus at {self.url} did not answer {promql!r}: "
                                                f"{refusal(exc)}") from exc
                waited = time.monotonic() - started
                if not self._budget_s:  # asked once (the reachability check): no retry to report
                    raise PrometheusUnavailable(f"Prometheus at {self.url} did not answer {promql!r}: {cause}; "
                                                "check that Prometheus is running and the URL") from exc
                if waited >= self._budget_s:
                    self._note(started, retries, cause, bridged=False)
                    raise PrometheusUnavailable(
                        f"Prometheus at {self.url} unreachable for {waited:.0f}s (retry budget {self._budget_s:.0f}s,"
                        f" {retries} retries): {cause}; check that Prometheus is running") from exc
                retries = pause_before_retry(retries)
                continue
            except (requests.RequestException, ValueError) as exc:
                raise PrometheusUnavailable(f"Prometheus at {self.url} did not answer {promql!r}: {exc}") from exc
            if retries:
                self._note(started, retries, "connection refused or timed out", bridged=True)
            return answer

    def _note(self, started: float, retries: int, cause: str, bridged: bool) -> None:
        self.log.add(Outage(time.time() - (time.monotonic() - started), time.time(), retries, cause, bridged,
                            what="Prometheus"))

    def metric_names(self) -> set[str]:
        """Every metric name Prometheus holds (scraped within its retention), in one request."""
        try:
            return set(self._client.all_metrics())
        except (requests.RequestException, PrometheusApiClientException, ValueError) as exc:
            raise PrometheusUnavailable(f"Prometheus at {self.url} did not list its metric names: {exc}") from exc

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

    def settle_s(self, scrapes: int, otherwise_s: float) -> float:
        """How long a series may take to show what the API shows: `scrapes` of the longest interval between scrapes,
        as Prometheus measures its own (prometheus_target_interval_length_seconds' median), or `otherwise_s` where
        it does not scrape itself."""
        samples = self.instant('max(prometheus_target_interval_length_seconds{quantile="0.5"})')
        interval = samples[0].value if samples else math.nan  # NaN too before its first interval
        return otherwise_s if math.isnan(interval) or not interval else scrapes * interval

    def reachable_reason(self) -> str | None:
        """None when Prometheus answers a trivial query, else why not (asked once: no retry budget)."""
        budget, self._budget_s = self._budget_s, 0.0
        try:
            self.instant("vector(1)")
        except PrometheusUnavailable as exc:
            return str(exc)
        finally:
            self._budget_s = budget
        return None

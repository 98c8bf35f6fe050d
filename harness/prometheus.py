"""The one seam to Prometheus: instant queries over its HTTP API."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from harness.errors import HarnessError

QUERY_TIMEOUT_S = 10.0


class PrometheusUnavailable(HarnessError):
    """Prometheus could not be reached or refused the query: Prometheus-based criteria are ERROR."""


def instant_query(base_url: str, promql: str, timeout_s: float = QUERY_TIMEOUT_S) -> list[dict[str, Any]]:
    """The `result` vector of an instant query: [{'metric': {...}, 'value': [ts, '1']}, ...]."""
    url = f"{base_url.rstrip('/')}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            body = json.load(response)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise PrometheusUnavailable(f"Prometheus at {base_url} did not answer {promql!r}: {exc}") from exc
    if body.get("status") != "success":
        raise PrometheusUnavailable(f"Prometheus at {base_url} refused {promql!r}: {body.get('error')}")
    result: list[dict[str, Any]] = body["data"]["result"]
    return result

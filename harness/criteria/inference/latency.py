"""Inference 5 — latency and throughput: a bounded LLM load through the Service; TTFT, inter-token latency and
end-to-end p50/p95/p99, output tokens/s, requests/s, error rate and goodput against the SLO, cross-checked with
the model server's own histograms."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.criteria import AT_LEAST, AT_MOST, Chart, Criterion, Threshold, register

CRITERION = register(Criterion(
    "inference.latency",
    "Under a bounded load through the Service, TTFT, inter-token latency and end-to-end p99 meet the SLO, the error "
    "rate and goodput meet theirs, and the client's TTFT agrees with the server's own histogram.",
    (Threshold("ttft_p99_s", "99th percentile time to first token", AT_MOST, " s"),
     Threshold("itl_p99_s", "99th percentile inter-token latency", AT_MOST, " s"),
     Threshold("e2e_p99_s", "99th percentile end-to-end request latency", AT_MOST, " s"),
     Threshold("max_error_rate", "share of requests that failed", AT_MOST),
     Threshold("min_goodput", "share of requests meeting every SLO (failures count as missing it)", AT_LEAST),
     Threshold("metric_tolerance_s", "client vs server median TTFT disagreement", AT_MOST, " s")),
    (Chart("latency", "latency percentiles (client)", "seconds", "percentile"),)))


REQUEST_TIMEOUT_S = 30.0  # the load generator's per request: a request not answered by then failed


@dataclass(frozen=True)
class LoadReport:
    """What the load generator measured (one stage), in seconds."""

    sent: int
    succeeded: int
    failed: int
    ttft: dict[str, float]
    itl: dict[str, float]
    e2e: dict[str, float]
    output_tokens_per_s: float
    requests_per_s: float
    good_requests: int
    # each successful request's, where the generator reported them (per_request_lifecycle_metrics.json)
    samples: dict[str, tuple[float, ...]] = field(default_factory=dict)  # "ttft", "itl" (each token), "e2e"

    @property
    def error_rate(self) -> float:
        return self.failed / self.sent if self.sent else 1.0

    @property
    def goodput(self) -> float:
        """Good requests over all sent: a failed request did not meet the SLO (inference-perf counts successes only)."""
        return self.good_requests / self.sent if self.sent else 0.0


def _percentiles(block: dict[str, Any] | None) -> dict[str, float]:
    block = block or {}
    names = {"mean": "mean", "median": "p50", "p95": "p95", "p99": "p99"}
    return {ours: float(block[theirs]) for theirs, ours in names.items() if block.get(theirs) is not None}


def per_request_samples(entries: list[dict[str, Any]]) -> dict[str, tuple[float, ...]]:
    """Pure: inference-perf's per-request report (computed_metrics) as samples: TTFT and end-to-end latency per
    successful request, inter-token latency per token gap (as its summary counts them)."""
    ttft, e2e, itl = [], [], []
    for entry in entries:
        metrics = entry.get("computed_metrics") or {}
        if entry.get("error") or not metrics:
            continue
        if metrics.get("time_to_first_token") is not None:
            ttft.append(float(metrics["time_to_first_token"]))
        if metrics.get("request_latency") is not None:
            e2e.append(float(metrics["request_latency"]))
        itl += [float(v) for v in metrics.get("inter_token_latencies") or [] if v is not None]
    return {name: tuple(values) for name, values in (("ttft", ttft), ("itl", itl), ("e2e", e2e)) if values}


def parse_inference_perf(stage: dict[str, Any]) -> LoadReport:
    """inference-perf's stage_N_lifecycle_metrics.json (0.7): successes/failures/load_summary."""
    successes, failures = stage.get("successes") or {}, stage.get("failures") or {}
    latency = successes.get("latency") or {}
    throughput = successes.get("throughput") or {}
    good = ((successes.get("goodput_metrics") or {}).get("good_requests")) or 0
    sent = int((stage.get("load_summary") or {}).get("count") or
               (successes.get("count") or 0) + (failures.get("count") or 0))
    return LoadReport(sent, int(successes.get("count") or 0), int(failures.get("count") or 0),
                      _percentiles(latency.get("time_to_first_token")), _percentiles(latency.get("inter_token_latency")),
                      _percentiles(latency.get("request_latency")),
                      float(throughput.get("output_tokens_per_sec") or 0.0),
                      float(throughput.get("requests_per_sec") or 0.0), int(good))

"""inference.prefix_routing's hit-rate gain from the model servers' counters: PASS, FAIL and INCONCLUSIVE from the
same threshold, and repeated runs pooled. Pure."""

from __future__ import annotations

from harness.core import estimate as est
from harness.criteria.inference.capacity import Stage
from harness.criteria.inference.latency import LoadReport
from harness.criteria.inference.prefix_routing import Route, hit_rate_gain

THRESHOLD = 0.25  # the profiles' min_hit_rate_gain


def route(name: str, hits: float, queries: float, requests: int) -> Route:
    once = LoadReport(requests, requests, 0, {}, {}, {}, 0.0, 12.0, requests, {"ttft": (0.1,) * requests})
    return Route(name, hits, queries, requests, Stage(12.0, once))


def test_the_gain_is_the_difference_of_the_token_shares_carried_onto_the_requests() -> None:
    # the dev sim's run of 2026-12-07: 0.844 of the tokens through the route, 0.261 through the Service
    aware, plain = route("aware", 84_400, 100_000, 340), route("plain", 26_100, 100_000, 352)
    assert aware.trials() == (287, 340) and plain.trials() == (92, 352)
    gain = hit_rate_gain(aware, plain)
    assert round(gain.value, 3) == 0.583 and 0.5 < gain.low < gain.value < gain.high < 0.65
    assert est.decide(gain, THRESHOLD, ">=") == est.PASS


def test_no_prefix_cache_fails_and_a_small_gain_on_few_requests_is_not_decided() -> None:
    nothing = hit_rate_gain(route("aware", 0, 9000, 100), route("plain", 0, 9000, 100))
    assert nothing.value == 0 and nothing.high < 0.05 and est.decide(nothing, THRESHOLD, ">=") == est.FAIL
    few = hit_rate_gain(route("aware", 600, 1000, 30), route("plain", 300, 1000, 30))
    assert few.low < THRESHOLD < few.high and est.decide(few, THRESHOLD, ">=") == est.INCONCLUSIVE


def test_repeated_runs_pool_their_counts() -> None:
    one = hit_rate_gain(route("aware", 600, 1000, 30), route("plain", 300, 1000, 30))
    pooled = est.pool(one, one)
    assert pooled.runs == 2 and round(pooled.value, 6) == round(one.value, 6)
    assert pooled.width < one.width and pooled.kind == "difference"
    assert est.from_record({"measured": pooled.value, "low": pooled.low, "high": pooled.high,
                            "pool": est.kept(pooled)}) is not None


def test_the_records_row_gives_the_hit_rate_and_ttft_of_the_run_that_decides() -> None:
    row = route("aware", 84_400, 100_000, 340).describe({"slo_ttft_p99_s": 0.5, "slo_itl_p99_s": 0.2})
    assert row["prefix-cache hit rate"].startswith("0.844 [") and row["TTFT p99 at 12 req/s (s)"] == "0.1"
    assert row["capacity at the SLO (req/s)"] == "not swept"

"""Inference 7 — prefix routing.

Shared-prefix traffic (inference-perf's shared_prefix prompts: system prompts that many questions share), once through
the plain Service and once through a prefix-aware route, each to four fresh replicas of the model server, the same
prompts in the same order. Each route first gets a run that sends every prompt once at a constant rate: its model
servers' own counters (vLLM's prefix_cache_hits / _queries, through Prometheus, read once a scrape after the run is
in) give the prefix-cache hit rate, decided as the gain against `min_hit_rate_gain`; its TTFT p99 is shown. Then an
open-loop sweep across the saturation point on the caches that run left (inference-perf sends each stage's prompts
from the first again): TTFT p99 per stage and the capacity at the SLO (capacity's knee and SLO), shown both ways.

The prompts' prefixes are sized on the replicas' prefix cache (the profile's): all of them together hold three
times what one replica caches, so a replica that sees every prefix (the plain Service) mostly evicts one before it
comes back, and one that sees its quarter (the prefix-aware route) keeps them.

On the sim the prefix-aware route is simulated: the stand-in replicas' own prefix affinity (harness/sim/standin.py,
PrefixRouter: the endpoint picker's prefix-cache scoring). The Gateway API Inference Extension's endpoint picker is an
Envoy ext_proc service, and no Envoy builds here. On a real cluster the case is not checked yet (it would deploy an
InferencePool and its endpoint picker in front of the replicas it makes).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.backends import Backend
from harness.cluster.prometheus import Prometheus
from harness.cluster.wait import poll
from harness.config.profile import Profile
from harness.criteria.inference import capacity
from harness.criteria.inference.prefix_routing import CRITERION, Route, hit_rate_gain
from harness.jobs.kubernetes import Workloads
from harness.jobs.service import ModelService
from harness.record.evidence import Evidence
from harness.serving import loadgen
from harness.serving.loadgen import SharedPrefixes, Sweep
from harness.serving.traffic import Traffic
from harness.targets.target import Target
from suites.inference.common import (SERVED_MODEL, deploy, require, servers_selector, standin_server, traffic_for,
                                     wait_ready, wait_served)

# After the run that decides: a burst of 120 (above what four stand-ins sustain), then four stages of 5 s up to the
# saturation point.
SWEEP = Sweep(probe_requests=120, probe_timeout_s=40, stages=4, stage_s=5)
EACH_ONCE_RPS = 12.0  # the deciding run's rate: below what four stand-ins sustain with or without their caches
SYSTEM_TOKENS, QUESTION_TOKENS, OUTPUT_TOKENS = 256, 32, 16
REPLICAS = 4
PROMPTS_PER_GROUP = 6  # each prefix comes back 5 times in the deciding run
SCRAPE_WAIT_S = 30.0
# The prefixes together, against one replica's prefix cache: three quarters of the replicas' caches together (what
# the prefix-aware route gives each fits), three times what one replica keeps (what the plain Service gives each)
CACHE_SHARE = 3.0


def prefixes_for(cache_tokens: int) -> SharedPrefixes:
    """Enough system prompts that together they hold CACHE_SHARE times one replica's cache."""
    groups = max(2 * REPLICAS, math.ceil(CACHE_SHARE * cache_tokens / SYSTEM_TOKENS))
    return SharedPrefixes(groups, SYSTEM_TOKENS, QUESTION_TOKENS, OUTPUT_TOKENS, PROMPTS_PER_GROUP)


def routing_run(backend: Backend, workloads: Workloads, profile: Profile, target: Target, ev: Evidence,
                prometheus: Prometheus, tmp_path: Path, standin: dict[str, str] | None = None,
                sweep: Sweep | None = SWEEP, prefixes: SharedPrefixes | None = None) -> None:
    """`standin`: the sim's stand-in settings changed from the profile's (a misconfigured serving stack); `sweep`
    None: the deciding run alone; `prefixes`: other prompts than those sized on the profile's cache."""
    require(target, backend, SERVED_MODEL)
    if not target.features.runs_sim_workloads:
        pytest.skip("not checked on a real cluster yet: the prefix-aware route is the Gateway API Inference "
                    "Extension's InferencePool and endpoint picker in front of the replicas the case makes, which "
                    "gpupoc does not deploy yet")
    cache_tokens = int(profile.standin.get("prefix-cache-tokens", "0"))  # what the prompts are sized on
    if cache_tokens <= 0:
        pytest.skip("not checked: the profile's stand-in has no prefix cache (inference.standin: prefix-cache-tokens)")
    traffic = traffic_for(target, profile)
    server = standin_server(profile, standin)
    generator = loadgen.required()
    limits = profile.thresholds[capacity.CRITERION.id]  # capacity's SLO: the knee both ways is capacity's
    tenant = profile.tenants[0]
    plain = workloads.service("llm-plain", tenant, replicas=REPLICAS, server=server)
    aware = workloads.service("llm-aware", tenant, replicas=REPLICAS, server=server)
    aware = aware.but(server={**server, "prefix-route": aware.app})
    for service in (plain, aware):
        deploy(workloads, backend, service)
    prefixes = prefixes or prefixes_for(cache_tokens)
    started = time.time()
    routes = []
    for name, service in (("plain Service", plain), ("prefix-aware route", aware)):
        wait_ready(workloads, service, service.replicas, profile.timeouts.admit)
        url = wait_served(workloads, traffic, backend, service, profile.timeouts.admit)
        routes.append(measured(name, service, url, generator, traffic, prefixes, sweep, limits, prometheus,
                               tmp_path / name.split()[0]))
    simulated = ", ".join(f"{k}={v}" for k, v in server.items())
    swept = (f"; then inference-perf's sweep on the caches it left: a burst of {sweep.probe_requests} found the "
             f"saturation point, then {sweep.stages} Poisson stages of {sweep.stage_s} s" if sweep else "")
    ev.note(f"inference-perf's shared-prefix prompts, each route on {REPLICAS} fresh replicas: "
            f"{prefixes.groups} system prompts of {SYSTEM_TOKENS} tokens (together {CACHE_SHARE:g} times one "
            f"replica's prefix cache of {cache_tokens} tokens), {prefixes.prompts_per_group} questions of "
            f"{QUESTION_TOKENS} tokens each, answers of {OUTPUT_TOKENS}; every prompt sent once at "
            f"{routes[0].once.rate:g} req/s{swept}; {traffic.where}; both routes in {time.time() - started:.0f} s. "
            "Hit rates from the servers' "
            "vllm:prefix_cache_hits / _queries (Prometheus); the SLO is inference.capacity's. The prefix-aware "
            "route is simulated: the sim's stand-in replicas route each prompt to the replica that was sent its "
            "leading blocks (the endpoint picker's prefix-cache scoring; the Gateway API Inference Extension's own "
            f"needs Envoy, which does not build here); the replicas are the sim's vLLM stand-in (simulated: "
            f"{simulated}).")
    ev.tables["routes"] = [route.describe(limits) for route in routes]
    if sweep:
        ev.series["prefix_routing"] = {
            f"{route.name}: TTFT p99": [(s.rate, round(s.p99("ttft").value, 4))
                                        for s in sorted(route.stages, key=lambda s: s.rate)] for route in routes}
    plain_route, aware_route = routes
    if min(plain_route.requests, aware_route.requests) == 0:
        ev.not_checked("min_hit_rate_gain", "the model servers' prefix-cache counters were not scraped after the "
                       f"deciding run within {SCRAPE_WAIT_S:.0f} s of its end")
    else:
        ev.expect("min_hit_rate_gain", hit_rate_gain(aware_route, plain_route).rounded(3))
    ev.verdict()


def measured(name: str, service: ModelService, url: str, generator: loadgen.LoadGenerator, traffic: Traffic,
             prefixes: SharedPrefixes, sweep: Sweep | None, limits: dict[str, float], prometheus: Prometheus,
             work: Path) -> Route:
    """One route: every prompt once and its servers' prefix-cache counters once Prometheus has scraped them after
    it; then the sweep."""
    slo = capacity.slo_of(limits)
    load = prefixes.each_once(EACH_ONCE_RPS)
    once = generator.run(traffic, generator.shared_prefix_config(url, service.model, load, prefixes, slo,
                                                                 work / "once"), work / "once",
                         timeout_s=prefixes.prompts / EACH_ONCE_RPS + 120)
    hits, queries, requests = cache_counters(prometheus, service, after=time.time())
    stages: tuple[capacity.Stage, ...] = ()
    if sweep is not None:
        config = generator.shared_prefix_config(url, service.model, sweep.load(), prefixes, slo, work / "sweep")
        stages = tuple(capacity.Stage(rate, report) for rate, report in
                       generator.run_stages(traffic, config, work / "sweep", timeout_s=sweep.timeout_s))
    rate = load["stages"][0]["rate"]
    return Route(name, hits, queries, int(requests), capacity.Stage(round(rate, 1), once), stages)


def cache_counters(prometheus: Prometheus, service: ModelService, after: float) -> tuple[float, float, float]:
    """The service's servers' prefix-cache hits and queries (tokens) and requests served (their TTFT count), from a
    scrape of every one of them after `after`; zeros where none came within SCRAPE_WAIT_S."""
    selector = servers_selector(service)

    def read() -> tuple[float, ...]:
        values = []
        for query in (f"min(timestamp(vllm:prefix_cache_queries_total{{{selector}}}))",
                      f"count(vllm:prefix_cache_queries_total{{{selector}}})",
                      f"sum(vllm:prefix_cache_hits_total{{{selector}}})",
                      f"sum(vllm:prefix_cache_queries_total{{{selector}}})",
                      f"sum(vllm:time_to_first_token_seconds_count{{{selector}}})"):
            found = prometheus.instant(query)
            values.append(found[0].value if found else 0.0)
        return tuple(values)

    stamp, servers, hits, queries, requests = poll(
        read, lambda r: r[1] == service.replicas and r[0] > after, SCRAPE_WAIT_S, poll_s=1.0)
    if servers != service.replicas or stamp <= after:
        return 0.0, 0.0, 0.0
    return hits, queries, requests


def test_prefix_routing(backend: Backend, workloads: Workloads, queue_model: Profile, target: Target,
                        evidence: Callable[[str], Evidence], prometheus: Prometheus, tmp_path: Path) -> None:
    routing_run(backend, workloads, queue_model, target, evidence(CRITERION.id), prometheus, tmp_path)

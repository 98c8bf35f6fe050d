"""Inference 6 — capacity.

Open-loop (Poisson) load through the Service, swept by inference-perf across the serving stack's saturation point:
a burst finds the rate its replicas sustain, then stages spaced up to it, each measured by its requests' TTFT and
inter-token p99 against the profile's SLO. Measured: the knee (the highest offered rate at which every stage met
the SLO) with the interval the stages allow; per stage, the achieved rate, token throughput and goodput. The record
draws p99 latency against the offered rate, stage by stage (the achieved rate is in the stages' table: Poisson arrivals
over a few seconds scatter it around the offered one).

On the sim the model servers are a vLLM stand-in whose capacity is its latency model (the profile's
inference.standin: max-num-seqs, inter-token latency, batch slowdown, prefix cache): simulated, and the record says
so. On a real cluster the profile's model server (vLLM and a small model) is what the sweep finds the knee of.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.backends import Backend
from harness.config.profile import Profile
from harness.criteria.inference.capacity import CRITERION, Stage, knee, slo_of
from harness.jobs.kubernetes import Workloads
from harness.record.evidence import Evidence
from harness.serving import loadgen
from harness.serving.loadgen import Sweep
from harness.targets.target import Target
from suites.inference.common import (SERVED_MODEL, deploy, require, standin_server, traffic_for, wait_ready,
                                     wait_served)

# The probe's burst (80 requests in 5 s, about twice what two stand-ins of 4 sequences sustain) builds the queue whose
# drain gives the saturation point: it must drain within the probe's timeout, or its leftovers load the first stage (a
# quarter of the sequences drains 80 in about 28 s). Then five stages of 6 s up to it (the first at 1 req/s), each
# until its last request is answered. About a minute in all.
SWEEP = Sweep(probe_requests=80, probe_timeout_s=40, stages=5, stage_s=6)
TOKENS = (48, 16)  # prompt and output tokens per request
REPLICAS = 2


def capacity_run(backend: Backend, workloads: Workloads, profile: Profile, target: Target, ev: Evidence,
                 tmp_path: Path, standin: dict[str, str] | None = None, sweep: Sweep = SWEEP) -> list[Stage]:
    require(target, backend, SERVED_MODEL)
    traffic = traffic_for(target, profile)
    generator = loadgen.required()
    limits = profile.thresholds[CRITERION.id]
    server = standin_server(profile, standin)
    service = workloads.service("llm-capacity", profile.tenants[0], replicas=REPLICAS, server=server)
    deploy(workloads, backend, service)
    wait_ready(workloads, service, service.replicas, profile.timeouts.admit)
    url = wait_served(workloads, traffic, backend, service, profile.timeouts.admit)
    slo = slo_of(limits)
    work = tmp_path / "sweep"
    config = generator.sweep_config(url, service.model, sweep, TOKENS, slo, work)
    started = time.time()
    stages = [Stage(rate, report) for rate, report in
              generator.run_stages(traffic, config, work, timeout_s=sweep.timeout_s)]
    simulated = ", ".join(f"{k}={v}" for k, v in server.items()) if target.features.runs_sim_workloads else ""
    ev.note(f"inference-perf's sweep: a burst of {sweep.probe_requests} requests found the saturation point, then "
            f"{len(stages)} Poisson stages of {sweep.stage_s} s up to it; {TOKENS[0]} prompt / {TOKENS[1]} output "
            f"tokens, streaming, {traffic.where}, in {time.time() - started:.0f} s; {REPLICAS} replicas"
            + (f" of the sim's vLLM stand-in (simulated: {simulated})." if simulated else "."))
    rows: list[dict[str, object]] = []
    lines: dict[str, list[tuple[float, float]]] = {"TTFT p99": [], "inter-token p99": []}
    for s in sorted(stages, key=lambda s: s.rate):
        ttft, itl = s.p99("ttft").value, s.p99("itl").value  # each a bootstrap below 299 samples: once
        rows.append({"offered (req/s)": s.rate, "achieved (req/s)": round(s.report.requests_per_s, 2),
                     "sent": s.report.sent, "failed": s.report.failed, "TTFT p99 (s)": round(ttft, 3),
                     "inter-token p99 (s)": round(itl, 3), "output tokens/s": round(s.report.output_tokens_per_s),
                     "goodput": round(s.report.goodput, 3), "SLO": s.verdict(limits)[0]})
        lines["TTFT p99"].append((s.rate, round(ttft, 4)))
        lines["inter-token p99"].append((s.rate, round(itl, 4)))
    ev.tables["sweep stages (inference-perf)"] = rows
    ev.series["capacity"] = lines
    ev.expect("min_capacity_rps", knee(stages, limits).rounded(3))
    ev.verdict()
    return stages


def test_capacity(backend: Backend, workloads: Workloads, queue_model: Profile, target: Target,
                  evidence: Callable[[str], Evidence], tmp_path: Path) -> None:
    capacity_run(backend, workloads, queue_model, target, evidence(CRITERION.id), tmp_path)

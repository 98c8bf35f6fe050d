"""Inference 1 — cold start.

From apply to every replica Ready, the Service's endpoints ready and the first successful response through the
Service; per pod created -> scheduled -> Ready. On the sim the model loads for `load-time` (the stand-in answers
/health only then) and the pod turns Ready only when it does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from harness.backends import Backend
from harness.criteria.inference.cold_start import CRITERION, pod_starts, ready_percentiles
from harness.config.profile import Profile
from harness.record.evidence import Evidence
from harness.targets.target import Target
from harness.jobs.kubernetes import Workloads
from suites.inference.common import SERVED_MODEL, deploy, of, probe_file, require, route_url, traffic_for, wait_ready

REPLICAS = 2
LOAD_TIME = "3s"


def cold_start_run(backend: Backend, workloads: Workloads, profile: Profile, target: Target, ev: Evidence,
                   tmp_path: Path, load_time: str = LOAD_TIME) -> None:
    require(target, backend, SERVED_MODEL)
    traffic = traffic_for(target, profile)
    service = workloads.service("llm-cold", profile.tenants[0], replicas=REPLICAS,
                                server={"load-time": load_time})
    ev.note(f"{REPLICAS} replicas x {service.gpus} GPU; the model loads for {load_time}; probe {traffic.where}.")
    applied_at = time.time()
    deploy(workloads, backend, service)
    url = route_url(workloads, traffic, backend, service, profile.timeouts.admit)
    probe = traffic.probe(url, rate=10, duration_s=profile.timeouts.admit, out=probe_file(tmp_path, "cold"),
                          stop_after_ok=1)
    ready_at = wait_ready(workloads, service, REPLICAS, profile.timeouts.admit)
    answers = probe.samples(profile.timeouts.admit + 10)
    first_ok = min((s.answered_at for s in answers if s.ok), default=None)

    starts = pod_starts(of(service, workloads.pods(service.namespace).objects))
    ev.tables["pods"] = [{"pod": s.name, "created -> scheduled (s)": s.scheduled_s, "created -> Ready (s)": s.ready_s}
                         for s in starts]
    ev.expect("all_ready_within_s", round(ready_at - applied_at, 2))
    ev.expect("first_response_within_s", round(first_ok - applied_at, 2) if first_ok else None)
    percentiles = ready_percentiles(starts)
    ev.expect("pod_ready_p95_s", percentiles[1] if percentiles else None)
    if percentiles:
        ev.note(f"pod created -> Ready p50 {percentiles[0]:.1f} s, p95 {percentiles[1]:.1f} s "
                "(API timestamps: 1 s resolution).")
    ev.note(f"{len(answers)} probe requests until the first success; {sum(1 for s in answers if not s.ok)} failed "
            "(a request sent before an endpoint was ready waits in TCP retries: the first answer counts).")
    ev.verdict()


def test_cold_start(backend: Backend, workloads: Workloads, queue_model: Profile, target: Target,
                    evidence: Callable[[str], Evidence], tmp_path: Path) -> None:
    cold_start_run(backend, workloads, queue_model, target, evidence(CRITERION.id), tmp_path)

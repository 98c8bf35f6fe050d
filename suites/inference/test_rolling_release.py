"""Inference 3a — rolling release.

A steady probe through the Service while the Deployment rolls to a new version (maxUnavailable 0, maxSurge 1):
the share of requests answered, per second and overall, and the time the ready endpoints spent below
desired - maxUnavailable. A new pod Ready before its server answers (no readiness gate) shows up as failures.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.backends import Backend
from harness.criteria.inference.rolling_release import CRITERION, below_note, per_second, seconds_below, success_rate
from harness.config.profile import Profile
from harness.record.evidence import Evidence
from harness.jobs.service import PORT_NAME
from harness.targets.target import Target
from harness.jobs.kubernetes import Workloads
from harness.criteria.inference.service_discovery import published
from suites.inference.common import (SERVING, deploy, endpoint_slices, is_ready, of, probe_file, require, roll_out,
                                     traffic_for, wait_ready, wait_routed)

REPLICAS = 3
PROBE_RATE = 20.0
SETTLED_S = 1.0


def rollout_run(backend: Backend, workloads: Workloads, profile: Profile, target: Target, ev: Evidence,
                tmp_path: Path, gated: bool = True) -> None:
    require(target, backend, SERVING)
    traffic = traffic_for(target, profile)
    stable = workloads.service("llm-roll", profile.tenants[0], replicas=REPLICAS,
                               server={"load-time": "1s"})
    new = stable.but(version="v2", ready_gate=gated)
    slices = endpoint_slices(workloads, stable)
    deploy(workloads, backend, stable)
    wait_ready(workloads, stable, REPLICAS, profile.timeouts.admit)
    # The steady state is what the EndpointSlices publish, not the pods: the EndpointSlice controller can lag the
    # pods by its 1 s back-off (a stale informer cache), which would count as time below the floor.
    wait_routed(traffic, slices, stable, REPLICAS, profile.timeouts.admit)
    ready_points: list[tuple[float, int]] = []

    def count(_event: str, _obj: dict[str, Any]) -> None:
        ready_points.append((time.time(), len(published(list(slices.objects.values()), PORT_NAME))))

    slices.on_event(count)
    count("", {})
    url = traffic.service_url(target.api, stable.namespace, stable.app)
    window = REPLICAS * 3.0 + 4.0  # at most; the probe ends once the rollout has settled
    probe = traffic.probe(url, PROBE_RATE, window, probe_file(tmp_path, "rollout"))
    time.sleep(1.0)  # a second of steady state before the rollout, in the probe's record
    try:
        started = roll_out(workloads, backend, new)
        pods = workloads.pods(stable.namespace)
        pods.wait_until(f"all {REPLICAS} pods on {new.version} and Ready",
                        lambda objs: sum(1 for p in of(stable, objs) if (p["metadata"].get("labels") or {}).get(
                            "version") == new.version and is_ready(p)) == REPLICAS
                        and len(of(stable, objs)) == REPLICAS, profile.timeouts.admit)
        time.sleep(SETTLED_S)  # a moment of the new steady state in the probe's record, then the probe ends
    finally:
        probe.stop()
    answers = probe.samples(window + 30)
    ended = answers[-1].t if answers else time.time()
    rate = success_rate(answers)
    ev.series["availability"] = {"answered 2xx": per_second(answers, started)}
    floor = REPLICAS - new.max_unavailable
    ev.expect("min_success_rate", round(rate, 4) if rate is not None else None)
    ev.expect("max_seconds_below_floor", round(seconds_below(ready_points, floor, ended), 3))
    failed = [a for a in answers if not a.ok]
    ev.note(f"{len(answers)} probe requests at {PROBE_RATE:g}/s {traffic.where}; {len(failed)} failed"
            + (f" (first: {failed[0].status or failed[0].error} from {failed[0].pod or 'no pod'})" if failed else "")
            + f"; ready endpoints floor {floor} (desired {REPLICAS} - maxUnavailable {new.max_unavailable})"
            + below_note(ready_points, floor, started) + ".")
    ev.verdict()


def test_rolling_release(backend: Backend, workloads: Workloads, queue_model: Profile, target: Target,
                         evidence: Callable[[str], Evidence], tmp_path: Path) -> None:
    rollout_run(backend, workloads, queue_model, target, evidence(CRITERION.id), tmp_path)

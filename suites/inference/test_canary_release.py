"""Inference 3b — canary release.

Stable and canary behind one Service: the canary's share of at least 400 probe answers must lie in the 99 %
binomial interval of the intended split (its share of the replicas; kube-proxy spreads connections evenly over
ready endpoints). Then the canary turns bad (a new version with errors above the gate): the probe's error rate on
the canary trips the gate, the canary is rolled back (scaled to 0), and afterwards no answer comes from it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.backends import Backend
from harness.core.errors import WaitTimeout
from harness.core.estimate import Z, wilson_bounds
from harness.criteria.inference.canary_release import CONFIDENCE, CRITERION
from harness.config.profile import Profile
from harness.record.evidence import Evidence
from harness.jobs.service import PORT_NAME
from harness.criteria.inference.service_discovery import published
from harness.targets.target import Target
from harness.jobs.kubernetes import Workloads
from harness.serving.traffic import Traffic
from suites.inference.common import (SERVING, deploy, endpoint_slices, is_ready, probe_file, require, roll_out, scale,
                                     traffic_for, wait_ready, wait_routed)

SPLIT_REQUESTS = 400
RATE = 160.0
WARM_S = 1.0  # a probe to see which replicas answer before the split is measured
PHASE_S = 3.0  # the canary's analysis, and the check after its rollback


def canary_run(backend: Backend, workloads: Workloads, profile: Profile, target: Target, ev: Evidence,
               tmp_path: Path, stable_replicas: int = 3, canary_replicas: int = 1, intended: float = 0.25) -> None:
    require(target, backend, SERVING)
    traffic, gate = traffic_for(target, profile), profile.threshold(CRITERION.id, "canary_error_gate")
    stable = workloads.service("llm-canary", profile.tenants[0], replicas=stable_replicas,
                               server={"load-time": "1s"})
    canary = stable.but(track="canary", version="v2", replicas=canary_replicas)
    slices = endpoint_slices(workloads, stable)
    deploy(workloads, backend, stable)
    deploy(workloads, backend, canary, with_service=False)
    wait_ready(workloads, stable, stable_replicas, profile.timeouts.admit, track="stable")
    wait_ready(workloads, canary, canary_replicas, profile.timeouts.admit, track="canary")
    wait_routed(traffic, slices, stable, stable_replicas + canary_replicas, profile.timeouts.admit)
    url = traffic.service_url(target.api, stable.namespace, stable.app)
    routed_to_every_replica(traffic, url, stable_replicas + canary_replicas, profile.timeouts.admit, tmp_path)

    answers = traffic.probe(url, RATE, SPLIT_REQUESTS / RATE, probe_file(tmp_path, "split")).samples(60)
    served = [a for a in answers if a.ok]
    share = sum(1 for a in served if a.version == canary.version) / len(served) if served else 0.0
    low, high = wilson_bounds(intended, len(served), Z[CONFIDENCE])
    ev.expect("max_split_outside_interval", 0 if low <= share <= high else 1)
    ev.note(f"split: canary {canary.version} served {share:.3f} of {len(served)} answers; intended {intended:.3f} "
            f"({canary_replicas} of {stable_replicas + canary_replicas} replicas), 99 % interval "
            f"[{low:.3f}, {high:.3f}].")

    bad = canary.but(version="v3", server={"load-time": "1s", "error-rate": "0.5"})
    roll_out(workloads, backend, bad)
    pods = workloads.pods(stable.namespace)
    pods.wait_until(f"canary on {bad.version}", lambda objs: sum(
        1 for p in objs.values() if (p["metadata"].get("labels") or {}).get("version") == bad.version and is_ready(p))
        == canary_replicas, profile.timeouts.admit)
    slices.wait_until(f"canary {bad.version} among the ready endpoints", lambda objs: bool(
        _addresses(pods.objects, bad.version) & {addr for addr, *_ in published(list(objs.values()), PORT_NAME)}),
        profile.timeouts.admit)
    traffic.wait_programmed(slices.last_event_at)  # the change as our watch saw it (on a busy host, seconds before now)
    analysis = traffic.probe(url, RATE, PHASE_S, probe_file(tmp_path, "analysis")).samples(60)
    on_canary = [a for a in analysis if a.version == bad.version]
    error_rate = sum(1 for a in on_canary if not a.ok) / len(on_canary) if on_canary else 0.0
    ev.note(f"analysis: canary {bad.version} answered {len(on_canary)} of {len(analysis)} requests, error rate "
            f"{error_rate:.2f} (gate {gate:g}).")
    if error_rate <= gate:
        ev.not_checked("rollback_within_s", f"the canary's error rate {error_rate:.2f} did not trip the gate {gate:g}")
        ev.verdict()
        return
    tripped = scale(workloads, canary, 0)  # the rollback: the canary's replicas to 0
    canary_ips = _addresses(pods.objects, bad.version)
    slices.wait_until("no canary endpoint ready", lambda objs: not canary_ips & {
        addr for addr, *_ in published(list(objs.values()), PORT_NAME)}, profile.timeouts.admit)
    ev.expect("rollback_within_s", round(traffic.wait_programmed(slices.last_event_at) - tripped, 3))
    after = traffic.probe(url, RATE, PHASE_S, probe_file(tmp_path, "after")).samples(60)
    ev.expect("max_canary_after_rollback", sum(1 for a in after if a.version == bad.version))
    ev.note(f"after the rollback: {len(after)} requests, {sum(1 for a in after if a.ok)} answered, all versions seen: "
            f"{sorted({a.version for a in after if a.version})}.")
    ev.verdict()


def routed_to_every_replica(traffic: Traffic, url: str, replicas: int, timeout_s: float, tmp_path: Path) -> None:
    """Until a short probe is answered by every replica: the split is measured over the routing as it stands, not
    while kube-proxy, behind on its watch, still programs the last endpoints (a share of 1/2 or 1/3 for a while
    reads as a wrong split)."""
    deadline, round_ = time.monotonic() + timeout_s, 0
    seen: set[str] = set()
    while len(seen) < replicas and time.monotonic() < deadline:
        round_ += 1
        warm = traffic.probe(url, RATE, WARM_S, probe_file(tmp_path, f"warm-{round_}")).samples(30)
        seen = {a.pod for a in warm if a.ok}
        if seen == {""}:
            return  # the server does not name its pod (only the sim's stand-in does): the routing is not seen
    if len(seen) < replicas:
        raise WaitTimeout(f"the Service routed to {len(seen)} of {replicas} ready replicas after {timeout_s:.0f}s "
                          f"({', '.join(sorted(seen)) or 'none answered'})")


def _addresses(pods: dict[str, dict[str, Any]], version: str) -> set[str]:
    return {str((p.get("status") or {}).get("podIP")) for p in pods.values()
            if (p["metadata"].get("labels") or {}).get("version") == version and (p.get("status") or {}).get("podIP")}


def test_canary_release(backend: Backend, workloads: Workloads, queue_model: Profile, target: Target,
                        evidence: Callable[[str], Evidence], tmp_path: Path) -> None:
    canary_run(backend, workloads, queue_model, target, evidence(CRITERION.id), tmp_path)

"""The operations table of a backend: what a platform team would run and watch, beside what it scored.

Its components and their versions, the CRDs (by API group) and admission webhooks it installs, what its
processes used during the run (CPU seconds and peak resident memory, from their own metrics in Prometheus),
and how its failures showed up (the events, log lines and crashes the record captured). Pure functions over
plain data; harness.run.collect gathers the data from the cluster and Prometheus.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from harness.record.model import Record, Result
from harness.record.verdict import SEVERITY

NOT_MEASURED = "not measured"
MIB = 1024 * 1024
# What each backend installs, told by API group (suffix) and by the names of its webhook configurations and the
# Services they call. The default scheduler and Slurm install neither.
INSTALLS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "kueue": (("kueue.x-k8s.io",), ("kueue",)),
    "volcano": (("volcano.sh",), ("volcano",)),
    "kuberay": (("ray.io",), ("kuberay", "ray-operator")),
    "kai": (("scheduling.run.ai", "kai.scheduler"), ("kai-", "run.ai")),
    "kueue-volcano": (("kueue.x-k8s.io", "volcano.sh"), ("kueue", "volcano")),  # the pair: both install theirs
}
# Prometheus queries over the run's window ({window} in seconds), per scrape job.
CPU_QUERY = "sum by (job) (increase(process_cpu_seconds_total[{window}s]))"
MEMORY_QUERY = "max by (job) (max_over_time(process_resident_memory_bytes[{window}s]))"
MIN_WINDOW_S = 10  # a range shorter than two scrapes of the sim (5 s) holds nothing to rate
FAILURE_OUTCOMES = ("FAIL", "ERROR", "UNFINISHED")


@dataclass(frozen=True)
class Usage:
    """What one scrape job's processes used over the run's window (None: its metric was not there)."""

    cpu_seconds: float | None
    memory_bytes: float | None


def crds_by_group(crds: list[tuple[str, str]], backend: str) -> dict[str, list[str]]:
    """Pure: {API group: kinds} of the CRDs ((group, kind) pairs) that belong to `backend`."""
    suffixes = INSTALLS.get(backend, ((), ()))[0]
    found: dict[str, list[str]] = {}
    for group, kind in crds:
        if any(group == s or group.endswith("." + s) for s in suffixes):
            found.setdefault(group, []).append(kind)
    return {g: sorted(kinds) for g, kinds in sorted(found.items())}


def webhooks_of(configurations: list[dict[str, Any]], backend: str) -> list[dict[str, Any]]:
    """Pure: the Validating/MutatingWebhookConfigurations ({kind, name, hooks: [{name, calls}]}) pointing at
    `backend` (by their name or the Service they call): each with its hooks' names and the endpoints they call."""
    markers = INSTALLS.get(backend, ((), ()))[1]
    rows = []
    for config in configurations:
        hooks = config.get("hooks", [])
        calls = sorted({str(h.get("calls", "")) for h in hooks})
        text = " ".join([str(config.get("name", "")), *calls]).lower()
        if markers and any(m in text for m in markers):
            rows.append({"kind": config.get("kind", ""), "name": config.get("name", ""),
                         "hooks": sorted(str(h.get("name", "")) for h in hooks),
                         "calls": ", ".join(sorted({endpoint(c) for c in calls}))})
    return rows


def endpoint(calls: str) -> str:
    """Pure: 'service ns/name' as it is; a URL without its path (one endpoint serves every hook of a webhook)."""
    if "://" not in calls:
        return calls
    scheme, rest = calls.split("://", 1)
    return f"{scheme}://{rest.split('/', 1)[0]}"


def components(names: tuple[str, ...], deployments: tuple[str, ...], schedulers: list[dict[str, str]],
               simulated: bool) -> list[dict[str, str]]:
    """Pure: each component with its version: on the sim by process name (from `gpupoc sim status`), elsewhere by
    Deployment (`namespace/name` with its images)."""
    if simulated:
        versions = {s["name"]: s["version"] for s in schedulers}
        return [{"name": n, "version": versions.get(n, "not found")} for n in names]
    rows = [{"name": s["name"], "version": s["version"]} for s in schedulers
            if s["name"].split("/")[-1] in deployments]
    return rows or [{"name": d, "version": "not found"} for d in deployments]


def scrape_job(component: str, jobs: set[str]) -> str | None:
    """Pure: the scrape job of a component: its own name, else the one job whose name contains it."""
    if component in jobs:
        return component
    short = component.split("/")[-1]
    containing = sorted(j for j in jobs if short in j)
    return containing[0] if len(containing) == 1 else None


def usage_rows(names: list[str], usage: dict[str, Usage], window_s: float) -> list[dict[str, Any]]:
    """Pure: per component, its scrape job, CPU seconds over the window, average cores, peak memory; what could not
    be read is 'not measured', never 0."""
    rows = []
    for name in names:
        job = scrape_job(name, set(usage))
        seen = usage.get(job) if job else None
        cpu = seen.cpu_seconds if seen else None
        memory = seen.memory_bytes if seen else None
        rows.append({"component": name, "scrape job": job or NOT_MEASURED,
                     "CPU (s)": NOT_MEASURED if cpu is None else round(cpu, 2),
                     "CPU (cores, mean)": NOT_MEASURED if cpu is None or window_s <= 0 else round(cpu / window_s, 3),
                     "memory peak (MiB)": NOT_MEASURED if memory is None else round(memory / MIB, 1)})
    return rows


def usage_by_job(cpu: list[tuple[dict[str, str], float]], memory: list[tuple[dict[str, str], float]]
                 ) -> dict[str, Usage]:
    """Pure: the two queries' answers ((labels, value) pairs) joined by scrape job."""
    cpu_of = {labels.get("job", ""): value for labels, value in cpu}
    memory_of = {labels.get("job", ""): value for labels, value in memory}
    return {job: Usage(cpu_of.get(job), memory_of.get(job)) for job in sorted(set(cpu_of) | set(memory_of)) if job}


def failure_signs(results: list[Result]) -> dict[str, Any]:
    """Pure: how a backend's failed, errored and unfinished cases showed up: their events by type and reason, the
    log lines, its controllers' own crashes, and what was left behind (from the record's diagnostics)."""
    bad = [r for r in results if r.outcome in FAILURE_OUTCOMES]
    events: Counter[str] = Counter()
    logs, other = [], []
    for result in bad:
        for line in [d for e in result.evidence for d in e.get("diagnostics", [])]:
            parts = line.split(" ", 3)
            if line.startswith("log of "):
                logs.append(line)
            elif len(parts) == 4 and parts[1] in ("Normal", "Warning"):
                events[f"{parts[1]} {parts[2]} ({parts[3].split('/')[0]})"] += 1
            else:
                other.append(line)
    crashes = [n for r in results for e in r.evidence for n in e.get("notes", []) if "'s own controller:" in n]
    return {"cases": [f"{r.outcome} {r.criterion}" for r in bad],
            "events": [f"{what} × {n}" for what, n in sorted(events.items(),
                                                          key=lambda i: (not i[0].startswith("Warning"), -i[1], i[0]))],
            "logs": logs, "other": other, "crashes": crashes,
            "left behind": [line for r in results for line in r.leftovers]}


RESTART_CRITERION = "training.control_plane_recovery"


def answers(record: Record, backend: str) -> dict[str, str]:
    """Pure: the operations answers a review asks of a backend, from what the run measured: how it behaved when its
    controllers were restarted (the recovery case), which of its failures the evidence locates (events or logs
    captured, or a scheduler's reason in the message), and which backends shared its cluster during the run."""
    mine = [r for r in record.results if r.backend == backend]
    restart = [r for r in mine if r.criterion == RESTART_CRITERION]
    if not restart:
        restarted = "not measured: the control-plane recovery case did not run on it"
    else:
        worst_first = sorted(restart, key=lambda r: -SEVERITY.get(r.outcome, 0))
        result = worst_first[0]
        restarted = f"{result.outcome}: " + (measured_values(result) if result.outcome != "SKIP"
                                             else (result.message.strip().splitlines() or ["skipped"])[0])
    bad = [r for r in mine if r.outcome in FAILURE_OUTCOMES]
    unlocated = [r.criterion for r in bad if not locates(r)]
    located = (f"{len(bad) - len(unlocated)} of {len(bad)} located by events, logs or a reason string"
               + (f"; not located: {', '.join(unlocated)}" if unlocated else "")) if bad else "no failures"
    return {"when restarted": restarted, "failures located": located,
            "shared its cluster with": ", ".join(cluster_mates(record, backend)) or "no other backend"}


def measured_values(result: Result) -> str:
    checks = [c for e in result.evidence for c in e.get("checks", []) if not c.get("not_checked")]
    told = [f"{c['name']} {'nothing measured' if c.get('measured') is None else c['measured']}"
            f"{c.get('unit', '')} (wanted {c['comparison']} {c['threshold']:g})" for c in checks]
    return "; ".join(told) or "no checks"


def locates(result: Result) -> bool:
    """Its evidence names where it failed: events or logs captured, or a reason the scheduler or job gave."""
    diagnostics = [d for e in result.evidence for d in e.get("diagnostics", [])]
    return bool(diagnostics) or any(word in result.message for word in ("Unschedulable", "couldn't", "insufficient",
                                                                        "refused", "FailedScheduling"))


def cluster_mates(record: Record, backend: str) -> list[str]:
    """The other backends whose cases ran on the same cluster: its part's (side by side), else the whole run's."""
    parts = (record.target or {}).get("parts") or []
    for part in parts:
        if backend in part.get("backends", []):
            return [b for b in part["backends"] if b != backend]
    return sorted({r.backend for r in record.results} - {backend, "-"}) if not parts else []

"""The session's life: connecting to the target (run lock, preflight, secrets to redact, the environment watch),
head starts, and what the end of a run sweeps and writes."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from harness import backends as backend_registry
from harness.cluster.cleanup import sweep
from harness.cluster.rbac import REQUESTS_FILE
from harness.cluster.runlock import EXIT_LOCKED, LockHeld, RunLock, identity
from harness.config.options import RunConfig
from harness.config.profile import Profile
from harness.core import progress
from harness.core.errors import ConfigError, HarnessError
from harness.run import collect as record, headstart
from harness.run.environment import Down, EnvironmentWatch, Part
from harness.run.keys import HEAD_STARTS_KEY, LATE_KEY, LOCK_KEY, TARGET_KEY, WATCH_KEY, run_config
from harness.setup import preflight
from harness.setup.queue_model import apply_queue_model, may_create_queue_model
from harness.targets.target import Target, connect

SWEEP_TIMEOUT_S = 30.0


def apply_queue_model_if_allowed(target: Target, profile: Profile, slurm: bool = False) -> bool:
    if not may_create_queue_model(target):
        return False
    with target.seam.requests.not_the_runners():  # an admin's set-up, not in the runner's role
        apply_queue_model(target.as_admin(), profile, say=lambda _: None, slurm=slurm)
    return True


def _terminated(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _say_live(config: pytest.Config, line: str) -> None:
    """A progress line on the terminal now, not in a test's captured output."""
    capture = config.pluginmanager.getplugin("capturemanager")
    writer = config.get_terminal_writer()
    if capture is None:
        writer.line(line)
        return
    with capture.global_and_fixture_disabled():
        if writer.width_of_current_line:  # after pytest's own progress characters: a line of its own
            writer.line()
        writer.line(line)


def connected(config: pytest.Config) -> Target:
    """Connect, take the run lock, pass the preflight (or end the run with its table), once per session."""
    if TARGET_KEY not in config.stash:
        cfg = run_config(config)
        config.stash[TARGET_KEY] = found = connect(cfg)
        take_run_lock(config, found, cfg)
        preflight_or_exit(config, found, cfg)
        remember_tenant_secrets(config, found, cfg.profile)
        logged = functools.partial(sim_faults, found) if found.features.own_processes else None
        config.stash[WATCH_KEY] = EnvironmentWatch(environment_parts(found), logged).start()
    return config.stash[TARGET_KEY]


def start_head_starts(session: pytest.Session, target: Target) -> None:
    cfg = run_config(session.config)
    late = session.config.stash.get(LATE_KEY, set())  # as the items were ordered
    started = session.config.stash.setdefault(HEAD_STARTS_KEY, {})
    for item in session.items:
        name, mark = headstart.backend_of(item), headstart.marked(item)
        if name not in late or mark is None or headstart.skipped(item) or \
                not headstart.wanted_here(item, backend_registry.ALL, target.features):
            continue
        backend = backend_registry.ALL[name]
        if backend_unavailable(name, target) or backend.jobs_on_kubernetes:
            continue  # SKIP when its turn comes; only a job system outside Kubernetes needs no queue model first
        try:
            jobs = backend.job_system(target, cfg.profile, cfg.run_id, item.nodeid, cfg.apply_queue_model)
        except (HarnessError, ConfigError):
            continue  # the case meets it again in its turn, and says so
        started[item.nodeid] = headstart.HeadStart(item.nodeid, name, jobs).run(mark[0], backend, cfg.profile)
        progress.say(f"▶ head start: {record.criterion_of(item)} [{name}] observes from now, beside the cases "
                     f"before it ({item.nodeid})")


def preflight_or_exit(config: pytest.Config, target: Target, cfg: RunConfig) -> None:
    """The preflight's table: its warnings shown, a blocking problem ends the run before any case starts."""
    checks = preflight.run_preflight(target, cfg)
    writer = config.get_terminal_writer()
    if preflight.blocked(checks):
        pytest.exit(f"gpupoc: the cluster is not ready for this run\n{preflight.table(checks)}", returncode=2)
    for check in checks:
        if check.status != preflight.OK:
            writer.line(f"gpupoc: preflight: {check.line()}", yellow=True)


def remember_tenant_secrets(config: pytest.Config, target: Target, profile: Profile) -> None:
    """The values of the Secrets in the tenants' namespaces are redacted wherever they would appear."""
    core = client.CoreV1Api(target.api)
    for tenant in profile.tenants:
        try:
            record.remember_secrets(config, core, tenant.namespace)
        except (client.ApiException, HarnessError, OSError):
            continue  # not there yet (the queue model creates it) or not readable: nothing of it to redact


def take_run_lock(config: pytest.Config, target: Target, cfg: RunConfig) -> None:
    """One run at a time on a cluster (harness.cluster.runlock); a run that finds it held stops with EXIT_LOCKED."""
    if cfg.run_lock is None:
        return
    lock = RunLock(target.api, *cfg.run_lock, identity(cfg.run_id))
    writer = config.get_terminal_writer()
    try:
        lock.acquire(cfg.wait_lock_s, say=lambda line: writer.line(line, yellow=True))
    except LockHeld as exc:
        pytest.exit(f"gpupoc: {exc}", returncode=EXIT_LOCKED)
    config.stash[LOCK_KEY] = lock
    if lock.owned:  # this run holds the cluster: what gpupoc objects remain belong to runs that died
        stale = sweep(target.api, None, SWEEP_TIMEOUT_S, say=lambda _: None, namespaces_by=target.admin)
        if stale:
            writer.line(f"gpupoc: what earlier runs left is still there: {'; '.join(stale)}", yellow=True)


def environment_parts(target: Target) -> list[Part]:
    """What the environment watch samples: on the sim, each of its processes (running, not frozen). On other
    targets the seam and the Prometheus client see outages of what they call."""
    return [Part(name, problem) for name, problem in target.component_checks()]


def sim_faults(target: Target) -> list[Down]:
    return [Down(f["component"], f["problem"], f["from"], f["to"], injected=True) for f in target.faults_injected()]


_AVAILABILITY: dict[str, str | None] = {}  # backend -> why it is skipped here, asked once a run


def backend_unavailable(name: str, target: Target) -> str | None:
    if name not in _AVAILABILITY:
        _AVAILABILITY[name] = backend_registry.ALL[name].unavailable_reason(target)
    return _AVAILABILITY[name]


def write_requests_seen(config: pytest.Config, target: Target) -> None:
    """requests.json beside the record: what the runner asked of the API server, as RBAC requests (the
    least-privilege role in manifests/rbac/ is checked against it: `gpupoc rbac --check`)."""
    paths = config.stash.get(record.PATHS_KEY, None)
    if paths is not None:
        Path(paths["json"]).with_name(REQUESTS_FILE).write_text(
            json.dumps([r.as_dict() for r in target.seam.requests.sorted()], indent=1) + "\n")


def end_of_run(session: pytest.Session) -> None:
    """Ctrl-C or not: complete the record, sweep whatever this run left in the cluster, say what refused to go."""
    target = session.config.stash.get(TARGET_KEY, None)
    watch = session.config.stash.get(WATCH_KEY, None)
    if watch is not None:
        watch.stop()
    if target is not None:
        remember_tenant_secrets(session.config, target, run_config(session.config).profile)
    unclaimed = session.config.stash.get(HEAD_STARTS_KEY, {})
    for nodeid, left in list(unclaimed.items()):  # whose case never ended (interrupted)
        unclaimed.pop(nodeid, None)
        try:
            lines = left.jobs.close()
        except (HarnessError, ConfigError) as exc:
            lines = [f"the jobs of {nodeid}'s head start: {exc}"]
        for line in lines:
            session.config.get_terminal_writer().line(f"gpupoc: left behind: {line}", yellow=True)
    record.finish(session, target)
    if target is None:
        return
    cfg = run_config(session.config)
    lock = session.config.stash.get(LOCK_KEY, None)
    try:
        try:
            leftovers = sweep(target.api, cfg.run_id, SWEEP_TIMEOUT_S, say=lambda _: None, namespaces_by=target.admin)
        except (client.ApiException, HarnessError, OSError) as exc:
            leftovers = [f"sweep of run {cfg.run_id} failed: {exc}; `gpupoc clean --run-id {cfg.run_id}` removes it"]
        for line in leftovers:
            session.config.get_terminal_writer().line(f"gpupoc: left behind: {line}", yellow=True)
        if lock is not None and lock.lost:
            session.config.get_terminal_writer().line(f"gpupoc: the run lock was {lock.lost} during this run: "
                                                      "another run may have shared the cluster", red=True)
    finally:
        if lock is not None:
            try:
                lock.release()
            except (client.ApiException, HarnessError, OSError) as exc:
                session.config.get_terminal_writer().line(f"gpupoc: run lock not released ({exc}); it expires by "
                                                          "itself", yellow=True)
        write_requests_seen(session.config, target)
        target.stop_if_started()

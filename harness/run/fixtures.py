"""The fixtures a suite asks for: the target, its API, the profile, Prometheus, a namespace per test, the backend,
its job system (`workloads`), evidence, and the guard of destructive steps."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from kubernetes import client

from harness import backends as backend_registry, criteria
from harness.run import headstart, collect as record, repeat
from harness.cluster.lag import observation_lag
from harness.backends import Backend
from harness.jobs.system import JobSystem
from harness.cluster.cleanup import namespace_gone, new_namespace, start_deleting_namespace
from harness.config.options import RunConfig
from harness.criteria.governance.audit import Submitted
from harness.criteria.governance.cost_attribution import Held
from harness.core.errors import HarnessError
from harness.record.evidence import Evidence
from harness.setup.references import describe_missing, missing_references
from harness.config.profile import Profile
from harness.cluster.prometheus import Prometheus
from harness.cluster.safety import destructive_refusal
from harness.targets.target import Target
from harness.run.keys import (CALL_REPORT_KEY, DISRUPTED_KEY, EVIDENCE_KEY, HEAD_STARTS_KEY, HELD_KEY, LOCK_KEY,
                              RESERVED_KEY, SUBMITTED_KEY, run_config)
from harness.serving.traffic import stop_clients
from harness.run.session import apply_queue_model_if_allowed, backend_unavailable, connected


@pytest.fixture(scope="session")
def gpupoc_config(pytestconfig: pytest.Config) -> RunConfig:
    return run_config(pytestconfig)


@pytest.fixture(scope="session")
def target(pytestconfig: pytest.Config, gpupoc_config: RunConfig) -> Target:
    """The cluster under test, connected once per session (the sim is started when it is the target)."""
    return connected(pytestconfig)


@pytest.fixture()
def disrupts(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """disrupts("kueue"): this test takes that part of the environment down on purpose; the environment watch does
    not hold it against the test."""
    return lambda part: request.node.stash.setdefault(DISRUPTED_KEY, set()).add(part)


@pytest.fixture(scope="session")
def api(target: Target) -> client.ApiClient:
    return target.api


@pytest.fixture(scope="session")
def profile(gpupoc_config: RunConfig) -> Profile:
    return gpupoc_config.profile


@pytest.fixture(scope="session")
def prometheus(target: Target) -> Prometheus:
    """Prometheus of the target; ERROR (not FAIL) for the tests that need it when it is absent or down."""
    if not target.prometheus_url:
        raise HarnessError("no Prometheus for this target: pass --prometheus-url or set prometheus.url in the profile")
    prom = Prometheus(target.prometheus_url, budget_s=target.seam.budget_s, log=target.seam.log)
    reason = prom.reachable_reason()
    if reason:
        raise HarnessError(reason)
    return prom


@pytest.fixture(scope="session")
def namespaces_going(target: Target, gpupoc_config: RunConfig, request: pytest.FixtureRequest
                     ) -> Iterator[dict[str, str]]:
    """The `namespace`s deleted at their tests' teardowns (name -> test): waited for once, at the session's end, and
    what is still there put on the test that made it (each deletion takes kube's namespace controller 5-10 s)."""
    going: dict[str, str] = {}
    yield going
    core = client.CoreV1Api(target.admin_api)
    for name, nodeid in going.items():
        leftover = namespace_gone(core, name, gpupoc_config.profile.timeouts.cleanup)
        record.amend_result(request.config, nodeid, [], [leftover] if leftover else [])


@pytest.fixture()
def namespace(target: Target, gpupoc_config: RunConfig, namespaces_going: dict[str, str],
              request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace labelled with the run and the test, deleted at teardown (gone by the session's end, within the
    cleanup timeout). Made by the target's admin where the runner has an identity of its own (no case of the suites
    asks for one: the project's own tests do)."""
    core = client.CoreV1Api(target.admin_api)
    name = new_namespace(core, gpupoc_config.run_id, request.node.nodeid)
    yield name
    record.remember_secrets(request.config, core, name)
    if start_deleting_namespace(core, name):
        namespaces_going[name] = request.node.nodeid


@pytest.fixture()
def backend(request: pytest.FixtureRequest, target: Target) -> Backend:
    name: str = request.param
    reason = backend_unavailable(name, target)
    if reason:
        pytest.skip(reason)
    chosen = backend_registry.ALL[name]
    if chosen.criteria and record.criterion_of(request.node) not in chosen.criteria:
        pytest.skip(f"{name}: {chosen.criteria_reason}")
    return chosen


@pytest.fixture()
def head_start(request: pytest.FixtureRequest) -> headstart.HeadStart | None:
    """This case's head start (harness/run/headstart.py), if the session gave it one."""
    return request.config.stash.get(HEAD_STARTS_KEY, {}).get(request.node.nodeid)


@pytest.fixture(scope="session")
def queue_model(target: Target, gpupoc_config: RunConfig) -> Profile:
    """The tenants' queues exist: applied from manifests/setup/ on the sim and kind (unless --queue-model keep),
    the cluster's own elsewhere."""
    if gpupoc_config.apply_queue_model:
        apply_queue_model_if_allowed(target, gpupoc_config.profile, slurm="slurm" in gpupoc_config.backends)
    else:
        missing = missing_references(target.api, gpupoc_config.profile, gpupoc_config.backends)
        if missing:  # before any test creates anything
            pytest.exit(f"gpupoc: {describe_missing(missing)}", returncode=2)
    return gpupoc_config.profile


@pytest.fixture()
def workloads(api: client.ApiClient, target: Target, backend: Backend, gpupoc_config: RunConfig, queue_model: Profile,
              request: pytest.FixtureRequest) -> Iterator[JobSystem]:
    """Submit jobs through this test's backend; what it created is deleted at teardown, leftovers reported."""
    head_starts = request.config.stash.get(HEAD_STARTS_KEY, {})
    for other in head_starts.values():  # it shares their cluster: its jobs go in once they have observed
        if other.backend == backend.name and other.nodeid != request.node.nodeid:
            other.wait(queue_model.timeouts.complete + headstart.MAX_S,
                       f"the head start of {other.nodeid} (its cluster is shared)")
    mine = head_starts.get(request.node.nodeid)
    jobs = mine.jobs if mine is not None else backend.job_system(target, queue_model, gpupoc_config.run_id,
                                                                 request.node.nodeid, gpupoc_config.apply_queue_model)
    yield jobs
    head_starts.pop(request.node.nodeid, None)  # its jobs are this teardown's, taken or not
    stop_clients()  # a probe or load generator the case left running (it failed before reading it)
    request.config.stash.setdefault(SUBMITTED_KEY, []).extend(jobs.created)
    call = request.node.stash.get(CALL_REPORT_KEY, None)
    try:
        diagnostics = jobs.diagnostics() if call is not None and call.failed else []
    finally:  # what the test submitted is deleted even when its system cannot be read
        leftovers = jobs.close()
    # after close: its members' watches saw each go (a pod still there holds its GPUs until now)
    now = time.time()
    request.config.stash.setdefault(HELD_KEY, []).extend(jobs.gpus_held(queue_model.gpu.resource, now))
    request.config.stash.setdefault(RESERVED_KEY, []).extend(jobs.gpus_reserved(queue_model.gpu.resource, now))
    record.amend_result(request.config, request.node.nodeid, diagnostics, leftovers, jobs.samples.as_list())


@pytest.fixture()
def submitted(pytestconfig: pytest.Config) -> list[Submitted]:
    """Every object the run's tests submitted so far (for the audit criterion, which runs last)."""
    found: list[Submitted] = pytestconfig.stash.get(SUBMITTED_KEY, [])
    return list(found)


@pytest.fixture()
def gpus_held(pytestconfig: pytest.Config) -> list[Held]:
    """When each pod the run's tests submitted so far held GPUs (for cost attribution, which runs last)."""
    found: list[Held] = pytestconfig.stash.get(HELD_KEY, [])
    return list(found)


@pytest.fixture()
def quota_reserved(pytestconfig: pytest.Config) -> list[Held]:
    """When each job the run's tests submitted so far held its queue's quota, where the queue reserves it at
    admission (Kueue's Workloads; for cost attribution, which runs last)."""
    found: list[Held] = pytestconfig.stash.get(RESERVED_KEY, [])
    return list(found)


@pytest.fixture()
def evidence(request: pytest.FixtureRequest, profile: Profile) -> Callable[[str], Evidence]:
    """evidence(criterion id) -> the Evidence this test fills, with the criterion's thresholds from the profile;
    it goes into the record."""
    backend_name = getattr(getattr(request.node, "callspec", None), "params", {}).get("backend", "-")

    lock = request.config.stash.get(LOCK_KEY, None)

    def lag() -> float | None:  # the harness's observation lag, on the run lock's Lease (cluster/lag.py)
        return None if lock is None else observation_lag(lock.api, lock.namespace, lock.name)

    def start(criterion_id: str) -> Evidence:
        found = Evidence.of(criteria.get(criterion_id), str(backend_name), profile.thresholds[criterion_id],
                            repeat.earlier_checks(request.node, criterion_id), lag)
        request.node.stash.setdefault(EVIDENCE_KEY, []).append(found)
        return found
    return start


@pytest.fixture()
def destructive_refused(target: Target, gpupoc_config: RunConfig) -> Callable[[str], str | None]:
    """destructive_refused("lose a node") -> why that step may not run on this target, or None: for a step that is
    one sub-check of a case (not checked where refused), not the whole case."""
    def refused(step: str) -> str | None:
        return destructive_refusal(target.features.own_processes, target.context, gpupoc_config.allow_destructive, step)
    return refused


@pytest.fixture()
def destructive(destructive_refused: Callable[[str], str | None]) -> Callable[[str], None]:
    """Call destructive("fail a pod") before a destructive step: it SKIPs where the step is not allowed."""
    def guard(step: str) -> None:
        reason = destructive_refused(step)
        if reason:
            pytest.skip(reason)
    return guard

"""pytest wiring of the record: results collected per test, environment at the end, JSON/HTML/JUnit written
even when the run fails or is interrupted, every file redacted."""

from __future__ import annotations

import base64
import copy
import json
import os
import platform
import subprocess
from dataclasses import asdict, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, TypeVar

import pytest
from kubernetes import client

from harness import __version__, backends as backend_registry
from harness.backends.slurm import SlurmBackend
from harness.config.options import RunConfig
from harness.core import estimate
from harness.core.errors import ConfigError, HarnessError
from harness.cluster.inventory import gpu_inventory
from harness.record.evidence import Evidence
from harness.record.model import Record, Result
from harness.record import operations
from harness.cluster.prometheus import Prometheus, PrometheusUnavailable
from harness.core.redact import environment_secrets, kubeconfig_secrets, known_secrets, redact, redact_text
from harness.record.render import sections
from harness.record.verdict import title
from harness.record.caveats import caveats
from harness.run.outcomes import load_changes, load_expected
from harness.core.paths import IN_CHECKOUT, REPO_ROOT
from harness.targets.target import Target, planned_features

RECORD_KEY = pytest.StashKey[Record]()
SECRETS_KEY = pytest.StashKey[set[str]]()
NOT_SECRET_KEYS = ("namespace", "ca.crt")  # a service-account token Secret's namespace is no secret
PATHS_KEY = pytest.StashKey[dict[str, Path]]()
# pytest-html's report object, whose title is the page's <title>: its title hook is given no config, so the title
# is kept here (set at the start from the options, completed at the end with the target the run found)
_PAGE: dict[str, Any] = {}
# A cluster's scheduler Deployments whose images name the releases the record shows. KAI's operator names its
# scheduler "<schedulerName>-<shard>" (pkg/operator/operands/scheduler: kai-scheduler-default by default).
SCHEDULER_DEPLOYMENTS = ("kueue-controller-manager", "volcano-scheduler", "volcano-controllers", "kuberay-operator",
                         "kai-scheduler", "kai-scheduler-default", "kube-scheduler")


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def git_commit() -> str:
    """The checkout's commit (+changes when it has some); installed from the wheel, the package's version."""
    if not IN_CHECKOUT:
        return f"gpupoc {__version__} (installed)"
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True,
                             timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=REPO_ROOT, capture_output=True, text=True,
                               timeout=5).stdout.strip()
        return (out.stdout.strip() or "unknown") + ("+changes" if dirty else "")
    except OSError:
        return "unknown"


def start(config: pytest.Config, cfg: RunConfig) -> None:
    """Paths of this run's files (set before pytest-html and junitxml read them), and an empty record."""
    folder = cfg.reports_dir / cfg.run_id
    paths = {"dir": folder, "html": folder / "record.html", "json": folder / "record.json",
             "junit": folder / "junit.xml"}
    config.stash[PATHS_KEY] = paths
    if config.pluginmanager.hasplugin("html") and not config.getoption("htmlpath", None):
        config.option.htmlpath = str(paths["html"])
        config.option.self_contained_html = True
    if not getattr(config.option, "xmlpath", None):
        config.option.xmlpath = str(paths["junit"])
    profile = cfg.profile
    features = planned_features(cfg)
    where = "sim" if features.own_processes else cfg.context or (cfg.kubeconfig.name if cfg.kubeconfig else "in-cluster")
    _PAGE["title"] = f"gpupoc run {cfg.run_id} on {where}"
    designed = ({f"{d.criterion} [{d.backend}]": f"[{d.holds_for}] {d.why}" for d in load_expected()}
                if features.own_processes else {})
    config.stash[RECORD_KEY] = Record(
        run_id=cfg.run_id, started_at=now(), harness_version=__version__, commit=git_commit(),
        runner=(f"Python {platform.python_version()}, pytest {pytest.__version__}, "
                f"{platform.system()} {platform.machine()}"),
        profile={"name": profile.name, "source": profile.source, "thresholds": profile.thresholds,
                 "timeouts": asdict(profile.timeouts), "tenants": [asdict(t) for t in profile.tenants],
                 **({"scenarios": {k: list(v) for k, v in profile.scenarios.items()}} if profile.scenarios else {})},
        designed=designed)


def name_report(report: Any) -> None:
    """pytest-html's title hook: the page is named by the run and its target, not by its file."""
    _PAGE["report"] = report
    if "title" in _PAGE:
        report.title = _PAGE["title"]


def remember_secrets(config: pytest.Config, core: client.CoreV1Api, namespace: str) -> None:
    """Values of the Secrets in a namespace the run used, decoded and encoded: redacted wherever they appear."""
    found = config.stash.setdefault(SECRETS_KEY, set())
    for secret in core.list_namespaced_secret(namespace).items:
        for key, encoded in (secret.data or {}).items():
            if key in NOT_SECRET_KEYS:
                continue
            found.add(encoded)
            try:
                found.add(base64.b64decode(encoded).decode())
            except (ValueError, UnicodeDecodeError):
                pass


def remember_value(config: pytest.Config, value: str) -> None:
    """A credential the run obtained (a tenant's token): redacted wherever it would appear."""
    config.stash.setdefault(SECRETS_KEY, set()).add(value)


def profile_names(config: pytest.Config) -> set[str]:
    record = config.stash.get(RECORD_KEY, None)
    tenants = (record.profile.get("tenants") if record else None) or []
    return {str(v) for t in tenants for v in (t.get("name"), t.get("namespace"), t.get("identity"),
                                               *(t.get("queues") or {}).values(),
                                               *(t.get("dev_queues") or {}).values()) if v}


def all_secrets(config: pytest.Config, target: Target | None) -> tuple[str, ...]:
    """Every value to redact: the runner's credentials, its kubeconfig's, secret-named environment variables, and
    the Secrets of the namespaces the run used."""
    remembered: set[str] = config.stash.get(SECRETS_KEY, set())
    held = (known_secrets(target.api) + known_secrets(target.admin)) if target else ()  # the runner's, the admin's
    found = held + environment_secrets(dict(os.environ)) + tuple(remembered)
    kubeconfig = target.seam.kubeconfig if target else None
    if kubeconfig is not None:
        try:
            found += kubeconfig_secrets(kubeconfig.read_text())
        except OSError:
            pass
    names = profile_names(config)  # a tenant's namespace or queue is never redacted, whatever a Secret holds
    return tuple(sorted(set(found) - names, key=len, reverse=True))  # the longest first: one containing another


def evidence_dict(ev: Evidence) -> dict[str, Any]:
    data = {f.name: copy.deepcopy(getattr(ev, f.name)) for f in fields(ev)
            if not f.name.startswith("_") and f.name != "checks"}
    data["checks"] = [{**{f.name: getattr(c, f.name) for f in fields(c) if f.name != "estimate"},
                       "passed": c.passed, "verdict": c.verdict,
                       **({"pool": pool} if c.estimate and (pool := estimate.kept(c.estimate)) else {})}
                      for c in ev.checks]
    return data


def criterion_of(item: pytest.Item) -> str:
    """The criterion id of a test's module (its CRITERION), else the test file: for results with no evidence."""
    spec = getattr(getattr(item, "module", None), "CRITERION", None)
    return str(getattr(spec, "id", spec) or item.nodeid.split("::")[0])


def add_result(config: pytest.Config, item: pytest.Item, report: pytest.TestReport, outcome: str,
               evidence: list[Evidence]) -> None:
    record = config.stash.get(RECORD_KEY, None)
    if record is None:
        return
    criterion = evidence[0].criterion if evidence else criterion_of(item)
    params = getattr(getattr(item, "callspec", None), "params", {})
    message = "" if outcome == "PASS" else _message(report)
    causes = [str(v) for k, v in report.user_properties if k == "gpupoc_environment"]
    if causes:
        message = "\n".join([*causes, message])
    record.results.append(Result(item.nodeid, criterion, str(params.get("backend", "-")), outcome, message,
                                 round(report.duration, 3), [evidence_dict(e) for e in evidence]))


def _message(report: pytest.TestReport) -> str:
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(report.longrepr, "reprcrash", None)
    return str(crash.message) if crash is not None else str(report.longrepr)[-2000:]


def amend_result(config: pytest.Config, nodeid: str, diagnostics: list[str], leftovers: list[str],
                 samples: list[dict[str, Any]] | None = None) -> None:
    """After teardown: what the test's cleanup found (events and logs of a failed test, objects left behind), and
    the task samples (what it submitted, one per shape)."""
    record = config.stash.get(RECORD_KEY, None)
    if record is None:
        return
    for result in record.results:
        if result.nodeid == nodeid:
            result.leftovers += leftovers
            result.samples += samples or []
            if diagnostics and result.evidence:
                result.evidence[0]["diagnostics"] = result.evidence[0].get("diagnostics", []) + diagnostics
            elif diagnostics:
                result.message += "\n" + "\n".join(diagnostics)


def mark_unfinished(session: pytest.Session) -> None:
    record = session.config.stash.get(RECORD_KEY, None)
    if record is None:
        return
    done = {r.nodeid for r in record.results}
    for item in session.items:
        if item.nodeid not in done:
            params = getattr(getattr(item, "callspec", None), "params", {})
            record.results.append(Result(item.nodeid, criterion_of(item), str(params.get("backend", "-")), "UNFINISHED",
                                         "the run stopped before this test finished"))


def describe_environment(record: Record, target: Target | None) -> None:
    if target is None:
        record.target = {"kind": "not connected", "context": "-", "api_url": "-", "kubernetes_version": "-",
                         "providers": [], "instance_types": []}
        return
    nodes = [target.api.sanitize_for_serialization(n) for n in client.CoreV1Api(target.api).list_node().items]
    inventory = gpu_inventory(nodes)
    record.nodes = [asdict(g) for g in inventory]
    record.target = {"kind": target.kind, "context": target.context, "api_url": target.host,
                     "kubernetes_version": target.kubernetes_version,
                     "providers": sorted({g.provider for g in inventory}) or ["unknown"],
                     "instance_types": sorted({g.instance_type for g in inventory}) or ["unknown"]}
    record.schedulers = scheduler_versions(target)
    slurm = backend_registry.ALL.get("slurm")  # described where the run has a case on it (5 requests to slurmrestd)
    if isinstance(slurm, SlurmBackend) and any(r.backend == "slurm" for r in record.results) and slurm.site():
        record.slurm = slurm.describe(simulated=target.features.simulated_gpus)
    try:
        record.operations = describe_operations(record, target)
    except (client.ApiException, HarnessError, OSError) as exc:  # the rest of the record stands without it
        record.operations = {"-": {"error": f"operations not described: {exc}"}}


def describe_operations(record: Record, target: Target) -> dict[str, dict[str, Any]]:
    """Per backend of the run: components and versions, CRDs and webhooks, CPU and memory over the run."""
    names = sorted({r.backend for r in record.results if r.backend in backend_registry.ALL})
    crds, crds_error = readable(lambda: crd_kinds(target.api))
    hooks, hooks_error = readable(lambda: webhook_configurations(target.api))
    window_s = (datetime.now(timezone.utc) - datetime.fromisoformat(record.started_at)).total_seconds()
    usage, usage_error = process_usage(target, window_s)
    found: dict[str, dict[str, Any]] = {}
    for name in names:
        controllers = backend_registry.ALL[name].controllers
        processes = tuple(dict.fromkeys((*controllers.sim, *controllers.needs))) if controllers else ()
        deployments = controllers.deployments if controllers else ()
        parts = operations.components(processes, deployments, record.schedulers, target.features.own_processes)
        found[name] = {"components": parts, "crds": operations.crds_by_group(crds, name),
                       "webhooks": operations.webhooks_of(hooks, name), "window_s": round(window_s, 1),
                       "usage": operations.usage_rows([p["name"] for p in parts], usage, window_s),
                       "usage_error": usage_error, "crds_error": crds_error, "webhooks_error": hooks_error}
    return found


def crd_kinds(api: client.ApiClient) -> list[tuple[str, str]]:
    """(group, kind) of every CRD, read as JSON: the client's models of their schemas took 0.4 s a run to build."""
    raw = client.ApiextensionsV1Api(api).list_custom_resource_definition(_preload_content=False)
    return [(c["spec"]["group"], c["spec"]["names"]["kind"]) for c in json.loads(raw.data)["items"]]


T = TypeVar("T")


def readable(read: Callable[[], list[T]]) -> tuple[list[T], str]:
    """What a read gave, or nothing and why (a least-privilege runner may not list CRDs or webhooks)."""
    try:
        return read(), ""
    except client.ApiException as exc:
        return [], f"not readable by the runner: {exc.status} {exc.reason}"


def webhook_configurations(api: client.ApiClient) -> list[dict[str, Any]]:
    """Every admission webhook configuration: kind, name, and each hook with what it calls (a Service or a URL)."""
    admission = client.AdmissionregistrationV1Api(api)
    found = []
    for kind, items in (("ValidatingWebhookConfiguration", admission.list_validating_webhook_configuration().items),
                        ("MutatingWebhookConfiguration", admission.list_mutating_webhook_configuration().items)):
        for config in items:
            hooks = [{"name": h.name, "calls": _calls(h.client_config)} for h in config.webhooks or []]
            found.append({"kind": kind, "name": config.metadata.name, "hooks": hooks})
    return found


def _calls(config: Any) -> str:
    service = getattr(config, "service", None)
    if service is not None:
        return f"service {service.namespace}/{service.name}"
    return str(getattr(config, "url", "") or "").split("?")[0]


def process_usage(target: Target, window_s: float) -> tuple[dict[str, operations.Usage], str]:
    """CPU seconds and peak memory of every scrape job over the run, and why not when they cannot be read."""
    if not target.prometheus_url:
        return {}, "no Prometheus for this target"
    if window_s < operations.MIN_WINDOW_S:
        return {}, f"the run lasted {window_s:.0f}s: too short for rates over Prometheus's scrapes"
    prom = Prometheus(target.prometheus_url, budget_s=target.seam.budget_s, log=target.seam.log)
    window = int(window_s)
    try:
        cpu = prom.instant(operations.CPU_QUERY.format(window=window))
        memory = prom.instant(operations.MEMORY_QUERY.format(window=window))
    except PrometheusUnavailable as exc:
        return {}, str(exc)
    return operations.usage_by_job([(s.labels, s.value) for s in cpu], [(s.labels, s.value) for s in memory]), ""


def scheduler_versions(target: Target) -> list[dict[str, str]]:
    if target.features.own_processes:
        return [{"name": name, "version": version} for name, version in target.component_versions()]
    apps = client.AppsV1Api(target.api)
    found = []
    for name in SCHEDULER_DEPLOYMENTS:
        for d in apps.list_deployment_for_all_namespaces(field_selector=f"metadata.name={name}").items:
            images = ", ".join(c.image for c in d.spec.template.spec.containers)
            found.append({"name": f"{d.metadata.namespace}/{name}", "version": images})
    return found


def finish(session: pytest.Session, target: Target | None) -> None:
    """Complete the record and write its JSON (the HTML is written by pytest-html from it)."""
    record = session.config.stash.get(RECORD_KEY, None)
    if record is None:
        return
    mark_unfinished(session)
    record.interrupted = bool(session.shouldstop) or session.exitstatus == pytest.ExitCode.INTERRUPTED
    record.finished_at = now()
    try:
        describe_environment(record, target)
    except Exception as exc:  # the record is written whatever broke; say what could not be described
        record.target = {**record.target, "error": f"environment not described: {exc}"}
    try:
        record.caveats = caveats(record, load_changes())
    except ConfigError as exc:  # suites/releases.yaml broken: the record says so where the caveats would be
        record.caveats = {"-": f"releases not read: {exc}"}
    secrets = all_secrets(session.config, target)
    redacted = Record(**{**asdict(record), "results": []})
    redacted.results = [Result(**redact(asdict(r), secrets)) for r in record.results]
    redacted.target, redacted.profile = redact(redacted.target, secrets), redact(redacted.profile, secrets)
    redacted.operations = redact(redacted.operations, secrets)
    _PAGE["title"] = title(redacted)
    if "report" in _PAGE:
        _PAGE["report"].title = _PAGE["title"]
    session.config.stash[RECORD_KEY] = redacted
    redacted.write(session.config.stash[PATHS_KEY]["json"])


def html_sections(config: pytest.Config) -> str:
    record = config.stash.get(RECORD_KEY, None)
    return sections(record) if record is not None else ""


def redact_files(config: pytest.Config, target: Target | None) -> None:
    """Last step: whatever pytest-html and junitxml captured (logs, tracebacks) is redacted on disk too."""
    paths = config.stash.get(PATHS_KEY, None)
    if paths is None:
        return
    secrets = all_secrets(config, target)
    for key in ("html", "junit", "json"):
        path = Path(config.getoption("htmlpath", None) or paths["html"]) if key == "html" else paths[key]
        if path.exists():
            path.write_text(redact_text(path.read_text(errors="replace"), secrets))

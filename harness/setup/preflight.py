"""`gpupoc preflight` (also run at the start of each run): is this cluster ready for the POC, and may the runner do
what the suites will ask? One table, each line OK or what is missing with the fix; a blocking problem stops the
run at once with that table, instead of every case timing out.

Checked: the API server (reachable, version), the runner's permissions (a SelfSubjectAccessReview per verb the
runner's role names, manifests/rbac/), each backend (CRDs served, controller running, the tenants' queues present,
open and not held), GPU nodes and their labels, Prometheus (reachable, each series the backends' catalogues need).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from harness.cluster.apply import dynamic_client
from harness import backends as registry
from harness.config.options import RunConfig
from harness.cluster.inventory import cluster_inventory
from harness.config.profile import GpuSizes
from harness.cluster.prometheus import Prometheus, PrometheusUnavailable
from harness.cluster.rbac import Request, runner_manifests
from harness.setup.references import QUEUE_KINDS, missing_references
from harness.config.workloads import TRAINER_IMAGE, WorkloadSpec
from harness.targets.target import Target

OK, MISSING, WARN = "OK", "MISSING", "WARN"
REVIEW_THREADS = 8
SSAR_TIMEOUT_S = 10


@dataclass(frozen=True)
class Check:
    area: str
    what: str
    status: str          # OK | MISSING | WARN
    fix: str = ""
    blocking: bool = False

    def line(self) -> str:
        return f"{self.status:<8} {self.area:<12} {self.what}" + (f" — {self.fix}" if self.fix else "")


def table(checks: list[Check]) -> str:
    blocking = [c for c in checks if c.status == MISSING and c.blocking]
    verdict = (f"{len(blocking)} blocking problem(s): the run cannot start" if blocking
               else "ready" + (f" ({sum(c.status != OK for c in checks)} problem(s) that block nothing)"
                               if any(c.status != OK for c in checks) else ""))
    return "\n".join([f"{'STATUS':<8} {'AREA':<12} CHECK", *(c.line() for c in checks), f"preflight: {verdict}"])


def blocked(checks: list[Check]) -> bool:
    return any(c.status == MISSING and c.blocking for c in checks)


# --- permissions -----------------------------------------------------------------------------------------------

def needed_permissions(docs: list[dict[str, Any]]) -> list[Request]:
    """Pure: one request per verb x resource x namespace the runner's role grants (resourceNames kept: impersonation
    of exactly the tenants' identities), i.e. what the suites may ask."""
    needed: set[Request] = set()
    for doc in docs:
        if doc.get("kind") not in ("ClusterRole", "Role"):
            continue
        namespace = doc["metadata"].get("namespace", "") if doc["kind"] == "Role" else ""
        for rule in doc.get("rules") or []:
            for group in rule.get("apiGroups") or [""]:
                for resource in rule.get("resources") or []:
                    base, _, sub = resource.partition("/")
                    for verb in rule.get("verbs") or []:
                        for name in rule.get("resourceNames") or [""]:
                            needed.add(Request(verb, group, base, sub, namespace, name))
    return sorted(needed)


def permission_checks(api: client.ApiClient, needed: list[Request]) -> list[Check]:
    """A SelfSubjectAccessReview per needed permission (in parallel); one line per missing one, one line for all
    that are there."""
    authz = client.AuthorizationV1Api(api)

    def review(r: Request) -> bool:
        attributes = {"verb": r.verb, "group": r.group, "resource": r.resource}
        attributes.update({k: v for k, v in (("subresource", r.subresource), ("namespace", r.namespace),
                                             ("name", r.name)) if v})
        answer = authz.create_self_subject_access_review(
            {"spec": {"resourceAttributes": attributes}}, _request_timeout=SSAR_TIMEOUT_S)
        return bool(answer.status.allowed)

    with ThreadPoolExecutor(REVIEW_THREADS) as pool:
        answers = list(pool.map(review, needed))
    missing = [r for r, ok in zip(needed, answers) if not ok]
    checks = [Check("permissions", f"{len(needed) - len(missing)} of {len(needed)} permissions the suites use",
                    OK if not missing else MISSING,
                    "" if not missing else "grant the runner its role: `gpupoc rbac --service-account NS/NAME "
                    "--apply` (as an admin)", blocking=bool(missing))]
    checks += [Check("permissions", f"may not {r.describe()}", MISSING, "add it to the runner's role",
                     blocking=True) for r in missing]
    return checks


# --- backends and queues ---------------------------------------------------------------------------------------

def queue_state_problem(kind: str, queue: dict[str, Any]) -> str | None:
    """Pure: why a queue will not admit (held, stopped, closed, inactive), None when it is open."""
    spec, status = queue.get("spec") or {}, queue.get("status") or {}
    if kind in ("ClusterQueue", "LocalQueue") and spec.get("stopPolicy", "None") != "None":
        return f"stopPolicy {spec['stopPolicy']}"
    if kind == "ClusterQueue":
        active = [c for c in status.get("conditions") or [] if c.get("type") == "Active"]
        if active and active[0].get("status") != "True":
            return f"not active ({active[0].get('reason')}: {active[0].get('message', '')[:120]})"
    if kind == "Queue" and status.get("state") not in (None, "Open"):
        return f"state {status.get('state')}"
    return None


def backend_checks(target: Target, cfg: RunConfig, queue_model_kept: bool) -> list[Check]:
    checks, api = [], target.api
    for name in cfg.backends:
        backend = registry.ALL[name]
        reason = backend.unavailable_reason(target)
        checks.append(Check("backend", f"{name}: CRDs served, controller running", OK if reason is None else WARN,
                            "" if reason is None else f"{reason}; its cases are SKIP (install it, or drop it from "
                                                      "--backends)"))
        if reason is None and queue_model_kept and name in QUEUE_KINDS:
            checks += queue_checks(api, cfg, name)
    if queue_model_kept:
        missing = missing_references(api, cfg.profile, cfg.backends)
        checks += [Check("queues", f"{m} (named in the profile)", MISSING, "create it, or fix the profile",
                         blocking=True) for m in missing]
    return checks


def queue_checks(api: client.ApiClient, cfg: RunConfig, backend: str) -> list[Check]:
    api_version, kind, namespaced = QUEUE_KINDS[backend]
    dynamic = dynamic_client(api)  # one discovery for every queue looked up below
    resource = dynamic.resources.get(api_version=api_version, kind=kind)
    checks = []
    for tenant in cfg.profile.tenants:
        for queue in filter(None, (tenant.queues.get(backend), tenant.dev_queues.get(backend))):
            try:
                found = resource.get(name=queue, namespace=tenant.namespace if namespaced else None).to_dict()
            except NotFoundError:
                continue  # reported by missing_references, once
            objects = [(kind, found)]
            if kind == "LocalQueue":  # what admits is its ClusterQueue
                cq_name = (found.get("spec") or {}).get("clusterQueue", "")
                try:
                    cq = dynamic.resources.get(api_version=api_version, kind="ClusterQueue").get(
                        name=cq_name).to_dict()
                    objects.append(("ClusterQueue", cq))
                except (NotFoundError, ResourceNotFoundError):
                    checks.append(Check("queues", f"{backend}: LocalQueue {tenant.namespace}/{queue} points at "
                                        f"ClusterQueue {cq_name}, which is missing", MISSING,
                                        "create the ClusterQueue", blocking=True))
                    continue
            problems = [f"{k} {o['metadata']['name']}: {p}" for k, o in objects
                        if (p := queue_state_problem(k, o)) is not None]
            where = f"{tenant.namespace}/{queue}" if namespaced else queue
            checks.append(Check("queues", f"{backend}: {kind} {where} (tenant {tenant.name}) "
                                + ("open" if not problems else "; ".join(problems)),
                                OK if not problems else MISSING, "" if not problems else
                                "open the queue (clear its stopPolicy or state)", blocking=bool(problems)))
    return checks


# --- GPU nodes and Prometheus ----------------------------------------------------------------------------------

def gpu_checks(api: client.ApiClient, gpu: GpuSizes) -> list[Check]:
    resource, accelerator = gpu.resource, gpu.accelerator
    inventory = [g for g in cluster_inventory(api) if g.resource == resource]
    if not inventory:
        return [Check("gpu nodes", f"no node offers {resource}", MISSING,
                      f"install {accelerator.device_plugin}, or point at the GPU cluster", blocking=True)]
    unlabelled = [g.node for g in inventory if g.model in ("", "unknown") or not g.driver_version]
    models = sorted({f"{g.model} x{g.count}" for g in inventory})
    checks = [Check("gpu nodes", f"{len(inventory)} GPU node(s), {sum(g.count for g in inventory)} GPUs "
                    f"({', '.join(models)})", OK)]
    if unlabelled:
        checks.append(Check("gpu nodes", f"no GPU model or driver label on {', '.join(unlabelled[:5])}", WARN,
                            f"deploy {accelerator.discovery.tool} ({accelerator.discovery.model}, "
                            f"{', '.join(accelerator.discovery.driver[0])}) so the record names the GPU and driver"))
    return checks


def needed_series(backend_names: Iterable[str]) -> list[tuple[str, str, str]]:
    """(backend, need, selector) of every series the backends' catalogues need that exists without an event."""
    found = []
    for name in backend_names:
        monitoring = registry.ALL[name].monitoring
        for series in monitoring.series if monitoring else ():
            if series.selector and not series.event:
                found.append((name, series.need, series.selector))
    return found


def prometheus_checks(url: str | None, backend_names: Iterable[str]) -> list[Check]:
    if not url:
        return [Check("prometheus", "no Prometheus URL", WARN, "pass --prometheus-url (or prometheus.url in the "
                      "profile); the metric cross-checks are not checked without it")]
    prometheus = Prometheus(url, budget_s=0.0)
    reason = prometheus.reachable_reason()
    if reason:  # the cases that need it are ERROR at once (nothing waits on it); the rest can run
        return [Check("prometheus", f"{prometheus.url} does not answer as Prometheus", MISSING,
                      f"{reason}; the cases that need Prometheus are ERROR: fix --prometheus-url or its "
                      "credentials")]
    checks = [Check("prometheus", f"{prometheus.url} answers", OK)]
    try:
        names = prometheus.metric_names()
    except PrometheusUnavailable as exc:
        return checks + [Check("metrics", "the metric names Prometheus holds", WARN, str(exc))]
    for backend, need, selector in needed_series(backend_names):
        present = metric_name(selector) in names
        checks.append(Check("metrics", f"{backend}: {need} ({selector})", OK if present else WARN,
                            "" if present else f"never scraped: scrape {backend}'s metrics endpoint (a series that "
                                               "appears with the first job shows up once one has run); its "
                                               "cross-checks are not checked until then"))
    return checks


def metric_name(selector: str) -> str:
    """Pure: the metric name a series selector starts with."""
    found = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", selector)
    return found.group(0) if found else selector


def run_preflight(target: Target, cfg: RunConfig, say: Callable[[str], None] = lambda _: None) -> list[Check]:
    """Every check, in order; the runner's permissions are reviewed wherever it is not the admin (on the sim: when
    it runs as its own ServiceAccount, the default)."""
    checks = [Check("api", f"{target.host} answers, Kubernetes {target.kubernetes_version} ({target.kind}, "
                    f"context {target.context})", OK)]
    say("preflight: the runner's permissions")
    if not target.features.runner_is_admin or target.admin is not None:
        checks += permission_checks(target.api, needed_permissions(
            runner_manifests(cfg.profile, "runner/runner", cfg.run_lock)))
    say("preflight: backends and queues")
    try:
        checks += backend_checks(target, cfg, queue_model_kept=not cfg.apply_queue_model)
        checks += gpu_checks(target.api, cfg.profile.gpu)
    except client.ApiException as exc:
        checks.append(Check("api", f"a read the checks need was refused: {exc.status} {exc.reason}", MISSING,
                            "grant the runner its role (`gpupoc rbac`)", blocking=True))
    say("preflight: Prometheus")
    checks += prometheus_checks(target.prometheus_url, cfg.backends)
    # the sim reached through a kubeconfig or from a pod (as the runner's role is tested) runs the sim's workloads too
    checks += workload_checks(cfg.profile.workloads, target.features.runs_sim_workloads)
    return checks


def workload_checks(workloads: WorkloadSpec, runs_sim_workloads: bool) -> list[Check]:
    """Pure: what the pods run. Only the sim understands its own images and annotations: on any other target each
    one blocks the run (no pod could start: ImagePullBackOff), naming the profile field to set."""
    named = {"trainer": workloads.trainer.image, "model server": workloads.model_server.image,
             "Ray": workloads.ray_image, "GPU probe": workloads.gpu_probe_image}
    images = ", ".join(f"{what} {image or 'not named'}" for what, image in named.items())
    unnamed = [] if workloads.trainer.image else [  # every training case runs it
        Check("workloads", f"the profile names no {TRAINER_IMAGE}", MISSING,
              "name the image a training member runs (profiles/kind.yaml: busybox)", blocking=True)]
    sim_only = [] if runs_sim_workloads else workloads.sim_only()
    if not (unnamed or sim_only):
        return [Check("workloads", images, OK)]
    return unnamed + [Check("workloads", f"{field} is {value!r}, which only the sim runs", MISSING,
                            f"set {field} in the profile to what this cluster runs (profiles/kind.yaml: public images)"
                            if field != "workloads.sim_annotations" else f"set {field}: false in the profile",
                            blocking=True)
                      for field, value in sim_only]


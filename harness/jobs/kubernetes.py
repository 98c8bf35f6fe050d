"""Submitting abstract jobs through a backend, tracking them, and removing them after the test.

Suites submit into the tenants' namespaces (the queue model's); everything is labelled with the
run and the test, so teardown deletes exactly what this test created.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
import hashlib
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError
from kubernetes.dynamic.resource import Resource

from harness.cluster.apply import apply_objects, dynamic_client
from harness.jobs.model import ADMITTED, RUNNING, GangJob, JobKinds, JobStatus, MakesJobs, job_of, pod_state
from harness.jobs.service import ModelService
from harness.config.accelerators import DEFAULT
from harness.core.objects import created_at
from harness.criteria.governance.audit import Submitted
from harness.criteria.governance.cost_attribution import Held
from harness.criteria.governance.tenant_isolation import Attempt
from harness.criteria.training.topology_placement import domains_of
from harness.cluster.seam import service_account_user
from harness.config.profile import Tenant
from harness.cluster.inventory import KWOK_ANNOTATION
from harness.cluster.refusals import creation_refused, not_started
from harness.cluster.manifests import RUN_LABEL, TEST_LABEL, dressed, exit_request, label_value_for_test, labelled
from harness.config.workloads import WorkloadSpec
from harness.core.samples import Samples
from harness.core.timeline import Timeline, Transition, running_intervals, state_intervals, MEMBER_KIND
from harness.cluster.lost_node import LOST_NODE_TAINT, set_lost, taken_off
from harness.cluster.safety import require_ours
from harness.cluster.tracker import Tracker, describe_phase
from harness.core.errors import WaitTimeout
from harness.cluster.wait import wait_gone


FAIL_LABEL, FAIL_AFTER, EXIT_CODE = "sim.gpupoc.io/fail", "sim.gpupoc.io/fail-after", "sim.gpupoc.io/exit-code"
MEMBER_FAILURE_EXIT = 137
REFUSED_FOR_S = 15.0  # a refusal repeated this long is the platform's answer, not a moment's
REFUSAL_CHECK_S = 5.0
DIAGNOSTIC_LINES = 60
LOG_BYTES = 4096


NAME_TAG_LEN = 5


UIDS_PER_SELECTOR = 100  # the owned objects of a test's jobs are looked for this many at a time


_ATTEMPTS: dict[tuple[str, str], int] = {}  # (run id, test) -> job systems made for it in this process


@dataclass
class Workloads(MakesJobs):
    api: client.ApiClient
    backend: JobKinds
    run_id: str
    test: str
    delete_timeout_s: float
    # the client a tenant's jobs are submitted with: acting as the tenant (ClusterSeam.as_tenant), or the runner's
    submitter: Callable[[Tenant], client.ApiClient] | None = None
    simulated: bool = False  # the target is the sim: a member is failed by kwok's failure stage
    workload_spec: WorkloadSpec = field(default_factory=WorkloadSpec)  # the profile's: what its pods run
    gpu_resource: str = DEFAULT.resource  # the profile's accelerator: what its jobs' and services' pods ask for
    timeline: Timeline = field(default_factory=Timeline)
    _trackers: dict[tuple[str, str], Tracker] = field(default_factory=dict)
    _submitted: set[tuple[str, str, str]] = field(default_factory=set)  # (namespace, apiVersion, kind)
    _deleted: set[str] = field(default_factory=set)  # jobs this test deleted itself
    _uids: dict[str, set[str]] = field(default_factory=dict)  # namespace -> UIDs of the objects it submitted
    created: list[Submitted] = field(default_factory=list)  # what it submitted, to be found in the audit log
    _jobs: dict[str, GangJob] = field(default_factory=dict)  # name -> the job submitted
    _members: dict[tuple[str, str], dict[str, dict[str, Any]]] = field(default_factory=dict)  # (ns, job) -> pods
    samples: Samples = field(default_factory=Samples)  # what it submitted, one per shape, for the record
    _refusal_checked: float = float("-inf")  # when refused() last read the platform's facts
    _lost: list[str] = field(default_factory=list)  # nodes lose_node tainted and nothing has restored yet
    _attempt: int = field(default=1, init=False)

    @property
    def selector(self) -> str:
        return f"{RUN_LABEL}={self.run_id},{TEST_LABEL}={label_value_for_test(self.test)}"

    def __post_init__(self) -> None:
        # the how-manieth job system of this run and test: a case run again (an undecided verdict) gets a new one
        _ATTEMPTS[(self.run_id, self.test)] = self._attempt = _ATTEMPTS.get((self.run_id, self.test), 0) + 1

    def service(self, base: str, tenant: Tenant, **options: Any) -> ModelService:
        """A model service named for `base`, its servers asking for the profile's accelerator."""
        return ModelService(self.job_name(base), tenant, gpu_resource=self.gpu_resource, **options)

    def job_name(self, base: str) -> str:
        """`base` and a tag of this run, test and attempt: a name is never reused across tests, runs or a case's
        repeated runs (Volcano's job controller can keep a deleted job in its cache and wedge a new one of the same
        name: make poc's run 10 had 2 of team-a's jobs never start when the fairness case ran again at once)."""
        attempt = f"/{self._attempt}" if self._attempt > 1 else ""
        return f"{base}-{hashlib.sha256(f'{self.run_id}/{self.test}{attempt}'.encode()).hexdigest()[:NAME_TAG_LEN]}"

    def jobs(self, namespace: str) -> Tracker:
        """The tracker of this backend's job objects in `namespace` (one watch, started on first use)."""
        api_version, kind = self.backend.tracked_kind()
        fresh = (namespace, kind) not in self._trackers
        pods = self.pods(namespace) if _pod_fold(self.backend) else None  # first: the job's state reads them
        tracker = self.track(namespace, api_version, kind, lambda o: self.job_status(o).state,
                                lambda o: self.job_status(o).admitted_at)
        if fresh and pods is not None:  # a pod's change is a change of its job: record it, wake the waits
            def pod_changed(_event: str, pod: dict[str, Any]) -> None:
                job = tracker.objects.get(job_of(pod) or "")
                if job is not None:
                    status = self.job_status(job)
                    self.timeline.add(Transition(kind, job["metadata"]["name"], status.state, time.time(),
                                                 "MODIFIED", status.admitted_at))
                tracker.poke()
            pods.on_event(pod_changed)
        return tracker

    def job_status(self, obj: dict[str, Any]) -> JobStatus:
        """The state of a tracked job object; with its pods' for backends whose objects have no phase (KAI)."""
        fold = _pod_fold(self.backend)
        if fold is None:
            return self.backend.status(obj)
        name = obj["metadata"]["name"]
        # Deleted pods count too: KAI evicts a bare pod by deleting it, and nothing recreates it.
        members = list(self._members.get(((obj.get("metadata") or {}).get("namespace", ""), name), {}).values())
        if name in self._deleted:  # our own deletion is no eviction
            members = [p for p in members if not p["metadata"].get("deletionTimestamp")]
        return fold(obj, members)

    def owned(self, namespace: str) -> Tracker | None:
        """The objects a controller made for this backend's jobs in `namespace` (Kueue's Workloads), if any."""
        owned = self.backend.owned_kind()
        if owned is None:
            return None
        return self.track(namespace, owned.api_version, owned.kind, lambda o: owned.status(o).state,
                             lambda o: owned.status(o).admitted_at)

    def tracked_name(self, job: GangJob) -> str:
        """The name of the object tracking `job` (Kueue names a Workload job-<job>-<hash>)."""
        tracker = self.jobs(job.tenant.namespace)
        obj = job_object(job, {**tracker.gone, **tracker.objects})
        return str(obj["metadata"]["name"]) if obj is not None else job.name

    def pods(self, namespace: str) -> Tracker:
        fresh = (namespace, MEMBER_KIND) not in self._trackers
        tracker = self.track(namespace, "v1", MEMBER_KIND, pod_state, lambda _: None)
        if fresh:  # each job's pods, present or gone, by job: a job's state reads its own, not every pod's
            def index(_event: str, pod: dict[str, Any]) -> None:
                self._members.setdefault((namespace, job_of(pod) or ""), {})[pod["metadata"]["name"]] = pod
            tracker.on_event(index)
            for pod in [*list(tracker.gone.values()), *list(tracker.objects.values())]:  # seen before the listener
                self._members.setdefault((namespace, job_of(pod) or ""), {}).setdefault(pod["metadata"]["name"], pod)
        return tracker

    def members(self, namespace: str) -> Tracker:
        """A job's members on Kubernetes are its pods."""
        return self.pods(namespace)

    def fail_member(self, pod: dict[str, Any]) -> str:
        """The member's container is asked to exit with code 137 (its command reads its pod's annotations), a
        real failure its job's retry policy acts on; a pod on a kwok node of the sim is failed by kwok's stage."""
        require_ours(pod, "fail a pod")
        name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
        patch = exit_request(MEMBER_FAILURE_EXIT)
        if self.workload_spec.sim_annotations:  # the pods may be kwok's (the preflight allows it on the sim only)
            patch["metadata"]["labels"] = {FAIL_LABEL: "true"}
            patch["metadata"]["annotations"].update({FAIL_AFTER: "0s", EXIT_CODE: str(MEMBER_FAILURE_EXIT)})
        client.CoreV1Api(self.api).patch_namespaced_pod(name, namespace, patch)
        return f"pod {name} asked to fail (exit {MEMBER_FAILURE_EXIT})"

    def refused(self, jobs: list[GangJob]) -> str | None:
        if time.monotonic() - self._refusal_checked < REFUSAL_CHECK_S:  # a wait asks at each event: a read at most
            return None                                                     # every few seconds
        self._refusal_checked = time.monotonic()
        since_before = datetime.now(timezone.utc) - timedelta(seconds=REFUSED_FOR_S)
        for namespace in sorted({job.tenant.namespace for job in jobs}):
            names = {job.name for job in jobs}
            why = creation_refused(self.api, namespace, names, since_before) or not_started(
                [p for p in self.pods(namespace).objects.values() if job_of(p) in names])
            if why:
                return why
        return None

    def member_outcomes(self, members: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each ended container of the pods: its exit code and reason (the pod's status, as the kubelet reported it)
        and its log's last lines (pods/log; a pod on a kwok node has no kubelet to serve one)."""
        core = client.CoreV1Api(self.api)
        rows = []
        kwok: dict[str, bool] = {}
        for pod in members:
            node = str((pod.get("spec") or {}).get("nodeName") or "")
            if node and node not in kwok:
                kwok[node] = KWOK_ANNOTATION in (core.read_node(node).metadata.annotations or {})
            for status in (pod.get("status") or {}).get("containerStatuses") or []:
                ended = (status.get("state") or {}).get("terminated") or \
                    (status.get("lastState") or {}).get("terminated")
                if not ended:
                    continue
                rows.append({"member": pod["metadata"]["name"], "container": status.get("name"),
                             "exit code": ended.get("exitCode"), "reason": ended.get("reason"),
                             "log (last lines)": "(none: a kwok node has no kubelet to serve one)" if kwok.get(node)
                             else container_log(core, pod, str(status.get("name")))})
        return rows

    def member_log(self, member: dict[str, Any], container: str, previous: bool = False) -> str:
        return container_log(client.CoreV1Api(self.api), member, container, MEMBER_LOG_LINES, previous)

    def lose_node(self, node: str) -> str:
        """The node's pods are evicted by the cluster's own taint eviction, and nothing new is scheduled there."""
        set_lost(self.api, node, lost=True)
        self._lost.append(node)
        return (f"node {node} tainted {LOST_NODE_TAINT}:NoExecute: the taint eviction controller evicts its pods and "
                "nothing new is scheduled there")

    def restore_node(self, node: str) -> None:
        set_lost(self.api, node, lost=False)
        if node in self._lost:
            self._lost.remove(node)

    def capacity_nodes(self, resource: str, per_node: int) -> int:
        """Nodes offering a whole node's worth of GPUs, of those the profile's pods may land on (its node selector)."""
        return sum(1 for n in self._nodes() if int((n.status.allocatable or {}).get(resource, "0")) >= per_node)

    def node_domains(self, resource: str, per_node: int, level: str) -> dict[str, str]:
        whole = [n for n in self._nodes() if int((n.status.allocatable or {}).get(resource, "0")) >= per_node]
        return domains_of(self.api.sanitize_for_serialization(whole), level)

    def node_names(self) -> list[str]:
        """The nodes the profile's pods may land on (its node selector)."""
        return [n.metadata.name for n in self._nodes()]

    def _nodes(self) -> list[Any]:
        selector = ",".join(f"{k}={v}" for k, v in sorted(self.workload_spec.pod_defaults.node_selector.items()))
        return list(client.CoreV1Api(self.api).list_node(label_selector=selector or None).items)

    def track(self, namespace: str, api_version: str, kind: str,
              describe: Callable[[dict[str, Any]], str] = describe_phase,
              server_time: Callable[[dict[str, Any]], Any] = created_at, label_selector: str | None = None) -> Tracker:
        """One watch of any kind in `namespace` (this test's objects, or those `label_selector` picks: a
        controller's EndpointSlices of our Service), on the test's one timeline."""
        key = (namespace, kind)
        if key not in self._trackers:
            # Objects a controller made (Kueue's Workloads) carry no test label of ours: track the namespace,
            # filter by owner when reading.
            owned = self.backend.owned_kind()
            selector = label_selector or (None if owned is not None and kind == owned.kind else self.selector)
            self._trackers[key] = Tracker(self.api, api_version, kind, namespace=namespace, label_selector=selector,
                                          describe=describe, server_time=server_time,
                                          timeline=self.timeline).start()
        return self._trackers[key]

    def submit(self, job: GangJob) -> None:
        """Apply the job's manifests (labelled), with its namespace's job and pod watches already running."""
        namespace = job.tenant.namespace
        self.jobs(namespace)
        self.pods(namespace)
        self.owned(namespace)  # the quota its queue reserves for it (cost attribution)
        template = job.claim_template()
        manifests = dressed(labelled([*([template] if template else []), *self.backend.manifests(job)], self.run_id,
                                     self.test), self.workload_spec)
        self._jobs[job.name] = job
        self._submitted |= {(namespace, m["apiVersion"], m["kind"]) for m in manifests}
        for manifest in manifests:
            self.samples.add(manifest)
        api = self.submitter(job.tenant) if self.submitter is not None else self.api
        applied = apply_objects(api, manifests)
        self._uids.setdefault(namespace, set()).update(o.metadata.uid for o in applied)
        who = service_account_user(job.tenant) if self.submitter is not None and not job.tenant.context else ""
        dynamic = dynamic_client(self.api)
        for obj in applied:
            resource = _resource(dynamic, obj.apiVersion, obj.kind)
            stamp = created_at(obj.to_dict())
            if resource is not None and stamp is not None:
                self.created.append(Submitted(resource.name, resource.group or "", namespace, obj.metadata.name,
                                              stamp, who))

    def apply(self, tenant: Tenant, manifests: list[dict[str, Any]], queued: bool = False) -> list[Any]:
        """Apply objects that are not a gang job (a serving Deployment and its Service, in the tenant's serving
        namespace; an elastic RayCluster), as the tenant, labelled as this test's: deleted at teardown like its jobs
        (in their namespace); `queued`: what the backend's queue makes for them (Kueue's Workloads) is waited out
        too."""
        objects = dressed(labelled(manifests, self.run_id, self.test), self.workload_spec)
        self._submitted |= {(m["metadata"].get("namespace", tenant.namespace), m["apiVersion"], m["kind"])
                            for m in objects}
        for manifest in objects:
            self.samples.add(manifest)
        api = self.submitter(tenant) if self.submitter is not None else self.api
        for namespace in {m["metadata"].get("namespace", tenant.namespace) for m in objects}:
            self.owned(namespace)  # what the queue reserves for them, from the start (Kueue: a Workload per pod)
        applied = list(apply_objects(api, objects))
        if queued:
            for obj in applied:
                self._uids.setdefault(obj.metadata.namespace, set()).add(obj.metadata.uid)
        return applied

    def client_for(self, tenant: Tenant) -> client.ApiClient:
        """The client that acts for `tenant` (to scale or patch what it applied)."""
        return self.submitter(tenant) if self.submitter is not None else self.api

    def delete(self, job: GangJob) -> None:
        """Delete the job's objects (ours: created and labelled by this test), pods in the background."""
        self._deleted.add(job.name)
        dynamic = dynamic_client(self.api)
        for manifest in self.backend.manifests(job):
            resource = dynamic.resources.get(api_version=manifest["apiVersion"], kind=manifest["kind"])
            try:
                resource.delete(name=manifest["metadata"]["name"], namespace=job.tenant.namespace,
                                propagation_policy="Background")
            except NotFoundError:
                continue  # gone already (a scheduler may delete a gang's pods: KAI's stale gangs)

    def cross_tenant_attempts(self, me: Tenant, other: Tenant) -> list[Attempt] | None:
        return None  # Kubernetes: the RBAC matrix (test_tenant_isolation), once per cluster

    def end_while_stopped(self, jobs: list[GangJob], timeout_s: float) -> str:
        """Delete the jobs (the API server is up while the scheduler is not); return once their pods are gone."""
        for job in jobs:
            self.delete(job)
        names = {job.name for job in jobs}
        for namespace in sorted({job.tenant.namespace for job in jobs}):
            self.pods(namespace).wait_until(f"the pods of {len(names)} deleted jobs gone",
                                            lambda o: not any(job_of(p) in names for p in o.values()), timeout_s)
        return f"deleted {', '.join(sorted(names))}; their pods are gone"

    def status_of(self, job: GangJob, objects: dict[str, dict[str, Any]]) -> JobStatus | None:
        obj = job_object(job, objects)
        return self.job_status(obj) if obj is not None else None

    def diagnostics(self, max_lines: int = DIAGNOSTIC_LINES, max_log_bytes: int = LOG_BYTES) -> list[str]:
        """Events of the namespaces this test used, and the logs of its failed pods, bounded in size."""
        core = client.CoreV1Api(self.api)
        lines: list[str] = []
        for namespace in sorted({ns for ns, _, _ in self._submitted}):
            events = core.list_namespaced_event(namespace).items
            events.sort(key=lambda e: str(e.last_timestamp or e.event_time or e.metadata.creation_timestamp))
            lines += [f"{namespace} {e.type} {e.reason} {e.involved_object.kind}/{e.involved_object.name}: "
                      f"{(e.message or '').strip()[:300]}" for e in events[-max_lines:]]
            for pod in core.list_namespaced_pod(namespace, label_selector=self.selector).items:
                if pod.status.phase == "Failed":
                    lines.append(f"log of {namespace}/{pod.metadata.name}: {self._log(core, pod, max_log_bytes)}")
        return lines[-max_lines:]

    @staticmethod
    def _log(core: client.CoreV1Api, pod: Any, max_bytes: int) -> str:
        try:
            text = str(core.read_namespaced_pod_log(pod.metadata.name, pod.metadata.namespace, limit_bytes=max_bytes))
        except client.ApiException as exc:
            return f"(no log: {exc.reason}; simulated pods have no kubelet to serve logs)"
        return text[-max_bytes:]

    def gpus_held(self, resource: str, now: float) -> list[Held]:
        """When each of its pods held GPUs (running, from the watch events), for cost attribution over the run."""
        held = []
        for namespace, kind in list(self._trackers):
            if kind != MEMBER_KIND:
                continue
            pods = self._trackers[(namespace, kind)]
            seen = {**pods.gone, **pods.objects}
            for name, start, end in running_intervals(self.timeline, now):
                pod = seen.get(name)
                gpus = pod_gpus(pod, resource) if pod else 0
                job = self._jobs.get(job_of(pod) or "") if pod else None
                if gpus:  # a served model's replica: the queue it names (charged as a job of its own)
                    queue = self.backend.charged_queue(job) if job else self.backend.queue_named_on(pod or {})
                    held.append(Held(namespace, name, self.backend.name, queue, gpus, start, end,
                                     ((pod or {}).get("spec") or {}).get("nodeName") or ""))
        return held

    def gpus_reserved(self, resource: str, now: float) -> list[Held]:
        """When each of its jobs held its queue's quota of GPUs (the objects its backend's queue made for it,
        admitted, from the watch events): for a queue whose usage metric counts reservations (Kueue's)."""
        owned = self.backend.owned_kind()
        if owned is None or owned.reserved is None:
            return []
        held = []
        admitted = state_intervals(self.timeline, owned.kind, (ADMITTED, RUNNING), now)
        for (namespace, kind), tracker in list(self._trackers.items()):
            if kind != owned.kind:
                continue
            pods = self._trackers.get((namespace, MEMBER_KIND))
            # ours: made for our jobs, or for our pods (Kueue admits a served model's replica as a Workload of its own)
            ours = self._uids.get(namespace, set()) | {p["metadata"].get("uid") for p in (
                [*pods.gone.values(), *pods.objects.values()] if pods else [])}
            seen = {**tracker.gone, **tracker.objects}
            for name, start, end in admitted:
                obj = seen.get(name)
                meta = (obj or {}).get("metadata") or {}
                if obj is None or (meta.get("labels") or {}).get(owned.job_uid_label) not in ours:
                    continue
                queue, gpus = owned.reserved(obj, resource)
                owners = meta.get("ownerReferences") or [{}]
                job = self._jobs.get(owners[0].get("name", ""))
                queue = self.backend.charged_queue(job) if job else queue  # an eviction clears the admission's
                if gpus:
                    held.append(Held(namespace, name, self.backend.name, queue, int(gpus), start, end))
        return held

    def close(self) -> list[str]:
        """Stop the watches, delete what this test created, wait until gone; return what stayed.

        Gone means the objects, their pods and what a controller made for them (Kueue's Workloads, by the job
        UID label): a Workload lingering after its job (Kueue's finalizer) would show up in the next test's
        namespace as one of that test's.
        """
        # a case that ended early leaves no node tainted
        leftovers = [stays for node in self._lost if (stays := taken_off(self.api, node))]
        self._lost.clear()
        # the pods' watches see them go (when each stopped holding its GPUs), the queue's objects' theirs (when
        # each stopped holding quota: Kueue's Workloads); the others end now, each within one watch chunk
        owned = self.backend.owned_kind()
        kept = {MEMBER_KIND, *([owned.kind] if owned else [])}
        pod_watches = [t for (_, kind), t in self._trackers.items() if kind in kept]
        for tracker in self._trackers.values():
            if tracker not in pod_watches:
                tracker.stop(wait=False)
        try:  # the kept watches end whatever happens here (an API server down after a restart case)
            dynamic = dynamic_client(self.api)
            for namespace, api_version, kind in sorted(self._submitted):
                dynamic.resources.get(api_version=api_version, kind=kind).delete(
                    namespace=namespace, label_selector=self.selector, propagation_policy="Background")
            if self.simulated:  # the test is over: on the sim its serving pods need not drain (2 s each); a real
                for namespace in sorted({ns for ns, _, _ in self._submitted}):  # cluster's pods terminate as they do
                    client.CoreV1Api(self.api).delete_collection_namespaced_pod(
                        namespace, label_selector=self.selector, grace_period_seconds=0)

            deadline = time.monotonic() + self.delete_timeout_s  # one budget for all of it, not one per kind

            def wait_gone_or_report(list_func: Callable[..., Any], what: str, **selectors: Any) -> None:
                try:
                    wait_gone(list_func, what, timeout_s=max(1.0, deadline - time.monotonic()), **selectors)
                except WaitTimeout as exc:  # reported in the record, never silently ignored
                    leftovers.append(str(exc))

            owned_resource = _resource(dynamic, owned.api_version, owned.kind) if owned and self._uids else None
            for namespace in sorted({ns for ns, _, _ in self._submitted}):
                wait_gone_or_report(client.CoreV1Api(self.api).list_namespaced_pod, f"pods of {self.test} in {namespace}",
                                    namespace=namespace, label_selector=self.selector)
                if owned is None or owned_resource is None:
                    continue
                uids = sorted(self._uids.get(namespace, ()))
                for start in range(0, len(uids), UIDS_PER_SELECTOR):  # a selector of 10,000 UIDs is too long a URL
                    chosen = ",".join(uids[start:start + UIDS_PER_SELECTOR])
                    wait_gone_or_report(owned_resource.get, f"{owned.kind}s of {self.test} in {namespace}",
                                        namespace=namespace, label_selector=f"{owned.job_uid_label} in ({chosen})")
            for namespace, api_version, kind in sorted(self._submitted):  # and the objects themselves: a controller
                if kind != "Pod":  # still tearing down a burst of them (KubeRay's RayJobs) delays the next test's own
                    wait_gone_or_report(dynamic.resources.get(api_version=api_version, kind=kind).get,
                                        f"{kind}s of {self.test} in {namespace}", namespace=namespace,
                                        label_selector=self.selector)
        finally:
            for tracker in pod_watches:
                tracker.stop(wait=False)
        return leftovers


def pod_gpus(pod: dict[str, Any], resource: str) -> int:
    """The GPUs a pod asks for (its containers' limits, which is what an extended resource's request equals)."""
    containers = (pod.get("spec") or {}).get("containers") or []
    return sum(int(((c.get("resources") or {}).get("limits") or {}).get(resource, 0) or 0) for c in containers)


def _resource(dynamic: DynamicClient, api_version: str, kind: str) -> Resource | None:
    """The resource, or None on a cluster without it (its controller is not installed)."""
    try:
        return dynamic.resources.get(api_version=api_version, kind=kind)
    except ResourceNotFoundError:
        return None


PodFold = Callable[[dict[str, Any], list[dict[str, Any]]], JobStatus]


def _pod_fold(backend: JobKinds) -> PodFold | None:
    """`status_with_pods` of a backend whose job object has no phase of its own (KAI's PodGroup), else None."""
    fold: PodFold | None = getattr(backend, "status_with_pods", None)
    return fold


def job_object(job: GangJob, objects: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The tracked object of `job`: by name, or (Kueue Workloads) by the name of its owner."""
    found = objects.get(job.name)
    if found is not None:
        return found
    for obj in list(objects.values()):  # a copy in one step: a tracker's thread may be changing it (another lock)
        owners = (obj.get("metadata") or {}).get("ownerReferences") or []
        if any(o.get("name") == job.name for o in owners):
            return obj
    return None


LOG_TAIL_LINES = 5
MEMBER_LOG_LINES = 200


def container_log(core: client.CoreV1Api, pod: dict[str, Any], container: str, lines: int = LOG_TAIL_LINES,
                  previous: bool = False) -> str:
    """The last `lines` of a container's log through the API (pods/log), or why there is none."""
    meta = pod["metadata"]
    try:
        text = str(core.read_namespaced_pod_log(meta["name"], meta["namespace"], container=container,
                                                tail_lines=lines, previous=previous))
    except client.ApiException as exc:
        return f"(no log: {exc.status} {exc.reason}; a pod on a kwok node has no kubelet to serve one)"
    return text.strip()

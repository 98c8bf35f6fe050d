"""Slurm as a job system for the suites (harness.jobs.JobSystem), through slurmrestd: the REST API a real site
exposes, and the sim's own Slurm.

A gpupoc job is one Slurm batch job: `pods` nodes (tasks) x `gpus_per_pod` GPUs (GRES per node), in the tenant's
account, submitted as the tenant's user with that user's token (JWT), running a real batch script that sleeps for
the job's run time. Its *members* are its node allocations: member i names the i-th node of the job's allocation
once Slurm has started it (an allocation is all-or-nothing: every member gets its node at once, or none).

slurmrestd has no watch: jobs are read every POLL_S (one request shared by every tracker) and each change of a
job becomes an event, so the trackers, waits and timelines work unchanged. Times come from Slurm itself
(submit_time, start_time, end_time: slurmctld's clock).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from harness.jobs.model import (FAILED, JOB_LABEL, PREEMPTED, QUEUED, RUNNING, SUCCEEDED, GangJob, JobStatus, MakesJobs,
                                 pod_state)
from harness.core.objects import parse_time
from harness.criteria.governance.audit import Entry, Submitted
from harness.criteria.governance.cost_attribution import Held
from harness.criteria.governance.tenant_isolation import ALLOWED, NOT_APPLICABLE, REFUSED, Attempt
from harness.core.errors import ConfigError, HarnessError, Refused
from harness.config.profile import HOSTNAME, Tenant
from harness.core.samples import Samples
from harness.jobs.slurm.api import LEGACY, chosen, job_description, job_submit_body, legacy_answer
from harness.core.timeline import Timeline, running_intervals
from harness.cluster.tracker import Objects, Tracker
from harness.cluster.wait import as_field, poll

POLL_S = 0.25
REQUEST_TIMEOUT_S = 10.0
HTTP_UNAUTHORIZED = 401
# slurm_errno.h: ESLURM_ACCESS_DENIED, ESLURM_USER_ID_MISSING (an update of another user's job), ESLURM_INVALID_JOB_ID
# and ESLURM_REST_EMPTY_RESULT (what slurmctld and slurmdbd answer for a job PrivateData hides),
# ESLURM_INVALID_ACCOUNT, ESLURM_INVALID_QOS: not allowed for the user
REFUSALS = {2002, 2010, 2017, 2045, 2066, 9003}
OUTAGE_BUDGET_S = 30.0  # slurmrestd unreachable this long ends a tracker's watch (an ERROR naming it)
RECORDED_WITHIN_S = 10.0  # a submitted job is in slurmdbd's accounting
DBD_SETTLE_S = 30.0  # every job of a run is in slurmdbd's accounting, each run of it ended
NOT_PLACED = ("Resources", "Priority")  # a pending job's reasons once the scheduler has tried it
JOB_KIND, MEMBER_KIND = "SlurmJob", "Pod"
FAIL_EXIT = 42  # what a batch script exits with when failed on purpose
GANG_AS_ARRAY_ENV = "GPUPOC_SLURM_GANG_AS_ARRAY"
AUDIT_GROUP = "slurm"  # a Slurm job in the audit: its record is slurmdbd's, not the API server's audit log
NO_REQUEUE_ENV = "GPUPOC_SLURM_NO_REQUEUE"  # a deliberate misconfiguration: jobs submitted without requeue
TOPOLOGY_ENV = "GPUPOC_SLURM_TOPOLOGY"  # a site's topology.conf (a copy), where its leaf switches are read
# job_state -> the harness's states (a requeued job waits again: preempted, or held for a failed node)
STATES = {"PENDING": QUEUED, "CONFIGURING": RUNNING, "RUNNING": RUNNING, "COMPLETING": RUNNING,
          "COMPLETED": SUCCEEDED, "FAILED": FAILED, "TIMEOUT": FAILED, "NODE_FAIL": FAILED, "OUT_OF_MEMORY": FAILED,
          "BOOT_FAIL": FAILED, "DEADLINE": FAILED, "CANCELLED": FAILED, "PREEMPTED": PREEMPTED,
          "REQUEUED": PREEMPTED, "REQUEUE_FED": PREEMPTED, "REQUEUE_HOLD": PREEMPTED, "SUSPENDED": PREEMPTED}
LIVE = (QUEUED, RUNNING, PREEMPTED)  # states in which slurmctld still counts a job active
PHASES = {QUEUED: "Pending", RUNNING: "Running", SUCCEEDED: "Succeeded", FAILED: "Failed", PREEMPTED: "Pending"}


def expand_hostlist(hostlist: str) -> list[str]:
    """'gpu-node-[0-1,3],cpu-1' -> ['gpu-node-0', 'gpu-node-1', 'gpu-node-3', 'cpu-1'] (Slurm's hostlist form)."""
    names: list[str] = []
    for prefix, ranges, plain in re.findall(r"([^,\[]+)\[([^\]]+)\]|([^,\[\]]+)", hostlist or ""):
        if plain:
            names.append(plain)
            continue
        for part in ranges.split(","):
            low, _, high = part.partition("-")
            width = len(low)
            names += [f"{prefix}{i:0{width}d}" for i in range(int(low), int(high or low) + 1)]
    return names


def _at(epoch: Any) -> datetime | None:
    return datetime.fromtimestamp(int(epoch), timezone.utc) if epoch and int(epoch) > 0 else None


def _iso(epoch: Any) -> str | None:
    found = _at(epoch)
    return found.isoformat().replace("+00:00", "Z") if found else None


def leaf_switches(topology_conf: str) -> dict[str, str]:
    """Each node's leaf switch, from topology.conf's text (topology/tree: a switch that lists Nodes= is a leaf)."""
    found: dict[str, str] = {}
    for line in topology_conf.splitlines():
        fields = dict(part.split("=", 1) for part in line.split("#", 1)[0].split() if "=" in part)
        if "SwitchName" in fields and "Nodes" in fields:
            found.update({node: fields["SwitchName"] for node in expand_hostlist(fields["Nodes"])})
    return found


def placed_as(job: GangJob, nodes: Callable[[], list[str]], leaves: Callable[[], list[str]]) -> dict[str, Any]:
    """Where the job's nodes may be, as slurmrestd's job description says it (v0.0.38 refuses required_nodes and
    required_switches: "Disabled key"):
    - the node its hostname selector names: every other node of `nodes()` excluded;
    - a required placement: all its nodes under one leaf switch, as Slurm's matching OR over node features,
      `--constraint=[leaf-0|leaf-1|...]`, each node carrying its leaf switch's name as a feature.
    A preferred placement asks for nothing: topology/tree's own selection takes the fewest leaf switches anyway."""
    where: dict[str, Any] = {}
    selector = dict(job.node_selector)
    if node := selector.pop(HOSTNAME, None):
        where["exclude_nodes"] = ",".join(other for other in nodes() if other != node)
    if selector:
        raise HarnessError(f"{job.name}: Slurm places a job by node name only, not by {', '.join(selector)}")
    if job.placement is not None and job.placement.required:
        names = leaves()
        if not names:
            raise HarnessError(f"{job.name}: a placement within one leaf switch, but no topology.conf names a leaf")
        where["constraints"] = f"[{'|'.join(names)}]"
    return where


def job_object(job: dict[str, Any], namespace: str, version: str = LEGACY) -> dict[str, Any]:
    """A Slurm job (slurmrestd's view, in v0.0.38's shape) as the harness's job object: name, namespace (its
    tenant's), state, times; `version`: the openapi version spoken."""
    status = {"state": job.get("job_state", ""), "reason": job.get("state_reason", ""),
              "submitTime": _iso(job.get("submit_time")), "startTime": _iso(job.get("start_time")),
              "endTime": _iso(job.get("end_time")), "nodes": job.get("nodes", ""), "jobId": job.get("job_id"),
              "account": job.get("account", ""), "user": job.get("user_name", ""), "qos": job.get("qos", ""),
              "restarts": job.get("restart_cnt", 0), "nodeCount": job.get("node_count", 0),
              "exitCode": job.get("exit_code")}
    return _versioned({"apiVersion": f"slurm/{version}", "kind": JOB_KIND,
                       "metadata": {"name": job.get("name", ""), "namespace": namespace, "uid": str(job.get("job_id")),
                                    "labels": {JOB_LABEL: job.get("name", "")},
                                    "creationTimestamp": status["submitTime"]},
                       "status": status})


def member_objects(job: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
    """The job's node allocations as members: all bound to their nodes together once it started, none before. An
    array task is a job of its own: one member per task, each started when Slurm starts that task."""
    state = STATES.get(str(job.get("job_state", "")), QUEUED)
    if job.get("job_state") == "CANCELLED":
        return []
    nodes = expand_hostlist(str(job.get("nodes") or "")) if state in (RUNNING, SUCCEEDED, FAILED) else []
    name = str(job.get("name", ""))
    tasks = array_tasks(job)
    reason = str(job.get("state_reason") or "")
    # slurmctld tried and cannot start it now: as kube-scheduler says of a pod it could not place
    refusal = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
               "message": f"slurmctld: {reason}"} if state == QUEUED and reason in NOT_PLACED else None
    indices = [str(t) for t in tasks] if tasks is not None else \
        [str(i) for i in range(int(job.get("node_count") or len(nodes) or 1))]
    return [_versioned({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": f"{name}-{index}", "namespace": namespace, "labels": {JOB_LABEL: name},
                                     # a requeued job's allocation is a new one, as a replaced pod has a new uid
                                     "uid": f"{job.get('job_id')}.{job.get('restart_cnt') or 0}.{index}",
                                     "creationTimestamp": _iso(job.get("submit_time"))},
                        "spec": {"nodeName": nodes[i]} if i < len(nodes) else {},
                        "status": {"phase": PHASES[state], "startTime": _iso(job.get("start_time")),
                                   **({"conditions": [refusal]} if refusal and i >= len(nodes) else {})}})
            for i, index in enumerate(indices)]


def array_tasks(job: dict[str, Any]) -> list[int] | None:
    """The array task indices a record stands for (a started task: its own; the pending rest: the task string);
    None when the job is no array."""
    if not int(job.get("array_job_id") or 0):
        return None
    pending = str(job.get("array_task_string") or "").split("%")[0]
    if pending:
        return [int(n[1:]) for n in expand_hostlist(f"t[{pending}]")]
    task = job.get("array_task_id")
    return [int(task)] if isinstance(task, int) else []


def merged(records: list[dict[str, Any]]) -> dict[str, Any]:
    """An array's records (one per started task, one for the pending rest) as one job: running while any task
    runs, pending while any waits, else finished (failed if any task failed)."""
    if len(records) == 1:
        return records[0]
    states = [str(r.get("job_state", "")) for r in records]
    phases = [STATES.get(s, QUEUED) for s in states]
    state = next((s for s, p in zip(states, phases) if p == RUNNING), None) or \
        next((s for s, p in zip(states, phases) if p in (QUEUED, PREEMPTED)), None) or \
        next((s for s, p in zip(states, phases) if p == FAILED), states[0])
    started = [int(r.get("start_time") or 0) for r in records if STATES.get(str(r.get("job_state"))) != QUEUED
               and not never_started(str(r.get("job_state", "")), str(r.get("nodes") or ""))]
    return {**records[0], "job_state": state, "submit_time": min(int(r.get("submit_time") or 0) for r in records),
            "start_time": min((t for t in started if t > 0), default=0),
            "end_time": max(int(r.get("end_time") or 0) for r in records)}


def _versioned(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"]["resourceVersion"] = hashlib.sha1(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:12]
    return obj


def never_started(job_state: str, nodes: str) -> bool:
    """A job cancelled while pending: Slurm sets its start time to its end time, but it never ran on a node."""
    return job_state.startswith("CANCELLED") and not nodes


def status_of(obj: dict[str, Any]) -> JobStatus:
    status = obj.get("status") or {}
    state = STATES.get(str(status.get("state", "")), QUEUED)
    if never_started(str(status.get("state", "")), str(status.get("nodes") or "")):
        return JobStatus(FAILED, "cancelled while pending", parse_time(status.get("submitTime")), None,
                         parse_time(status.get("endTime")))
    return JobStatus(state, str(status.get("reason", "")), parse_time(status.get("submitTime")),
                     parse_time(status.get("startTime")) if state != QUEUED else None,
                     parse_time(status.get("endTime")) if state in (SUCCEEDED, FAILED) else None)


@dataclass(frozen=True)
class SlurmSite:
    """Where slurmrestd answers and how a user gets a token (the sim: `scontrol token`; a site: a token file)."""

    url: str
    token_for: Callable[[str], str]
    partition: str = "gpu"
    gpu_type: str = ""   # GRES type ('h100'); '' asks for any GPU
    admin_user: str = "root"
    fail_node: Callable[[str, str], None] | None = None  # (node, reason): the sim's; a site's nodes are not failed
    # (job ids, timeout): end those jobs' batch scripts on their nodes, slurmctld or not (the sim's)
    end_jobs: Callable[[list[int], float], None] | None = None
    # (accounts): their recorded usage set to zero, once slurmctld ranks on it; gives its ranking period (the sim's)
    usage_from_zero: Callable[[list[str]], float] | None = None
    # (rows, cluster GPUs): accounts, users and QOS applied with sacctmgr as the Slurm administrator (the sim's)
    apply_model: Callable[[list[dict[str, Any]], int], None] | None = None
    topology: Callable[[], str] | None = None  # topology.conf's text, where topology/tree places jobs
    api: str = ""  # the openapi version to speak (GPUPOC_SLURM_API); '' the newest both it and the harness speak


class SlurmRest:
    """slurmrestd's openapi (the version chosen on first use: harness.jobs.slurm.api), as `user` with that user's JWT;
    answers come back in v0.0.38's shape, whichever version was spoken."""

    def __init__(self, site: SlurmSite) -> None:
        self.site = site
        self._tokens: dict[str, str] = {}
        self._lock = threading.Lock()
        self._jobs: tuple[float, list[dict[str, Any]]] = (0.0, [])
        self._version = ""

    @property
    def version(self) -> str:
        """The openapi version spoken: read from slurmrestd's OpenAPI document on first use."""
        if not self._version:
            self._version = chosen(self._authorised("GET", "openapi/v3", "openapi/v3", self.site.admin_user, None),
                                   self.site.api)
        return self._version

    def request(self, method: str, path: str, user: str, body: dict[str, Any] | None = None,
                db: bool = False) -> dict[str, Any]:
        """`db`: slurmdbd's side of the API (/slurmdb/...), else slurmctld's (/slurm/...). `body` as the version
        spoken reads it (harness.jobs.slurm.api writes v0.0.38's bodies so)."""
        where = f"{'slurmdb' if db else 'slurm'}/{self.version}/{path}"
        return legacy_answer(self._authorised(method, where, path, user, body), self.version, db)

    def _authorised(self, method: str, where: str, path: str, user: str,
                    body: dict[str, Any] | None) -> dict[str, Any]:
        """A token refused (401: expired) is fetched afresh once."""
        try:
            return self._request(method, where, path, user, body)
        except _Unauthorized:
            self._tokens.pop(user, None)
            return self._request(method, where, path, user, body)

    def _request(self, method: str, where: str, path: str, user: str,
                 body: dict[str, Any] | None) -> dict[str, Any]:
        if user not in self._tokens:
            self._tokens[user] = self.site.token_for(user)
        request = urllib.request.Request(f"{self.site.url}/{where}", method=method,
                                         data=json.dumps(body).encode() if body is not None else None,
                                         headers={"X-SLURM-USER-NAME": user, "X-SLURM-USER-TOKEN": self._tokens[user],
                                                  "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
                answer: dict[str, Any] = json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            if exc.code == HTTP_UNAUTHORIZED:
                raise _Unauthorized(f"slurmrestd {method} {path} as {user}: HTTP 401") from None
            error = Refused if _codes(detail) & REFUSALS else HarnessError
            raise error(f"slurmrestd {method} {path} as {user}: HTTP {exc.code}: "
                        f"{_errors(detail) or detail[:300]}") from None
        except (OSError, ValueError) as exc:  # refused, reset, timed out; an answer that is not JSON
            raise HarnessError(f"slurmrestd at {self.site.url} unreachable ({method} {path}): {exc}") from None
        codes = _codes(json.dumps(answer))
        if codes:
            error = Refused if codes & REFUSALS else HarnessError
            raise error(f"slurmrestd {method} {path} as {user}: {_errors(json.dumps(answer))}")
        return answer

    def jobs(self) -> list[dict[str, Any]]:
        """Every job slurmctld knows (finished ones for MinJobAge); one request shared within POLL_S."""
        with self._lock:
            at, jobs = self._jobs
            if time.monotonic() - at >= POLL_S:
                jobs = list(self.request("GET", "jobs", self.site.admin_user).get("jobs") or [])
                self._jobs = (time.monotonic(), jobs)
            return jobs

    def nodes(self) -> list[dict[str, Any]]:
        return list(self.request("GET", "nodes", self.site.admin_user).get("nodes") or [])


class _Unauthorized(HarnessError):
    """slurmrestd refused the token (expired): fetch another."""


def _found(text: str) -> list[dict[str, Any]]:
    try:
        return [e for e in json.loads(text).get("errors") or [] if isinstance(e, dict)]
    except (ValueError, AttributeError):
        return []


def _code(error: dict[str, Any]) -> int:
    """v0.0.38 names an error's number error_number or error_code, depending on the call."""
    return int(error.get("error_number") or error.get("error_code") or 0)


def _codes(text: str) -> set[int]:
    return {_code(e) for e in _found(text)} - {0}


def _errors(text: str) -> str:
    return "; ".join(f"{e.get('error', '')} ({_code(e)})" + (f": {e['description']}" if e.get("description") else "")
                     for e in _found(text))


class PollSource:
    """A harness.wait.Source over slurmrestd: list = the current view, watch = the changes seen by polling."""

    def __init__(self, read: Callable[[], list[dict[str, Any]]]) -> None:
        self._read = read
        self._seen: Objects = {}
        self._failing_since = 0.0

    def list(self, **_selectors: Any) -> tuple[list[Any], str]:
        self._seen = {o["metadata"]["name"]: o for o in self._read()}
        return [as_field(o) for o in self._seen.values()], "0"

    def watch(self, resource_version: str, timeout_s: int, **_selectors: Any) -> Iterator[tuple[str, Any]]:
        """Changes since the last poll; a failed poll is skipped (slurmrestd restarting, a timeout) until failures
        have lasted OUTAGE_BUDGET_S, then the error ends the watch."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                now = {o["metadata"]["name"]: o for o in self._read()}
            except HarnessError:
                self._failing_since = self._failing_since or time.monotonic()
                if time.monotonic() - self._failing_since > OUTAGE_BUDGET_S:
                    raise
                time.sleep(POLL_S)
                continue
            self._failing_since = 0.0
            for name, obj in now.items():
                before = self._seen.get(name)
                if before is not None and before["metadata"].get("uid") != obj["metadata"].get("uid"):
                    # a requeued job's allocation is a new one: the old member left (as a preempted pod is
                    # deleted) and a new one came, under the same name
                    yield "DELETED", as_field(before)
                    before = None
                if before is None or before["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]:
                    yield ("ADDED" if before is None else "MODIFIED"), as_field(obj)
            for name in self._seen.keys() - now.keys():
                yield "DELETED", as_field(self._seen[name])
            self._seen = now
            time.sleep(POLL_S)


class SlurmJobs(MakesJobs):
    """harness.jobs.JobSystem on Slurm: what a training or governance case asks of the system running its jobs."""

    def __init__(self, rest: SlurmRest, run_id: str, test_id: str, accounts: dict[str, str],
                 delete_timeout_s: float) -> None:
        self.rest = rest
        self.tag = hashlib.sha1(f"{run_id}/{test_id}".encode()).hexdigest()[:5]
        self.accounts = accounts  # tenant name -> Slurm account
        self.delete_timeout_s = delete_timeout_s
        # A deliberate misconfiguration (sensitivity test): a gang submitted as independent array tasks, one node each.
        self.gang_as_array = os.environ.get(GANG_AS_ARRAY_ENV) == "1"
        self.timeline = Timeline()
        self._ids: dict[str, int] = {}
        self._owners: dict[str, str] = {}  # job name -> the user who submitted it
        self._namespaces: dict[int, str] = {}  # job id -> the namespace of the tenant that submitted it
        self._jobs: dict[str, GangJob] = {}
        self.created: list[Submitted] = []  # for the audit criterion: slurmdbd must have each, by its submitter
        self._trackers: dict[tuple[str, str], Tracker] = {}
        self.samples = Samples()  # the job bodies it submitted, one per shape, for the record
        self._closed = False

    # what the suites ask
    def job_name(self, base: str) -> str:
        return f"{base}-{self.tag}"

    def submit(self, job: GangJob) -> None:
        if self._closed:
            raise HarnessError(f"{job.name} not submitted: this test's Slurm jobs are being cancelled")
        account = self._account(job.tenant)
        if not account:
            raise ConfigError(f"tenant {job.tenant.name} has no slurm account in the profile (tenants[].queues.slurm)")
        gres = f"gpu:{self.rest.site.gpu_type}:{job.gpus_per_pod}" if self.rest.site.gpu_type else \
            f"gpu:{job.gpus_per_pod}"
        body = {"script": batch_script(job), "job": {
            "name": job.name, "account": account, "partition": self.rest.site.partition,
            **({"array": f"0-{job.pods - 1}", "nodes": 1, "tasks": 1} if self.gang_as_array and job.pods > 1 else
               {"nodes": job.pods, "tasks": job.pods, "tasks_per_node": 1}), "gres": gres,
               **placed_as(job, lambda: [str(n["name"]) for n in self.rest.nodes()],
                           lambda: sorted(set(leaf_switches(self._topology()).values()))),
            "time_limit": max(1, int(job.run_for_s // 60) + 2),
            # requeued when preempted or when its node fails: the job's retry policy (off: NODE_FAIL ends it).
            # v0.0.38 reads "requeue": false as true, so a job that must not be requeued leaves it to the site's
            # JobRequeue (0 on the sim).
            **({"requeue": True} if job.restart_on_failure and os.environ.get(NO_REQUEUE_ENV) != "1" else {}),
            "environment": {"PATH": "/usr/bin:/bin"}, "current_working_directory": "/tmp",
            "standard_output": "/dev/null", "standard_error": "/dev/null",
            **({"qos": qos_of(job.priority_class)} if job.priority_class else {})}}
        self.jobs(job.tenant.namespace)  # watched from before it exists: its first state is its submission
        self.members(job.tenant.namespace)
        sent = job_submit_body(body, self.rest.version)
        self.samples.add(sent, f"slurmrestd POST job/submit as {job.tenant.identity}", kind="Slurm job")
        sent_at = datetime.now(timezone.utc)
        answer = self.rest.request("POST", "job/submit", job.tenant.identity, sent)
        self._ids[job.name] = int(answer["job_id"])
        self._jobs[job.name] = job
        self._owners[job.name] = job.tenant.identity
        self._namespaces[int(answer["job_id"])] = job.tenant.namespace
        self.created.append(Submitted("jobs", AUDIT_GROUP, job.tenant.namespace, str(answer["job_id"]),
                                      datetime.now(timezone.utc), job.tenant.identity, sent_at))

    def delete(self, job: GangJob) -> None:
        job_id = self._ids.get(job.name)
        if job_id is not None:
            self.rest.request("DELETE", f"job/{job_id}", job.tenant.identity)

    def jobs(self, namespace: str) -> Tracker:
        def read() -> list[dict[str, Any]]:
            by_name: dict[str, list[dict[str, Any]]] = {}
            for record in self._mine(namespace):
                by_name.setdefault(str(record.get("name", "")), []).append(record)
            return [job_object(merged(records), namespace, self.rest.version) for records in by_name.values()]
        return self._tracker(namespace, JOB_KIND, read)

    def members(self, namespace: str) -> Tracker:
        return self._tracker(namespace, MEMBER_KIND,
                             lambda: [m for j in self._mine(namespace) for m in member_objects(j, namespace)])

    def owned(self, namespace: str) -> Tracker | None:
        return None

    def status_of(self, job: GangJob, objects: Objects) -> JobStatus | None:
        found = objects.get(job.name)
        return status_of(found) if found else None

    def tracked_name(self, job: GangJob) -> str:
        return job.name

    def refused(self, jobs: list[GangJob]) -> str | None:
        """Slurm refuses at submission (sbatch's answer is the error), never later."""
        return None

    def member_outcomes(self, members: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Slurm: the member's job record (its exit code as slurmctld recorded it); its output file is the site's."""
        return [{"member": m["metadata"]["name"], "exit code": (m.get("status") or {}).get("exitCode")}
                for m in members if (m.get("status") or {}).get("exitCode") is not None]

    def member_log(self, member: dict[str, Any], container: str, previous: bool = False) -> str:
        return ""  # a Slurm job's output file is on the site's nodes

    def fail_member(self, member: dict[str, Any]) -> str:
        """The member's node fails where the site lets the harness fail one (the sim): Slurm requeues the job or,
        if it does not allow requeueing, ends it NODE_FAIL. Elsewhere the job's batch script is signalled
        (SIGUSR1 through slurmrestd) and exits FAIL_EXIT, a failure Slurm does not rerun."""
        name = str(((member.get("metadata") or {}).get("labels") or {}).get(JOB_LABEL, ""))
        if name not in self._ids:
            raise HarnessError(f"refusing to fail {member['metadata']['name']}: not a job this test submitted")
        node = str((member.get("spec") or {}).get("nodeName") or "")
        if self.rest.site.fail_node and node:
            self.rest.site.fail_node(node, f"gpupoc: {member['metadata']['name']} failed on request")
            return f"node {node} of Slurm job {self._ids[name]} ({name}) set DOWN (scontrol): its node failed"
        # the signal by name in the query: as every version spoken reads it (data_parser: SIGNAL)
        self.rest.request("DELETE", f"job/{self._ids[name]}?signal=USR1", self._owners[name])
        return (f"signalled Slurm job {self._ids[name]} ({name}) with SIGUSR1 through slurmrestd: its batch script "
                f"exits {FAIL_EXIT}")

    def cross_tenant_attempts(self, me: Tenant, other: Tenant) -> list[Attempt]:
        """As `me`'s user through slurmrestd: read, hold, shorten, move to its own account and cancel a job of
        `other`'s user (refused), then read and comment a job of its own (allowed)."""
        theirs, own = (self.gang(f"iso-{t.name}", t, 1, 1, run_for_s=600) for t in (other, me))
        for job in (theirs, own):
            self.submit(job)
        their_id, own_id = self._ids[theirs.name], self._ids[own.name]
        for job_id in (their_id, own_id):  # in slurmdbd (sent by slurmctld as it goes), so a miss is a refusal
            poll(lambda: self._recorded(job_id), bool, RECORDED_WITHIN_S, poll_s=POLL_S)
        my_account = self._account(me)
        tries = [(f"read {other.name}'s job {their_id}", REFUSED, "GET", f"job/{their_id}", None, False),
                 (f"read {other.name}'s accounting record of job {their_id}", REFUSED, "GET", f"job/{their_id}",
                  None, True),
                 (f"hold {other.name}'s job {their_id}", REFUSED, "POST", f"job/{their_id}", {"hold": True}, False),
                 (f"shorten {other.name}'s job {their_id}", REFUSED, "POST", f"job/{their_id}",
                  {"time_limit": 1}, False),
                 (f"move {other.name}'s job {their_id} to account {my_account}", REFUSED, "POST", f"job/{their_id}",
                  {"account": my_account}, False),
                 (f"cancel {other.name}'s job {their_id}", REFUSED, "DELETE", f"job/{their_id}", None, False),
                 (f"read its own job {own_id}", ALLOWED, "GET", f"job/{own_id}", None, False),
                 (f"read its own accounting record of job {own_id}", ALLOWED, "GET", f"job/{own_id}", None, True),
                 (f"comment its own job {own_id}", ALLOWED, "POST", f"job/{own_id}", {"comment": "gpupoc"}, False)]
        result = []
        for action, expected, method, path, body, db in tries:
            try:
                answer = self.rest.request(method, path, me.identity,
                                           None if body is None else job_description(body, self.rest.version), db=db)
                found = answer.get("jobs")  # a read that PrivateData hides answers no job, not an error
                outcome, said = (REFUSED, "no job in the answer") if method == "GET" and not found else \
                    (ALLOWED, "done")
            except Refused as exc:
                outcome, said = REFUSED, str(exc).split(": ", 1)[-1][:160]
            result.append(Attempt(me.name, f"slurmrestd: {action}", expected, NOT_APPLICABLE, outcome, said))
        return result

    def gpus_held(self, resource: str, now: float) -> list[Held]:
        """When each member held its node's GPUs (running, from the polled states), for cost attribution (Slurm's
        GRES gpu, whatever the profile calls the resource on Kubernetes)."""
        held = []
        for name, start, end in running_intervals(self.timeline, now):
            job = self._jobs.get(name.rsplit("-", 1)[0])
            if job is not None and job.gpus_per_pod:
                held.append(Held(job.tenant.namespace, name, "slurm", self._account(job.tenant), job.gpus_per_pod,
                                 start, end))
        return held

    def gpus_reserved(self, resource: str, now: float) -> list[Held]:
        """Slurm charges an account what its jobs are allocated, not a reservation apart from them."""
        return []

    def _topology(self) -> str:
        return self.rest.site.topology() if self.rest.site.topology else ""

    def _account(self, tenant: Tenant) -> str:
        """The account a tenant's job names: its own queue for slurm (a job naming another's), else the profile's."""
        return tenant.queues.get("slurm") or self.accounts.get(tenant.name, "")

    def _recorded(self, job_id: int) -> bool:
        try:
            return bool(self.rest.request("GET", f"job/{job_id}", self.rest.site.admin_user, db=True).get("jobs"))
        except HarnessError:
            return False

    def end_while_stopped(self, jobs: list[GangJob], timeout_s: float) -> str:
        """slurmctld is down, so nothing can be cancelled: the jobs' batch scripts end on their nodes (the sim's
        processes), and slurmd reports them once slurmctld is back."""
        if self.rest.site.end_jobs is None:
            raise HarnessError("ending jobs while slurmctld is down takes the nodes' processes: only on the sim")
        ids = [self._ids[job.name] for job in jobs]
        self.rest.site.end_jobs(ids, timeout_s)
        return (f"the batch scripts of Slurm jobs {', '.join(map(str, ids))} ended on their nodes while slurmctld was "
                "down (their processes killed)")

    def lose_node(self, node: str) -> str | None:
        """The node fails where the site lets the harness fail one (the sim; slurmrestd v0.0.38 updates no node):
        slurmctld requeues its jobs whole. Its slurmd still answers, so it takes work again at once
        (ReturnToService=2)."""
        if not self.rest.site.fail_node:
            return None
        self.rest.site.fail_node(node, "gpupoc: lost under a placed gang")
        return f"node {node} set DOWN (scontrol): slurmctld requeues its jobs whole; back at once (ReturnToService=2)"

    def restore_node(self, node: str) -> None:
        """Nothing to do: a failed node whose slurmd answers is back at once (ReturnToService=2)."""

    def capacity_nodes(self, resource: str, per_node: int) -> int:
        return sum(1 for node in self.rest.nodes() if gres_count(str(node.get("gres", ""))) >= per_node
                   and self.rest.site.partition in (node.get("partitions") or [self.rest.site.partition]))

    def node_domains(self, resource: str, per_node: int, level: str) -> dict[str, str]:
        """The GPU nodes' leaf switches (topology.conf's; a required placement asks for one): the profile's gang
        level is taken to be Slurm's leaf switches. None without a topology.conf."""
        switches = leaf_switches(self._topology())
        return {str(node["name"]): switches[str(node["name"])] for node in self.rest.nodes()
                if str(node.get("name")) in switches and gres_count(str(node.get("gres", ""))) >= per_node}

    # teardown
    def close(self) -> list[str]:
        """Cancel what this test submitted and wait until slurmctld no longer counts it as active."""
        failed = []
        self._closed = True  # a submission still under way (a head start's thread) is refused from now
        try:
            records = self._submitted()
        except HarnessError:
            records = []  # unknown: every job is asked to go
        live = {submitted_as(j) for j in records if STATES.get(str(j.get("job_state")), QUEUED) in LIVE}
        over = {submitted_as(j) for j in records} - live
        for name, job_id in list(self._ids.items()):
            if job_id in over:  # ended (an array: every task): nothing to cancel
                continue
            try:  # as its submitter: a site's reader may not cancel other users' jobs
                self.rest.request("DELETE", f"job/{job_id}", self._owners.get(name, self.rest.site.admin_user))
            except HarnessError as exc:
                failed.append(f"slurm job {job_id} ({name}) not cancelled: {exc}")
        active = poll(self._active, lambda still: not still, self.delete_timeout_s, POLL_S)
        for tracker in self._trackers.values():
            tracker.stop(wait=False)
        return failed + [f"slurm job {j} still {s} after {self.delete_timeout_s:.0f}s" for j, s in active]

    def diagnostics(self) -> list[str]:
        return [f"slurm job {j.get('job_id')} {j.get('name')}: {j.get('job_state')} ({j.get('state_reason')}) "
                f"nodes {j.get('nodes') or '-'}" for j in self._submitted()]

    def _active(self) -> list[tuple[int, str]]:
        return [(int(j["job_id"]), str(j.get("job_state"))) for j in self._submitted()
                if STATES.get(str(j.get("job_state")), QUEUED) in LIVE]

    def _submitted(self) -> list[dict[str, Any]]:
        """The records of the jobs this test submitted (an array: every task's record)."""
        ids = set(self._ids.values())
        return [j for j in self.rest.jobs() if j.get("job_id") in ids or j.get("array_job_id") in ids]

    def _mine(self, namespace: str) -> list[dict[str, Any]]:
        """This test's jobs submitted by the tenant of `namespace` (whichever account they name)."""
        return [j for j in self._submitted()
                if self._namespaces.get(submitted_as(j)) == namespace]

    def _tracker(self, namespace: str, kind: str, read: Callable[[], list[dict[str, Any]]]) -> Tracker:
        key = (namespace, kind)
        if key not in self._trackers:
            jobs = kind == JOB_KIND  # the timeline speaks the harness's states, as for any backend
            self._trackers[key] = Tracker(None, f"slurm/{self.rest.version}", kind, namespace,
                                          describe=(lambda o: status_of(o).state) if jobs else pod_state,
                                          server_time=(lambda o: status_of(o).admitted_at) if jobs else (lambda _: None),
                                          timeline=self.timeline, source=PollSource(read)).start()
        return self._trackers[key]


def submitted_as(record: dict[str, Any]) -> int:
    """The id a job was submitted as (an array's task: the array's)."""
    return int(record.get("array_job_id") or 0) or int(record["job_id"])


def gres_count(gres: str) -> int:
    """'gpu:h100:8(S:0)' -> 8: GPUs a node offers."""
    return sum(int(m) for m in re.findall(r"gpu(?::[^:,(]+)?:(\d+)", gres))


def qos_of(priority_class: str) -> str:
    """The harness's priority classes ('gpupoc-high') as the reference model's QOS ('high')."""
    return priority_class.removeprefix("gpupoc-")


def batch_script(job: GangJob) -> str:
    """A real batch script: it holds its allocation for the job's run time (sleep), like the kwok stages, and fails
    (exit FAIL_EXIT) when signalled SIGUSR1 (fail_member)."""
    return (f"#!/bin/bash\n# gpupoc job {job.name}: {job.pods} node(s) x {job.gpus_per_pod} GPU(s)\n"
            f"trap 'echo gpupoc: failed on request >&2; exit {FAIL_EXIT}' USR1\n"
            f"sleep {job.run_for_s:g} &\nwait\n")


def accounting_records(rest: SlurmRest, since: float) -> dict[str, list[dict[str, Any]]]:
    """slurmdbd's records of every job that ran or waited since `since` (epoch seconds), by job id (one request; a
    requeued job has a record per run)."""
    ago = max(60, int(time.time() - since) + 60)
    found: dict[str, list[dict[str, Any]]] = {}
    for record in rest.request("GET", f"jobs?start_time=now-{ago}", rest.site.admin_user, db=True).get("jobs") or []:
        found.setdefault(str(record.get("job_id")), []).append(record)
    return found


def settled_accounting(rest: SlurmRest, jobs: list[Submitted], timeout_s: float = DBD_SETTLE_S
                       ) -> dict[str, list[dict[str, Any]]]:
    """slurmdbd's records of `jobs` once each job has one and every run recorded has ended: slurmctld hands its
    records to slurmdbd through a background agent, seconds late (2-4 s measured on the sim). What is there at the
    timeout otherwise (a job still missing is the caller's finding)."""
    since = min(o.created_at.timestamp() for o in jobs)
    return poll(lambda: accounting_records(rest, since), lambda read: accounting_settled(read, jobs), timeout_s)


def accounting_settled(records: dict[str, list[dict[str, Any]]], jobs: list[Submitted]) -> bool:
    """Pure: every job has a record of its submission, and every run recorded has ended."""
    return all(accounting_entry(records.get(o.name, []), o) is not None
               and all((r.get("time") or {}).get("end") for r in records[o.name]) for o in jobs)


def accounting_entry(records: list[dict[str, Any]], obj: Submitted) -> Entry | None:
    """Pure: slurmdbd's record of a submitted job (who submitted it, when) as an audit entry; a job id reused (a
    controller that lost its state counts from 1 again) is told apart by the submission time."""
    found = [Entry(str(r.get("user", "")), "submit", obj.resource, AUDIT_GROUP, obj.namespace, obj.name, at, 0)
             for r in records if (at := _at((r.get("time") or {}).get("submission"))) is not None]
    return min(found, key=lambda e: abs((e.at - obj.created_at).total_seconds()), default=None)


def accounted_gpu_seconds(records: list[dict[str, Any]]) -> float:
    """Pure: GPU-seconds slurmdbd accounted to a job: each of its records (one per run, a requeued job has several)
    times the GPUs allocated to it (whole seconds: Slurm's resolution)."""
    return sum(float((r.get("time") or {}).get("elapsed") or 0) * sum(
        float(t.get("count") or 0) for t in (r.get("tres") or {}).get("allocated") or []
        if t.get("type") == "gres" and t.get("name") == "gpu") for r in records)

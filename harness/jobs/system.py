"""What a suite may ask of the system that runs its jobs: the seam between suites and a backend's world.

The suites are written against `JobSystem` only (mypy checks it), so a backend that is not
Kubernetes (Slurm through slurmrestd) implements this protocol and the suites run unchanged:

- a *job* is a `GangJob` submitted for a tenant; `jobs(namespace)` tracks the backend's job objects
  and `status_of` reads a job's state (queued, admitted, running, succeeded, failed, preempted)
  with the server's timestamps;
- a *member* is one allocation of a job (a Pod on Kubernetes; a node allocation of a Slurm job):
  a dict with `metadata.name`, `metadata.labels[JOB_LABEL]` (its job), `spec.nodeName` once it is
  bound and `status.phase`; `members(namespace)` tracks them, `fail_member` makes one fail;
- every transition of both goes onto one `timeline` (member transitions under `MEMBER_KIND`);
- `capacity_nodes` is how many nodes offer a whole node's worth of GPUs.

Trackers work over any `harness.wait.Source` (a list and a watch), so an adapter that is not
Kubernetes feeds them from its own event stream.
"""

from __future__ import annotations

from typing import Any, Protocol

from harness.jobs.model import GangJob, JobStatus
from harness.criteria.governance.audit import Submitted
from harness.criteria.governance.cost_attribution import Held
from harness.criteria.governance.tenant_isolation import Attempt
from harness.core.samples import Samples
from harness.config.profile import Tenant
from harness.core.timeline import Timeline
from harness.cluster.tracker import Objects, Tracker


class JobSystem(Protocol):
    timeline: Timeline
    created: list[Submitted]  # what it submitted, by whom (the audit criterion)
    samples: Samples          # one body per shape of what it submitted (the record)

    def submit(self, job: GangJob) -> None:
        ...

    def delete(self, job: GangJob) -> None:
        ...

    def refused(self, jobs: list[GangJob]) -> str | None:
        """Why the platform will not run these jobs, from its own facts, if it has said so for a while: a controller
        that cannot create their members (Pod Security, a quota, a webhook) or a node that cannot start them (an
        image it cannot pull). A wait for them ends with it: the run could not be made (an ERROR), not a FAIL."""
        ...

    def member_outcomes(self, members: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """What each ended member's process did, from the node's own facts: its exit code and reason, and the last
        lines of its log where the job system keeps one (a table of the evidence; empty where nothing ended)."""
        ...

    def member_log(self, member: dict[str, Any], container: str, previous: bool = False) -> str:
        """A member's container log (its last lines; `previous`: the run before its last restart), or ""."""
        ...

    def jobs(self, namespace: str) -> Tracker:
        ...

    def members(self, namespace: str) -> Tracker:
        ...

    def owned(self, namespace: str) -> Tracker | None:
        """Objects a controller made for the jobs (Kueue's Workloads), where the backend has them."""
        ...

    def status_of(self, job: GangJob, objects: Objects) -> JobStatus | None:
        ...

    def tracked_name(self, job: GangJob) -> str:
        ...

    def job_name(self, base: str) -> str:
        """A name for a job of this test: `base` with a tag of the run and the test (never reused)."""
        ...

    def gang(self, base: str, tenant: Tenant, pods: int, gpus_per_pod: int, **options: Any) -> GangJob:
        """A gang job of this test named for `base`, asking for the profile's accelerator (model.MakesJobs)."""
        ...

    def fail_member(self, member: dict[str, Any]) -> str:
        """Make a running member fail (a destructive step: the caller has asked for permission); say how."""
        ...

    def lose_node(self, node: str) -> str | None:
        """The node is lost to its members (a destructive step: the caller has asked for permission): they are
        evicted and nothing new lands there until `restore_node`; say how. None where this job system cannot lose a
        node here."""
        ...

    def restore_node(self, node: str) -> None:
        """A node `lose_node` lost takes work again (`close` restores any still lost)."""
        ...

    def capacity_nodes(self, resource: str, per_node: int) -> int:
        ...

    def node_domains(self, resource: str, per_node: int, level: str) -> dict[str, str]:
        """The nodes offering a whole node's worth of GPUs, each with its domain of a topology level (the value of
        that node label; nodes without it left out)."""
        ...

    def cross_tenant_attempts(self, me: Tenant, other: Tenant) -> list[Attempt] | None:
        """Where the job system has users of its own (Slurm): `me` tries to read, change and cancel a job of
        `other`, and the same on a job of its own (the positive control). None on Kubernetes, whose RBAC matrix
        is checked once per cluster."""
        ...

    def end_while_stopped(self, jobs: list[GangJob], timeout_s: float) -> str:
        """End `jobs` while the backend's controllers are stopped and return once their capacity is free (a
        destructive step); say how."""
        ...

    def diagnostics(self) -> list[str]:
        """What a reviewer needs after a failure: the jobs' and members' states, events, logs."""
        ...

    def gpus_held(self, resource: str, now: float) -> list[Held]:
        """When each member held its GPUs of `resource` (cost attribution); still held ends at `now`."""
        ...

    def gpus_reserved(self, resource: str, now: float) -> list[Held]:
        """When each job held its queue's quota of `resource` where the queue reserves it at admission (Kueue's
        Workloads), else []; still held ends at `now`."""
        ...

    def close(self) -> list[str]:
        """Delete (cancel) what was submitted and wait for it to go; what would not go, in words."""
        ...

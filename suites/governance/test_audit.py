"""Governance 4 — audit.

Runs after every other test of the run: each workload object the run submitted (every suite, every
backend) must be in the API server's audit log, created by the identity that submitted it, at a time
within seconds of the object's creationTimestamp. A Slurm job must be in slurmdbd's accounting, submitted by
the tenant's user, at a time within seconds of its submission. The test submits one job of its own first, so it
has something to find when it runs alone. On the sim the log is the API server's log file; elsewhere
the profile would have to name one, so it is SKIP with that reason. The audit flags are reported
against the CIS Kubernetes Benchmark's audit checks (informational).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from harness.backends import ALL
from harness.backends.slurm import SlurmBackend
from harness.config.options import RunConfig
from harness.criteria.governance import audit
from harness.criteria.governance.audit import CRITERION
from harness.config.profile import Profile
from harness.cluster.wait import poll
from harness.record.evidence import Evidence
from harness.jobs.slurm.system import AUDIT_GROUP, accounting_entry, settled_accounting
from harness.targets.target import Target
from harness.jobs.kubernetes import Workloads
from suites.training.common import state_is

WORKLOAD_CREATES = ("jobs", "pods", "podgroups", "rayjobs", "deployments", "workloads")
LOG_SETTLE_S = 10.0
ROWS_SHOWN = 200


def audit_source(target: Target) -> tuple[list[Path], dict[str, str]]:
    """The audit log files (rotated backups first) and the API server's audit flags; SKIP where unknown."""
    source = target.audit_log()
    if source is None:
        pytest.skip("no audit log source for this target: the harness reads the API server's log file on the sim; "
                    "a real cluster's log path or webhook sink is not configured in gpupoc yet")
    log, argv = source
    files = sorted(log.parent.glob(f"{log.stem}-*{log.suffix}")) + [log]
    flags = {a[2:].split("=", 1)[0]: a.split("=", 1)[1] for a in argv if a.startswith("--audit-") and "=" in a}
    return files, flags


def read_entries(files: list[Path]) -> list[audit.Entry]:
    entries: list[audit.Entry] = []
    for path in files:
        try:
            with path.open(errors="replace") as handle:
                entries += audit.parse_entries(handle)
        except FileNotFoundError:
            continue
    return entries


def policy_covers_creates(entries: list[audit.Entry]) -> bool:
    return any(e.resource in WORKLOAD_CREATES and e.verb in ("create", "patch") for e in entries)


@pytest.mark.gpupoc_last
def test_audit(target: Target, queue_model: Profile, gpupoc_config: RunConfig, submitted: list[audit.Submitted],
               request: pytest.FixtureRequest, evidence: Callable[[str], Evidence]) -> None:
    ev = evidence(CRITERION.id)
    files, flags = audit_source(target)
    own = Workloads(target.api, ALL["default"], gpupoc_config.run_id, request.node.nodeid,
                    queue_model.timeouts.delete, target.seam.as_tenant if queue_model.submit_as == "tenant" else None,
                    simulated=True, workload_spec=queue_model.workloads)
    try:
        job = own.gang("audited", queue_model.tenants[0], 1, 1, run_for_s=1)
        own.submit(job)
        own.jobs(job.tenant.namespace).wait_until("the audited job is created", state_is(own, job, "queued",
                                                  "admitted", "running", "succeeded"), queue_model.timeouts.admit)
    finally:
        leftovers = own.close()
    objects = [*submitted, *own.created]
    on_slurm = [o for o in objects if o.group == AUDIT_GROUP]  # slurmdbd's records, not the API server's log
    on_kubernetes = [o for o in objects if o.group != AUDIT_GROUP]
    # the log backend writes each request as it completes: allow the last ones a moment
    entries = poll(lambda: read_entries(files), lambda read: all(audit.creation_of(o, index) for index in
                                                                  [audit.creations(read)] for o in on_kubernetes),
                   LOG_SETTLE_S)
    index = audit.creations(entries)
    found = {id(o): audit.creation_of(o, index) for o in on_kubernetes}
    if on_slurm:
        slurm = ALL["slurm"]
        assert isinstance(slurm, SlurmBackend)
        records = settled_accounting(slurm.rest(), on_slurm)
        found.update({id(o): accounting_entry(records.get(o.name, []), o) for o in on_slurm})
        ev.note(f"{len(on_slurm)} Slurm jobs looked up in slurmdbd's accounting (the submitting user and time)")
    rows, missing, skews = [], 0, []
    for obj in objects:
        entry = found[id(obj)]
        right_user = entry is not None and (not obj.submitter or entry.user == obj.submitter)
        if entry is None or not right_user:
            missing += 1
        else:
            skews.append(audit.submission_skew_s(obj, entry) if obj.group == AUDIT_GROUP
                         else audit.skew_s(entry, obj.created_at))
        rows.append({"object": f"{obj.group + '/' if obj.group else ''}{obj.resource} {obj.namespace}/{obj.name}",
                     "created": obj.created_at.isoformat(), "submitted by": obj.submitter or "(runner)",
                     "audit: who": entry.user if entry else "—", "audit: verb": entry.verb if entry else "—",
                     "audit: at": entry.at.isoformat() if entry else "—",
                     "verdict": "as expected" if entry is not None and right_user else "NOT as expected"})
    ev.tables["audit: each submitted object and its audit entry"] = rows[:ROWS_SHOWN]
    ev.tables["audit configuration against the CIS Kubernetes Benchmark (informational)"] = audit.cis_findings(
        flags, policy_covers_creates(entries))
    ev.note(f"{len(objects)} objects submitted by the run, {len(entries)} audit entries read from "
            f"{', '.join(p.name for p in files)}" + (f"; table shows the first {ROWS_SHOWN}"
                                                     if len(rows) > ROWS_SHOWN else ""))
    if leftovers:
        ev.note(f"left behind: {'; '.join(leftovers)}")
    ev.expect("max_missing", missing)
    ev.expect("max_time_skew_s", round(max(skews), 3) if skews else None)
    ev.verdict()

"""Governance 4 — audit: the API server's audit log holds, for every workload the run submitted, who
created it (the submitting identity, impersonated or not), the verb, the object and a time within
seconds of the object's creation; the audit configuration is reported against the CIS checks."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from harness.criteria import AT_MOST, Criterion, Threshold, register

CRITERION = register(Criterion(
    "governance.audit",
    "Every workload the run submitted is found in the API server's audit log with the submitting identity, the "
    "verb, the object and a timestamp within seconds of the object's creation (controller-made objects are not "
    "counted); the audit configuration is reported against the CIS audit checks.",
    (Threshold("max_missing", "submitted workloads with no audit entry naming their submitter (0)", AT_MOST,
               " objects"),
     Threshold("max_time_skew_s", "largest distance between an object's creation (its creationTimestamp, whole "
               "seconds) and the time its audit entry had the request in flight (received to response complete)",
               AT_MOST, " s"))))

CREATED = (200, 201)  # server-side apply answers 201 when it creates, 200 when the object was there


@dataclass(frozen=True)
class Submitted:
    """An object the run created: what to look for in the audit log."""

    resource: str        # plural, e.g. "jobs"
    group: str           # "" for the core group
    namespace: str
    name: str
    created_at: datetime
    submitter: str       # the username the API server saw (the impersonated one when impersonating), "" unknown
    sent_at: datetime | None = None  # where the harness's clock is the creation's (a Slurm job): the request's send,
    #                                  created_at its answer


@dataclass(frozen=True)
class Entry:
    user: str            # impersonatedUser.username when present, else user.username
    verb: str
    resource: str
    group: str
    namespace: str
    name: str
    at: datetime         # stageTimestamp of ResponseComplete
    code: int
    received: datetime | None = None  # requestReceivedTimestamp: the request in flight from it to `at`


CREATION_RESOLUTION_S = 1.0  # creationTimestamp is whole seconds: the creation lies within the second it names


def skew_s(entry: Entry, created_at: datetime) -> float:
    """Pure: how far the object's creation lies outside the time its audit entry had the request in flight, 0 where
    they meet. The creation falls within the second its creationTimestamp names, and inside the request: a loaded
    API server (slow admission webhooks) lengthens the request, not the disagreement."""
    created, ended = created_at.timestamp(), entry.at.timestamp()
    received = (entry.received or entry.at).timestamp()
    return round(max(0.0, received - (created + CREATION_RESOLUTION_S), created - ended), 6)


def submission_skew_s(obj: Submitted, record: Entry) -> float:
    """Pure: how far a scheduler's own record of a submission (a whole second: slurmdbd's) lies outside the harness's
    request, from its send to its answer (a loaded slurmrestd answers seconds late: no disagreement)."""
    request = Entry(record.user, record.verb, record.resource, record.group, record.namespace, record.name,
                    obj.created_at, record.code, obj.sent_at)
    return skew_s(request, record.at)


def parse_entries(lines: Iterable[str]) -> list[Entry]:
    """Pure: the ResponseComplete entries that created or changed an object (JSON lines of audit.k8s.io/v1)."""
    found = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        ref = event.get("objectRef") or {}
        if event.get("stage") != "ResponseComplete" or not ref.get("name"):
            continue
        user = (event.get("impersonatedUser") or {}).get("username") or (event.get("user") or {}).get("username", "")
        received = event.get("requestReceivedTimestamp")
        stamp = event.get("stageTimestamp") or received
        if not stamp:
            continue
        found.append(Entry(user, event.get("verb", ""), ref.get("resource", ""), ref.get("apiGroup", ""),
                           ref.get("namespace", ""), ref["name"], _time(stamp),
                           int((event.get("responseStatus") or {}).get("code", 0)), _time(received) if received else None))
    return found


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


Creations = dict[tuple[str, str, str, str], list[Entry]]


def creations(entries: list[Entry]) -> Creations:
    """Pure: the entries that created or applied an object (answered 200/201), by (resource, group, namespace,
    name): one pass over a log of any size, then a look-up per object."""
    found: Creations = {}
    for e in entries:
        if e.verb in ("create", "patch", "update") and e.code in CREATED:
            found.setdefault((e.resource, e.group, e.namespace, e.name), []).append(e)
    return found


def creation_of(obj: Submitted, entries: list[Entry] | Creations) -> Entry | None:
    """The entry that created `obj`: a create or apply (patch) answered 200/201, closest to its creation."""
    by_object = entries if isinstance(entries, dict) else creations(entries)
    matches = by_object.get((obj.resource, obj.group, obj.namespace, obj.name), [])
    return min(matches, key=lambda e: skew_s(e, obj.created_at), default=None)


def cis_findings(flags: dict[str, str], covers_workload_creates: bool) -> list[dict[str, str]]:
    """Pure: the API server's audit flags against the CIS Kubernetes Benchmark's audit checks (informational)."""
    def at_least(flag: str, wanted: int) -> tuple[str, str]:
        value = flags.get(flag)
        ok = value is not None and value.isdigit() and int(value) >= wanted
        return (value or "not set"), ("meets" if ok else f"below the benchmark's {wanted}")
    rows = [{"check": "1.2.16 audit log path set", "value": flags.get("audit-log-path", "not set"),
             "finding": "meets" if flags.get("audit-log-path") else "no audit log"}]
    for check, flag, wanted in (("1.2.17 retention (days)", "audit-log-maxage", 30),
                                ("1.2.18 backups kept", "audit-log-maxbackup", 10),
                                ("1.2.19 size before rotation (MB)", "audit-log-maxsize", 100)):
        value, finding = at_least(flag, wanted)
        rows.append({"check": check, "value": value, "finding": finding})
    rows.append({"check": "3.2.1 policy covers workload creates", "value": flags.get("audit-policy-file", "not set"),
                 "finding": "meets" if covers_workload_creates else "workload creates not logged"})
    return rows

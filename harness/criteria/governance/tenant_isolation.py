"""Governance 3 — tenant isolation: a tenant's identity cannot touch another tenant's work, queues or
secrets. Each action is asked of the API server twice: a SubjectAccessReview for the identity (with its
groups) and a real request made with the identity's own credentials (writes as server-side dry runs),
expecting refusal; a positive control (the tenant can submit in its own namespace) shows the identity
works, so a broken setup cannot pass. Per backend, a job naming another tenant's queue must stay held.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.criteria import AT_LEAST, AT_MOST, Criterion, Threshold, register

CRITERION = register(Criterion(
    "governance.tenant_isolation",
    "Tenant A's identity is refused every action on tenant B's workloads, pods, Kueue Workloads and PodGroups, "
    "reading B's Secrets, ConfigMaps, events and pod logs, exec/attach/port-forward into B's pods, changing "
    "queues, ClusterQueues, ResourceFlavors and PriorityClasses, impersonation, role escalation and binding "
    "(by SubjectAccessReview and by a real request), while it can submit in its own namespace; a job naming B's "
    "queue is never started.",
    (Threshold("max_cross_tenant_allowed", "cross-tenant actions allowed, by review or real request (0)", AT_MOST,
               " actions"),
     Threshold("held_for_s", "seconds a job naming another tenant's queue must stay held (the observation window)",
               AT_LEAST, " s"))))

REFUSED, ALLOWED, NOT_APPLICABLE = "refused", "allowed", "n/a"
HTTP_FORBIDDEN, HTTP_UNAUTHORIZED = 403, 401


@dataclass(frozen=True)
class Attempt:
    """One action of one identity: what the review said and what a real request got."""

    who: str          # tenant name
    action: str       # e.g. "delete batch/jobs in poc-team-b"
    expected: str     # REFUSED (cross-tenant) or ALLOWED (the positive control)
    review: str       # ALLOWED / REFUSED from the SubjectAccessReview
    request: str      # ALLOWED / REFUSED / NOT_APPLICABLE from the real request
    answer: str = ""  # the real request's HTTP status and message, shortened

    @property
    def allowed(self) -> bool:
        """Allowed by either check: one that the review refuses but the server performs still counts."""
        return ALLOWED in (self.review, self.request)

    @property
    def as_expected(self) -> bool:
        return self.allowed == (self.expected == ALLOWED) and (self.expected != ALLOWED or self.request != REFUSED)

    def row(self) -> dict[str, str]:
        return {"identity": self.who, "action": self.action, "expected": self.expected, "review": self.review,
                "real request": self.request, "answer": self.answer,
                "verdict": "as expected" if self.as_expected else "NOT as expected"}


def request_outcome(status: int | None) -> str:
    """Pure: a real request's HTTP status as refused or allowed. Only authorization refuses (403, or 401 for
    an identity that does not authenticate); any other answer (2xx, 404 of the probe object, 400, 409, 422)
    means the server went past authorization."""
    return REFUSED if status in (HTTP_FORBIDDEN, HTTP_UNAUTHORIZED) else ALLOWED


def cross_tenant_allowed(attempts: list[Attempt]) -> list[Attempt]:
    return [a for a in attempts if a.expected == REFUSED and a.allowed]


def control_failures(attempts: list[Attempt]) -> list[Attempt]:
    """Positive controls the identity could not do: the setup is broken, isolation cannot be judged."""
    return [a for a in attempts if a.expected == ALLOWED and not a.as_expected]

"""Operations 2 — upgrade in place: with a busy queue, the backend's controllers are replaced by their next release
(CRDs first, then the controllers). Nothing is lost, admitted twice or disturbed; admissions resume within a
threshold; the new release refuses none of the objects that were there; the cluster serves the release's CRDs.

Pure measurement: the binds, the resume time and the running jobs' pods come from training.control_plane_recovery's
(the same shape of busy queue); here, which objects the new release refuses (from their status) and how far the CRDs
the API server serves are behind the release's own (their schemas compared).
"""

from __future__ import annotations

from typing import Any

from harness.criteria import AT_MOST, Chart, Criterion, Threshold, register

CRITERION = register(Criterion(
    "operations.upgrade",
    "With jobs running and jobs waiting, the backend's controllers are replaced by their next release (CRDs first, "
    "then the controllers): admissions stop for no longer than the threshold, no waiting job is lost, none is admitted twice, "
    "the jobs running through the upgrade keep their pods, the new release refuses none of the objects that were "
    "there, and the cluster serves the new release's CRDs.",
    (Threshold("max_admission_gap_s", "seconds without admissions: from the old release's controllers stopped to the "
               "first admission of a job that waited through the upgrade", AT_MOST, " s"),
     Threshold("max_jobs_lost", "jobs waiting at the upgrade and never admitted afterwards", AT_MOST, " jobs"),
     Threshold("max_admitted_twice", "jobs with more pods bound than they have (admitted again)", AT_MOST, " jobs"),
     Threshold("max_running_disturbed", "jobs running through the upgrade whose pods were replaced or stopped",
               AT_MOST, " jobs"),
     Threshold("max_objects_refused", "queues and jobs there before the upgrade that the new release refuses "
               "(a queue not active, a job failing its validation)", AT_MOST, " objects"),
     Threshold("max_crds_behind", "CRDs of the new release that the API server does not serve as the release ships "
               "them (missing, or lacking its fields or rules)", AT_MOST, " CRDs")),
    (Chart("pods", "pods over time", "pods"),)))

# The status a controller gives an object it refuses: a queue that is not active, a RayJob that fails validation.
QUEUE_KINDS = ("ClusterQueue", "LocalQueue")
RAY_VALIDATION_FAILED = "ValidationFailed"
SHORT = 40
RULES = "x-kubernetes-validations"
IGNORED_KEYS = {"description", "properties", "items", "additionalProperties"}  # compared, or walked into, apart


def refused(obj: dict[str, Any]) -> str:
    """Pure: why the controller refuses this object, from its status ('' when it does not)."""
    status = obj.get("status") or {}
    kind = obj.get("kind", "")
    if kind in QUEUE_KINDS:
        active = next((c for c in status.get("conditions") or [] if c.get("type") == "Active"), None)
        if active is None:
            return "no Active condition"
        if active.get("status") != "True":
            return f"Active {active.get('status')}: {active.get('reason', '')} {active.get('message', '')}".strip()
        return ""
    if kind == "RayJob" and RAY_VALIDATION_FAILED in (status.get("jobDeploymentStatus"), status.get("reason")):
        return f"{RAY_VALIDATION_FAILED}: {status.get('message', '')}".strip()
    return ""


def _storage_schema(crd: dict[str, Any]) -> dict[str, Any]:
    for version in crd["spec"]["versions"]:
        if version.get("storage"):
            return dict((version.get("schema") or {}).get("openAPIV3Schema") or {})
    return {}


def _walk(served: dict[str, Any], release: dict[str, Any], path: str, found: list[str]) -> None:
    for key in sorted(set(release) - IGNORED_KEYS):
        if served.get(key) == release[key]:
            continue
        if key == RULES and isinstance(served.get(key), list):
            differ = sum(1 for rule in release[key] if rule not in served[key])
            found.append(f"{path or '.'} {key}: {differ} of the release's {len(release[key])} rules not served")
        else:
            found.append(f"{path or '.'} {key}: {_short(served.get(key, 'unset'))} (release: {_short(release[key])})")
    own = served.get("properties") or {}
    for name, sub in (release.get("properties") or {}).items():
        if name not in own:
            found.append(f"{path}.{name}: missing")
        else:
            _walk(own[name], sub, f"{path}.{name}", found)
    for key, suffix in (("items", "[]"), ("additionalProperties", "{}")):
        own_sub = served.get(key)
        if isinstance(release.get(key), dict):
            _walk(own_sub if isinstance(own_sub, dict) else {}, release[key], path + suffix, found)


def _short(value: Any) -> str:
    """A schema keyword's value in a few words: CEL rules by count, long values cut."""
    if isinstance(value, list) and value and all(isinstance(v, dict) and "rule" in v for v in value):
        return f"{len(value)} rules"
    text = str(value)
    return text if len(text) <= SHORT else text[:SHORT - 1] + "…"


def drift(served: dict[str, Any] | None, release: dict[str, Any]) -> list[str]:
    """Pure: how the CRD the API server serves differs from the release's own ([] when it does not): its served
    versions, and its storage version's schema (fields missing, rules and limits that differ; descriptions aside)."""
    if served is None:
        return ["not installed"]
    found: list[str] = []
    versions = {(v["name"], bool(v.get("served")), bool(v.get("storage"))) for v in served["spec"]["versions"]}
    wanted = {(v["name"], bool(v.get("served")), bool(v.get("storage"))) for v in release["spec"]["versions"]}
    if versions != wanted:
        found.append(f"versions {sorted(versions)} (release: {sorted(wanted)})")
    _walk(_storage_schema(served), _storage_schema(release), "", found)
    return found


def crds_behind(served: dict[str, dict[str, Any]], release: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Pure: CRD name -> how it differs, for each of the release's CRDs the API server does not serve as shipped
    (`served`: the API server's CRDs by name)."""
    behind = {}
    for crd in release:
        name = crd["metadata"]["name"]
        found = drift(served.get(name), crd)
        if found:
            behind[name] = found
    return behind


def summary(behind: dict[str, list[str]], examples: int = 2) -> str:
    """Pure: one line per CRD behind, with its first differences and how many there are."""
    lines = []
    for name, found in sorted(behind.items()):
        more = f" and {len(found) - examples} more" if len(found) > examples else ""
        lines.append(f"{name}: {'; '.join(found[:examples])}{more}")
    return " | ".join(lines)

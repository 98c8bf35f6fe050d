"""slurmrestd's openapi versions: which one to speak with a server, and the answers and request bodies of the
current ones (the data_parser plugins, v0.0.40 and later) translated to and from v0.0.38's shape, the one the rest
of the harness reads and writes. Pure functions; harness.jobs.slurm.system does the HTTP.

Which Slurm serves which (SchedMD/slurm at each release's tags: src/plugins/openapi/ and
src/slurmrestd/plugins/openapi/ up to v0.0.39, src/plugins/data_parser/ after): 22.05 v0.0.36-38, 23.02 v0.0.37-39,
23.11 v0.0.38-40, 24.05 v0.0.39-41, 24.11 v0.0.40-42, 25.05 v0.0.40-43, 25.11 v0.0.41-44, 26.05 v0.0.42-45.
The fields read and written here have the same names and types in v0.0.40 to v0.0.45 (each plugin's parsers.c at
the first and the last tag that ship it): job_state a list of flags, times and counts {set, infinite, number}
objects, exit_code an object; slurmdbd's job records and the errors as in v0.0.38. v0.0.39 is left out: every
Slurm that serves it serves v0.0.38 or v0.0.40 too.
"""

from __future__ import annotations

import re
from typing import Any

from harness.core.errors import ConfigError

LEGACY = "v0.0.38"  # the shape the harness reads and writes; Slurm 22.05's (the sim's)
SUPPORTED = (LEGACY, "v0.0.40", "v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45")
API_ENV = "GPUPOC_SLURM_API"
VERSION_IN_PATH = re.compile(r"^/slurm(?:db)?/(v\d+\.\d+\.\d+)/")  # '/slurm/v0.0.41/jobs/', '/slurmdb/v0.0.41/qos/'
# job_state's flags that v0.0.38 named instead of the base state, first first (Slurm 22.05's job_state_string)
STATE_FLAGS = ("COMPLETING", "STAGE_OUT", "CONFIGURING", "RESIZING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
               "SPECIAL_EXIT", "STOPPED", "REVOKED", "RESV_DEL_HOLD", "SIGNALING")
JOB_NUMBERS = ("submit_time", "start_time", "end_time", "array_job_id", "node_count")  # {set, infinite, number}


def _order(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in version[1:].split("."))


def offered(document: dict[str, Any]) -> list[str]:
    """The versions a slurmrestd serves, oldest first, from the paths of its OpenAPI document (GET /openapi/v3)."""
    found = {m.group(1) for path in document.get("paths") or {} if (m := VERSION_IN_PATH.match(path))}
    return sorted(found, key=_order)


def chosen(document: dict[str, Any], wanted: str = "") -> str:
    """The newest version both the server and the harness speak, or `wanted` (GPUPOC_SLURM_API) if both do."""
    served = offered(document)
    usable = [v for v in served if v in SUPPORTED]
    said = f"slurmrestd serves openapi {', '.join(served) or 'no version'}; gpupoc speaks {', '.join(SUPPORTED)}"
    if wanted and wanted not in usable:
        raise ConfigError(f"{API_ENV}={wanted}: {said}: name one of both, or unset {API_ENV}")
    if not usable:
        raise ConfigError(f"{said}: have slurmrestd serve one of gpupoc's (-s openapi/v0.0.38 up to Slurm 23.11, "
                          "-d v0.0.40 to v0.0.45 from 23.11 on)")
    return wanted or usable[-1]


# answers: the current shapes as v0.0.38's

def _number(value: Any) -> Any:
    """A {set, infinite, number} object as v0.0.38 wrote the number: unset or infinite are None; a plain value
    stays as it is."""
    if not isinstance(value, dict):
        return value
    return int(value.get("number") or 0) if value.get("set") and not value.get("infinite") else None


def job_state(flags: Any) -> str:
    """['PENDING', 'REQUEUED'] -> 'REQUEUED': the flag v0.0.38 named, else the base state (listed first)."""
    if not isinstance(flags, list):
        return str(flags or "")
    return next((f for f in STATE_FLAGS if f in flags), str(flags[0]) if flags else "")


def wait_status(exit_code: Any) -> Any:
    """{status, return_code, signal: {id, name}} as a wait status (return code << 8 | signal); None while the job
    has none (status PENDING: neither is set)."""
    if not isinstance(exit_code, dict):
        return exit_code
    code, signal = _number(exit_code.get("return_code")), _number((exit_code.get("signal") or {}).get("id"))
    return None if code is None and signal is None else ((code or 0) << 8) | (signal or 0)


def legacy_job(job: dict[str, Any]) -> dict[str, Any]:
    """slurmctld's job (data_parser JOB_INFO) as v0.0.38 wrote it: unset times and counts are 0, as then."""
    numbers = {key: _number(job[key]) or 0 for key in JOB_NUMBERS if key in job}
    return {**job, **numbers, "job_state": job_state(job.get("job_state")),
            "array_task_id": _number(job.get("array_task_id")), "exit_code": wait_status(job.get("exit_code"))}


def _listed(value: Any) -> Any:
    return ",".join(map(str, value)) if isinstance(value, list) else value


def legacy_answer(answer: dict[str, Any], version: str, db: bool) -> dict[str, Any]:
    """An answer of `version` as v0.0.38 gave it, in the fields the harness reads (jobs, nodes, partitions, QOS,
    the Slurm release). slurmdbd's job records and the errors have kept v0.0.38's shape."""
    if version == LEGACY:
        return answer
    found = dict(answer)
    if "slurm" in (answer.get("meta") or {}):
        found["meta"] = {**answer["meta"], "Slurm": answer["meta"]["slurm"]}
    if not db and isinstance(answer.get("jobs"), list):
        found["jobs"] = [legacy_job(j) for j in answer["jobs"]]
    if isinstance(answer.get("nodes"), list):
        found["nodes"] = [{**n, "state": _listed(n.get("state"))} for n in answer["nodes"]]
    if isinstance(answer.get("partitions"), list):
        found["partitions"] = [{**p, "nodes": (p.get("nodes") or {}).get("configured", ""),
                                "state": _listed((p.get("partition") or {}).get("state"))}
                               for p in answer["partitions"]]
    if db and isinstance(answer.get("qos"), list):
        found["QOS"] = [{**q, "priority": _number(q.get("priority"))} for q in answer["qos"]]
    return found


# requests: v0.0.38's bodies as the current versions read them

def _set(number: int) -> dict[str, Any]:
    return {"set": True, "infinite": False, "number": number}


def job_description(job: dict[str, Any], version: str) -> dict[str, Any]:
    """A job's description (v0.0.38: POST job/submit's "job", or the body of POST job/{id}) as `version` reads it
    (data_parser JOB_DESC_MSG): GRES per node as tres_per_node, the environment as K=V strings, the node count a
    string, time_limit an object, hold as priority 0 (what v0.0.38's hold set; 23.11's v0.0.40 has no hold)."""
    if version == LEGACY:
        return job
    found = {k: v for k, v in job.items() if k not in ("gres", "hold")}
    if "gres" in job:
        found["tres_per_node"] = f"gres/{job['gres']}"
    if "environment" in job:
        found["environment"] = [f"{k}={v}" for k, v in job["environment"].items()]
    if "nodes" in job:
        found["nodes"] = str(job["nodes"])
    if "time_limit" in job:
        found["time_limit"] = _set(int(job["time_limit"]))
    if "hold" in job:
        found["priority"] = _set(0) if job["hold"] else {"set": False, "infinite": True, "number": 0}
    return found


def job_submit_body(body: dict[str, Any], version: str) -> dict[str, Any]:
    """POST job/submit's body: the script stays beside the job (every version reads it there), the job is
    described as `version` reads it."""
    return body if version == LEGACY else {**body, "job": job_description(body["job"], version)}

"""Task samples: what a test submitted, one manifest per distinct shape, so a reviewer can reproduce the case.

A shape is the object without what differs from run to run and from job to job of one kind: names, labels,
annotations, the namespace. Twelve identical jobs of a fairness test are one sample (counted 12); a gang and
its filler, which ask for different pod counts, are two. Secret data and secret-named environment values never
enter a sample.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from harness.core.redact import REDACTED, SECRET_NAME

KUBERNETES = "kubernetes apply"  # how the object was submitted (Slurm jobs: slurmrestd)
RANDOM_METADATA = ("name", "generateName", "namespace", "labels", "annotations", "uid", "resourceVersion",
                   "creationTimestamp", "managedFields")
RANDOM_FIELDS = ("name",)  # a Slurm job's body: its name carries the run's tag
NAME_PLACEHOLDER = "<name>"
MIN_NAME_LEN = 3  # a shorter name would be replaced inside unrelated words


def without_secrets(manifest: dict[str, Any]) -> dict[str, Any]:
    """Pure: a copy with a Secret's data and secret-named environment variables' values redacted."""
    clean = copy.deepcopy(manifest)
    if clean.get("kind") == "Secret":
        for key in ("data", "stringData"):
            if isinstance(clean.get(key), dict):
                clean[key] = {k: REDACTED for k in clean[key]}
    _redact_env(clean)
    return clean


def _redact_env(value: Any) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "env" and isinstance(item, list):
                for var in item:
                    if isinstance(var, dict) and "value" in var and SECRET_NAME.search(str(var.get("name", ""))):
                        var["value"] = REDACTED
            elif key == "environment" and isinstance(item, dict):  # a Slurm job's environment
                for name in item:
                    if SECRET_NAME.search(name):
                        item[name] = REDACTED
            else:
                _redact_env(item)
    elif isinstance(value, list):
        for item in value:
            _redact_env(item)


def shape(manifest: dict[str, Any], via: str = KUBERNETES) -> str:
    """Pure: the key two objects of the same shape share (kind, and the body without names, labels, namespace;
    the object's own name wherever it recurs, in a pod template's labels or a batch script, is a placeholder)."""
    name = str((manifest.get("metadata") or {}).get("name") or (manifest.get("job") or {}).get("name") or "")
    body = copy.deepcopy(manifest)
    meta = body.get("metadata")
    if isinstance(meta, dict):
        for key in RANDOM_METADATA:
            meta.pop(key, None)
    job = body.get("job")
    if isinstance(job, dict):
        for key in RANDOM_FIELDS:
            job.pop(key, None)
    _drop_names(body.get("spec"))
    key = json.dumps([via, body], sort_keys=True, default=str)
    return key.replace(name, NAME_PLACEHOLDER) if len(name) >= MIN_NAME_LEN else key


def _drop_names(value: Any) -> None:
    """Pod templates inside a spec carry the job's name in their labels and metadata: not part of the shape."""
    if isinstance(value, dict):
        meta = value.get("metadata")
        if isinstance(meta, dict):
            for key in RANDOM_METADATA:
                meta.pop(key, None)
        for key, item in value.items():
            if key != "metadata":
                _drop_names(item)
    elif isinstance(value, list):
        for item in value:
            _drop_names(item)


@dataclass
class Samples:
    """The distinct shapes a test submitted, the first of each as it was submitted, and how many of each."""

    _by_shape: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, manifest: dict[str, Any], via: str = KUBERNETES, kind: str = "") -> None:
        """One more object submitted (`kind` for bodies that do not name theirs: a Slurm job)."""
        key = shape(manifest, via)
        if key in self._by_shape:
            self._by_shape[key]["count"] += 1
            return
        self._by_shape[key] = {"kind": kind or str(manifest.get("kind") or "object"), "via": via, "count": 1,
                               "manifest": without_secrets(manifest)}

    def as_list(self) -> list[dict[str, Any]]:
        return [dict(s) for s in self._by_shape.values()]

"""Benchmark of the training suite on the sim: wall time on three backends, and API requests per job.

Run: python bench/training_suite.py [--backends kueue,volcano,default]
Counts every request the harness's Kubernetes client sends (a watch is one request however long it
streams), and the jobs the suites submitted, so requests per job show whether the harness polls.
Numbers go to the README; nothing here asserts.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from typing import Any

import pytest
from kubernetes.client import rest

from harness.core.paths import REPO_ROOT

JOB_KINDS = ("/jobs/", "/rayjobs/")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backends", default="kueue,volcano,default")
    parser.add_argument("suites", nargs="*", default=["suites/training"])
    args = parser.parse_args()
    counts: collections.Counter[str] = collections.Counter()
    jobs: set[str] = set()
    original = rest.RESTClientObject.request

    def counting(self: Any, method: str, url: str, *a: Any, **kw: Any) -> Any:
        watch = "watch=true" in url.lower()
        counts["watch" if watch else method] += 1
        if method == "PATCH" and any(k in url for k in JOB_KINDS):
            jobs.add(url.split("?")[0])
        return original(self, method, url, *a, **kw)

    rest.RESTClientObject.request = counting
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as reports:
        code = pytest.main([*(str(REPO_ROOT / s) for s in args.suites), "-q", "-p", "no:cacheprovider",
                            f"--backends={args.backends}", f"--reports-dir={reports}"])
    wall = time.monotonic() - started
    total = sum(counts.values())
    print(f"wall time: {wall:.0f}s (pytest exit {int(code)})")
    print(f"API requests: {total} ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})")
    print(f"jobs submitted: {len(jobs)}; requests per job: {total / max(1, len(jobs)):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

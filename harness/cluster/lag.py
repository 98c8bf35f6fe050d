"""The harness's own observation lag: how late a watch of the runner's learns of a change the API server has made.

A watch on the run lock's Lease (the one object every run owns) is connected; the Lease is patched with a probe
annotation; the lag is the time from the patch's response to the watch event that carries it. Both ends are the
harness's own clock, so a real cluster's clock skew does not enter it. It is what every wait of the case may
have been late by (record/evidence.py widens one-shot durations by it).
"""

from __future__ import annotations

import threading
import time

from kubernetes import client

PROBE_ANNOTATION = "gpupoc.io/lag-probe"
PROBE_TIMEOUT_S = 5


def observation_lag(api: client.ApiClient, namespace: str, name: str, timeout_s: int = PROBE_TIMEOUT_S) -> float | None:
    """Seconds from a patch's response to its watch event (None: no event within the timeout, or refused)."""
    leases = client.CoordinationV1Api(api)
    try:
        version = leases.read_namespaced_lease(name, namespace).metadata.resource_version
        stream = leases.list_namespaced_lease(namespace, field_selector=f"metadata.name={name}", watch=True,
                                              resource_version=version, timeout_seconds=timeout_s,
                                              _preload_content=False)
    except (client.ApiException, OSError):
        return None
    token = f"{time.time():.6f}"
    seen: list[float] = []

    def read() -> None:
        try:
            for line in stream:
                if token in line.decode(errors="replace"):
                    seen.append(time.monotonic())
                    return
        except Exception:  # noqa: BLE001 - the stream closed under it: no event seen
            return

    reader = threading.Thread(target=read, name="gpupoc-lag-probe", daemon=True)
    reader.start()
    try:
        leases.patch_namespaced_lease(name, namespace, {"metadata": {"annotations": {PROBE_ANNOTATION: token}}})
        answered = time.monotonic()
        reader.join(timeout_s)
    except (client.ApiException, OSError):
        return None
    finally:
        stream.close()
    return max(0.0, seen[0] - answered) if seen else None

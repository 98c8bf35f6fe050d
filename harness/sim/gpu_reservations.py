"""The device side of KAI's GPU sharing on the sim's simulated nodes (simulated).

On a real node, KAI's binder places a reservation pod on the GPU it chose for a group of fractional pods; the
pod's own program asks NVML for its one GPU and writes the GPU's UUID on itself (`run.ai/reserve_for_gpu_index`),
and the binder waits for it (40 s, then the bind fails). A kwok pod runs nothing, so this process writes it: for
each reservation pod on a node labelled simulated, the UUID of a device of that node no other reservation pod
holds. The UUIDs are made from the node's name and the device's index. `--same-uuid` is a misconfiguration on
purpose: every reservation pod says one UUID, as a broken device side would report; those written before it
started too (a group left from an earlier case may still be alive and take new fractions).
"""

from __future__ import annotations

import argparse
import logging
import threading
import time
import uuid
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kubernetes import client, config, watch

NAMESPACE = "kai-resource-reservation"
GROUP_LABEL = "runai-gpu-group"
UUID_ANNOTATION = "run.ai/reserve_for_gpu_index"
from harness.config.accelerators import NVIDIA
from harness.cluster.inventory import SIMULATED_LABEL as SIMULATED_LABEL  # one home: the inventory reads it too
GPU_RESOURCE = NVIDIA.resource  # the sim plays NVIDIA's device plugin
UUID_NAMESPACE = uuid.UUID("6f1c1a52-7c1e-4c57-9a55-0c1d6e0b7a11")
WATCH_S = 60
log = logging.getLogger("gpu-reservations")


def device_uuid(node: str, index: int) -> str:
    """Pure: the simulated UUID of device `index` of `node`, in NVML's form (GPU-<uuid>)."""
    return f"GPU-{uuid.uuid5(UUID_NAMESPACE, f'{node}/{index}')}"


def assignments(pods: Iterable[dict[str, Any]], gpus: dict[str, int], same_uuid: bool = False) -> dict[str, str]:
    """Pure: reservation pod name -> the UUID to write, for the pods on simulated nodes (`gpus`: their device
    count) that have none yet; the lowest device of the node that no other reservation pod holds. `same_uuid`:
    every pod on them that does not say the one UUID yet."""
    held: dict[str, set[str]] = {}
    one = device_uuid("every-reservation", 0)
    waiting = []
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or node not in gpus or (pod["metadata"].get("deletionTimestamp")):
            continue
        written = (pod["metadata"].get("annotations") or {}).get(UUID_ANNOTATION)
        if same_uuid:
            if written != one:
                waiting.append((pod["metadata"]["name"], node))
        elif written:
            held.setdefault(node, set()).add(written)
        else:
            waiting.append((pod["metadata"]["name"], node))
    chosen = {}
    for name, node in waiting:
        if same_uuid:
            chosen[name] = one
            continue
        taken = held.setdefault(node, set())
        free = next((u for u in (device_uuid(node, i) for i in range(gpus[node])) if u not in taken), None)
        if free is None:
            log.warning("no free device on %s for %s: left for the binder's timeout", node, name)
            continue
        taken.add(free)
        chosen[name] = free
    return chosen


def simulated_gpus(core: client.CoreV1Api) -> dict[str, int]:
    nodes = core.list_node(label_selector=f"{SIMULATED_LABEL}=true").items
    return {n.metadata.name: int((n.status.allocatable or {}).get(GPU_RESOURCE, "0")) for n in nodes}


def reconcile(core: client.CoreV1Api, same_uuid: bool) -> str:
    """Write the UUIDs the reservation pods lack; the list's resourceVersion, to watch from."""
    listed = core.list_namespaced_pod(NAMESPACE, label_selector=GROUP_LABEL)
    pods = [core.api_client.sanitize_for_serialization(p) for p in listed.items]
    for name, value in assignments(pods, simulated_gpus(core), same_uuid).items():
        core.patch_namespaced_pod(name, NAMESPACE, {"metadata": {"annotations": {UUID_ANNOTATION: value}}})
        log.info("%s: %s", name, value)
    return str(listed.metadata.resource_version)


READY = threading.Event()  # set once the first reconcile is done: a restart (`--same-uuid`) is in force when healthy


def run(same_uuid: bool) -> None:
    core = client.CoreV1Api()
    while True:
        try:
            version = reconcile(core, same_uuid)
            READY.set()
            for _ in watch.Watch().stream(core.list_namespaced_pod, NAMESPACE, label_selector=GROUP_LABEL,
                                          resource_version=version, timeout_seconds=WATCH_S):
                reconcile(core, same_uuid)
        except Exception as exc:  # the API server restarted, a watch expired: list again
            log.warning("%s; listing again in 1 s", exc)
            time.sleep(1)


class Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        # healthy once the reservation pods already there have been reconciled (rewritten, with --same-uuid): a
        # restart that answered before it raced the case it was restarted for (mt41, 2026-12-08)
        self.send_response((200 if READY.is_set() else 503) if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--health-port", type=int, required=True)
    parser.add_argument("--same-uuid", action="store_true", help="every reservation pod gets one UUID (broken)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config.load_kube_config()  # KUBECONFIG
    server = ThreadingHTTPServer(("127.0.0.1", args.health_port), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    run(args.same_uuid)


if __name__ == "__main__":
    main()

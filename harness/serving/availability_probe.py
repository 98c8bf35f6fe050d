"""A steady availability probe: one short completion every 1/rate seconds, each on a new connection.

A new connection per request, like a fresh client: kube-proxy balances connections, so the probe sees the
Service's real spread over its endpoints (a canary's share). Each answer is one JSON line on stdout: when it
was sent, status, which pod and version served it (the model server's headers), latency. The first line says
which network namespace the probe ran in.

Run by the harness (`harness.serving.traffic`), inside the sim's network namespace on the sim: a request to a pod or
Service address from the host's own namespace is refused here, whatever started it.
"""

from __future__ import annotations

import argparse
import http.client
import ipaddress
import json
import os
import signal
import sys
import threading
import time
import urllib.parse
from pathlib import Path

MAX_IN_FLIGHT = 32
SIM_NETNS = Path("/run/netns")
SIM_NETNS_PREFIX = "gpupoc-sim-"
# The sim's pod and Service ranges (harness.sim.components): they exist only inside the sim's namespace.
SIM_RANGES = (ipaddress.ip_network("10.244.0.0/16"), ipaddress.ip_network("10.96.0.0/12"))


def netns_inode() -> int:
    return os.stat("/proc/self/ns/net").st_ino


def in_sim_netns() -> bool:
    """This process runs inside a network namespace the sim made (`ip netns` names it gpupoc-sim-<port base>)."""
    here = netns_inode()
    return any(ns.stat().st_ino == here for ns in SIM_NETNS.glob(f"{SIM_NETNS_PREFIX}*")) if SIM_NETNS.is_dir() \
        else False


def refuse_reason(host: str) -> str | None:
    """Why a request to `host` must not leave from here (None: it may). A sim pod or Service address only from
    inside the sim's namespace; loopback, names and a real cluster's addresses (an ingress) as usual."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None  # a name (an ingress of a real cluster): resolved and routed by the host as usual
    if any(address in network for network in SIM_RANGES) and not in_sim_netns():
        return (f"refusing to send to {host} from outside the sim's network namespace: the sim's pod and Service "
                "addresses are reached only from inside it")
    return None


def one_request(url: urllib.parse.SplitResult, body: bytes, timeout_s: float) -> dict[str, object]:
    sent = time.time()
    started = time.monotonic()
    result: dict[str, object] = {"t": sent}
    connection = http.client.HTTPConnection(url.hostname or "", url.port or 80, timeout=timeout_s)
    try:
        connection.request("POST", url.path or "/v1/completions", body=body,
                           headers={"Content-Type": "application/json", "Connection": "close"})
        response = connection.getresponse()
        response.read()
        result.update(status=response.status, ok=200 <= response.status < 300,
                      pod=response.getheader("x-gpupoc-pod") or "", version=response.getheader("x-gpupoc-version") or "")
    except (OSError, http.client.HTTPException) as exc:
        result.update(status=0, ok=False, error=f"{type(exc).__name__}: {exc}"[:200])
    finally:
        connection.close()
    result["latency_s"] = round(time.monotonic() - started, 4)
    return result


def run(url: str, rate: float, duration_s: float, max_requests: int, timeout_s: float, model: str,
        stop_after_ok: int = 0) -> int:
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())  # Probe.stop(): no new request; the ones out finish
    parsed = urllib.parse.urlsplit(url)
    reason = refuse_reason(parsed.hostname or "")
    if reason:
        print(json.dumps({"error": reason}), flush=True)
        return 2
    print(json.dumps({"netns": netns_inode(), "url": url}), flush=True)
    body = json.dumps({"model": model, "prompt": "ping", "max_tokens": 1}).encode()
    lock, slots = threading.Lock(), threading.Semaphore(MAX_IN_FLIGHT)
    count = min(max_requests, int(rate * duration_s))
    start = time.monotonic()
    threads = []
    oks = threading.Event()
    answered_ok = [0]

    def fire() -> None:
        try:
            answer = one_request(parsed, body, timeout_s)
            with lock:
                sys.stdout.write(json.dumps(answer) + "\n")
                sys.stdout.flush()
                answered_ok[0] += 1 if answer.get("ok") else 0
                if stop_after_ok and answered_ok[0] >= stop_after_ok:
                    oks.set()
        finally:
            slots.release()

    for i in range(count):
        if oks.is_set() or stopping.is_set():
            break
        delay = start + i / rate - time.monotonic()
        if delay > 0 and stopping.wait(delay):
            break
        slots.acquire()
        thread = threading.Thread(target=fire, daemon=True)
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join(timeout_s + 1)
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description="gpupoc availability probe (started by the harness)")
    parser.add_argument("--url", required=True)
    parser.add_argument("--rate", type=float, default=10.0, help="requests per second")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds")
    parser.add_argument("--max-requests", type=int, default=5000)
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--model", default="sim-llm")
    parser.add_argument("--stop-after-ok", type=int, default=0, help="end after this many successes (0: never)")
    args = parser.parse_args()
    sys.exit(run(args.url, args.rate, args.duration, args.max_requests, args.timeout, args.model, args.stop_after_ok))


if __name__ == "__main__":
    main()

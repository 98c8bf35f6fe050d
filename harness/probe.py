"""A steady availability probe: one short completion every 1/rate seconds, each on a new connection.

A new connection per request, like a fresh client: kube-proxy balances connections, so the probe sees the
Service's real spread over its endpoints (a canary's share). Each answer is one JSON line on stdout: when it
was sent, status, which pod and version served it (the model server's headers), latency. The first line says
which network namespace the probe ran in.

Run by the harness (`harness.traffic`), inside the sim's network namespace on the sim: a request to a pod or
Service address from the host's own namespace is refused here, whatever started it.
"""

from __future__ import annotations

import argparse
import http.client
import ipaddress
import json
import os
import sys
import threading
import time
import urllib.parse

MAX_IN_FLIGHT = 32
HOST_NETNS = "/proc/1/ns/net"


def netns_inode(pid: str = "self") -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def refuse_reason(host: str) -> str | None:
    """Why a request to `host` must not leave from here (None: it may). Loopback is always fine; any other
    address only from a network namespace other than the host's (the sim's)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None  # a name (an ingress of a real cluster): resolved and routed by the host as usual
    if address.is_loopback:
        return None
    try:
        in_host = netns_inode() == os.stat(HOST_NETNS).st_ino
    except OSError:
        return None  # cannot tell (not root): a real cluster's address, routed as usual
    if in_host:
        return (f"refusing to send to {host} from the host's own network namespace: pod and Service addresses of "
                "the sim are reached only from inside the sim's namespace")
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
        if oks.is_set():
            break
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
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

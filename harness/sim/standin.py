"""A vLLM stand-in for the sim's serving pods: OpenAI-compatible completions, /health and vLLM's metrics.

Server logic: the sim's data plane opens the socket (in the pod's network namespace) and runs
``asyncio.start_server(server.handle, sock=sock)``. In a container of its own, a model server without a GPU
(`gpupoc standin` in the harness's image, or `python3 -m harness.sim.standin` in the sim's real nodes' image: this
module needs nothing but the standard library), `main` listens on every address of the pod until SIGTERM. Timing
is simulated with asyncio sleeps.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import re
import signal
import sys
import time
from bisect import bisect_left
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, TypeVar

PREFIX = "sim.gpupoc.io/"
SERVES, MODEL, VERSION, PORT = (PREFIX + k for k in ("model-server", "model", "version", "model-port"))
LOAD_TIME, TTFT, TTFT_PER_TOKEN, ITL = (PREFIX + k for k in ("load-time", "ttft", "ttft-per-prompt-token", "itl"))
MAX_NUM_SEQS, SLOWDOWN, ERROR_RATE, OUTPUT_TOKENS, PREFIX_CACHE_TOKENS, PREFIX_ROUTE = (
    PREFIX + k for k in ("max-num-seqs", "slowdown", "error-rate", "output-tokens", "prefix-cache-tokens",
                         "prefix-route"))
BLOCK_TOKENS = 16  # vLLM's default KV-cache block size: a prefix is cached and found in whole blocks

# vLLM's bucket bounds; queue time uses the e2e bounds, as vLLM does.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60)

MAX_BODY = 16 * 1024 * 1024
GONE_CHECK_S = 0.2  # how often a waiting request checks that its client is still there
MAX_HEADERS = 100
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m)?")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0}
_log = logging.getLogger(__name__)
T = TypeVar("T")


def parse_duration(text: str) -> float:
    """Seconds from "50ms", "1.5s", "2s", "1m" or a bare number of seconds ("0.2")."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"bad duration {text!r}: expected a number with an optional unit ms, s or m "
                         "(50ms, 1.5s, 0.2, 1m)")
    return float(match[1]) * _UNITS[match[2] or "s"]


def serves(annotations: Mapping[str, str]) -> bool:
    """Whether the pod opted in to a model-server stand-in."""
    return annotations.get(SERVES, "").strip().lower() == "true"


@dataclass(frozen=True)
class ServerSpec:
    pod: str
    namespace: str
    model: str = "sim-llm"
    version: str = "v1"
    port: int = 8000
    load_time_s: float = 2.0
    ttft_s: float = 0.04
    ttft_per_prompt_token_s: float = 0.0
    itl_s: float = 0.01
    max_num_seqs: int = 16
    slowdown: float = 0.02
    error_rate: float = 0.0
    default_output_tokens: int = 32
    prefix_cache_tokens: int = 0  # the prefix cache's size in tokens; 0: no prefix caching
    prefix_route: str = ""  # the prefix-aware route the replicas naming it share (PrefixRouter); "": none

    @property
    def pod_ref(self) -> str:
        return f"{self.namespace}/{self.pod}"


def spec_from_pod(name: str, namespace: str, annotations: Mapping[str, str], labels: Mapping[str, str]) -> ServerSpec:
    """The stand-in a pod asks for; ValueError names the annotation and value when one is bad."""
    def get(key: str, parse: Callable[[str], T], ok: Callable[[T], bool], expected: str, default: T) -> T:
        raw = annotations.get(key)
        if raw is None:
            return default
        try:
            value = parse(raw.strip())
            good = ok(value)
        except ValueError:
            good = False
        if not good:
            raise ValueError(f"pod {namespace}/{name}: annotation {key}={raw!r} is invalid: expected {expected}")
        return value

    def text(v: str) -> bool:
        return bool(v) and v.isprintable()

    def duration(key: str, default: float) -> float:
        return get(key, parse_duration, lambda v: True, "a duration such as 50ms, 1.5s, 0.2 or 1m", default)

    version = labels.get("version") or labels.get("app.kubernetes.io/version") or "v1"
    return ServerSpec(
        pod=name, namespace=namespace,
        model=get(MODEL, str, text, "a non-empty model name", "sim-llm"),
        version=get(VERSION, str, text, "a non-empty version", version),
        port=get(PORT, int, lambda v: 1 <= v <= 65535, "a port 1-65535", 8000),
        load_time_s=duration(LOAD_TIME, 2.0),
        ttft_s=duration(TTFT, 0.04),
        ttft_per_prompt_token_s=duration(TTFT_PER_TOKEN, 0.0),
        itl_s=duration(ITL, 0.01),
        max_num_seqs=get(MAX_NUM_SEQS, int, lambda v: v >= 1, "an integer >= 1", 16),
        slowdown=get(SLOWDOWN, float, lambda v: 0 <= v < float("inf"), "a number >= 0", 0.02),
        error_rate=get(ERROR_RATE, float, lambda v: 0 <= v <= 1, "a probability 0-1", 0.0),
        default_output_tokens=get(OUTPUT_TOKENS, int, lambda v: v >= 1, "an integer >= 1", 32),
        prefix_cache_tokens=get(PREFIX_CACHE_TOKENS, int, lambda v: v >= 0, "an integer >= 0 (0: off)", 0),
        prefix_route=get(PREFIX_ROUTE, str, text, "a non-empty route name", ""),
    )


class Histogram:
    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # per bucket, not cumulative; the last is +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1


def block_keys(words: list[str]) -> list[int]:
    """The prompt's whole blocks of BLOCK_TOKENS tokens, each named by its tokens and every block before it."""
    keys, parent = [], 0
    for start in range(0, len(words) - len(words) % BLOCK_TOKENS, BLOCK_TOKENS):
        parent = hash((parent, *words[start:start + BLOCK_TOKENS]))
        keys.append(parent)
    return keys


class PrefixCache:
    """vLLM's automatic prefix caching, as far as time to first token depends on it: a prompt's KV blocks of
    BLOCK_TOKENS tokens, each named by its tokens and every block before it, kept up to `capacity_tokens` and evicted
    least recently used first. A prompt's hit is its leading blocks found cached, never the whole prompt (vLLM
    computes at least its last token)."""

    def __init__(self, capacity_tokens: int) -> None:
        self.capacity_blocks = capacity_tokens // BLOCK_TOKENS
        self._blocks: OrderedDict[int, None] = OrderedDict()
        self.queries = self.hits = 0  # tokens, as vLLM's prefix_cache_queries / _hits count them

    def lookup(self, words: list[str]) -> int:
        """The prompt's tokens found cached; its whole blocks are cached from now on."""
        keys = block_keys(words)
        found = 0
        for key in keys:
            if key not in self._blocks:
                break
            found += 1
        hit = min(found * BLOCK_TOKENS, max(len(words) - 1, 0))
        for key in reversed(keys):  # the leading block used last: evicted last, as vLLM frees a prompt's tail first
            self._blocks[key] = None
            self._blocks.move_to_end(key)
        while len(self._blocks) > self.capacity_blocks:
            self._blocks.popitem(last=False)
        self.queries += len(words)
        self.hits += hit
        return hit


class PrefixRouter:
    """A prefix-aware route over the replicas that share it, in the manner of the Gateway API Inference Extension's
    endpoint picker (its prefix-cache scorer): it remembers which replica it sent each prompt block to (up to
    `capacity_blocks`, least recently used first out) and sends a prompt to the replica it sent the longest run of the
    prompt's leading blocks; a prompt it has not seen goes to the replica it has sent the fewest blocks, then the
    least loaded. Simulated: the sim's stand-in for an endpoint picker, which needs Envoy to run."""

    def __init__(self, capacity_blocks: int = 1 << 16) -> None:
        self.capacity_blocks = capacity_blocks
        self._owner: OrderedDict[int, str] = OrderedDict()
        self._owned: dict[str, int] = {}

    def pick(self, servers: list[ModelServer], words: list[str]) -> ModelServer:
        by_ref = {s.spec.pod_ref: s for s in servers}
        keys, chosen = block_keys(words), None
        for key in keys:
            owner = by_ref.get(self._owner.get(key, ""))
            if owner is None:
                break
            chosen = owner
        if chosen is None:
            chosen = min(servers, key=lambda s: (self._owned.get(s.spec.pod_ref, 0), s.running + s.waiting))
        ref = chosen.spec.pod_ref
        for key in reversed(keys):  # the leading block remembered longest, as the prefix cache keeps it
            self._disown(self._owner.pop(key, None))
            self._owner[key] = ref
            self._owned[ref] = self._owned.get(ref, 0) + 1
        while len(self._owner) > self.capacity_blocks:
            self._disown(self._owner.popitem(last=False)[1])
        return chosen

    def forget(self, ref: str) -> None:
        """A replica gone: it counts no blocks (what it was sent stays remembered until overwritten or evicted)."""
        self._owned.pop(ref, None)

    def _disown(self, ref: str | None) -> None:
        if ref in self._owned:
            self._owned[ref] -= 1


class BadRequest(Exception):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Request:
    method: str
    path: str
    version: str
    headers: dict[str, str]
    body: bytes
    target: str = ""  # the request-target as sent (with its query; absolute to a forward proxy)

    @property
    def keep_alive(self) -> bool:
        connection = self.headers.get("connection", "").lower()
        return "keep-alive" in connection if self.version == "HTTP/1.0" else "close" not in connection


@dataclass
class _Completion:
    prompt: list[str]  # its tokens: one per word
    output_tokens: int
    stream: bool
    include_usage: bool
    model: object

    @property
    def prompt_tokens(self) -> int:
        return len(self.prompt)


_ROUTES = {"/health": "GET", "/metrics": "GET", "/v1/models": "GET",
           "/v1/completions": "POST", "/v1/chat/completions": "POST"}


class ModelServer:
    """One pod's stand-in; ``handle`` serves one connection (HTTP/1.1 with keep-alive)."""

    def __init__(self, spec: ServerSpec, clock: Callable[[], float] = time.monotonic,
                 rng: random.Random | None = None) -> None:
        self.spec = spec
        self._clock = clock
        self._rng = rng if rng is not None else random.Random()
        self._started = clock()
        self._created = int(time.time())
        self._running = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._ttft, self._itl = Histogram(TTFT_BUCKETS), Histogram(ITL_BUCKETS)
        self._e2e, self._queue = Histogram(E2E_BUCKETS), Histogram(E2E_BUCKETS)
        self._success = self._prompt_tokens = self._generation_tokens = self._errors = self._aborted = 0
        self._connections: set[asyncio.StreamWriter] = set()
        self._closed = False
        self._cache = PrefixCache(spec.prefix_cache_tokens) if spec.prefix_cache_tokens else None
        # the prefix-aware route's choice of replica for a prompt (the data plane's, for servers with a prefix_route)
        self.route: Callable[[list[str]], ModelServer] | None = None

    @property
    def loaded(self) -> bool:
        return self._clock() - self._started >= self.spec.load_time_s

    @property
    def running(self) -> int:
        return self._running

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def close(self) -> None:
        """Drop every open connection (closing a listener leaves them open) and refuse later ones."""
        self._closed = True
        for writer in list(self._connections):
            writer.transport.abort()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections.add(writer)
        try:
            while not self._closed:
                try:
                    request = await read_request(reader, writer)
                except BadRequest as exc:
                    await self._error(writer, exc.status, str(exc), keep_alive=False)
                    return
                if request is None or not await self._dispatch(request, writer, reader.at_eof):
                    return
        except (ConnectionError, EOFError):
            pass
        except Exception:
            _log.exception("stand-in %s failed on a connection", self.spec.pod_ref)
        finally:
            self._connections.discard(writer)
            writer.close()
            with suppress(Exception):
                await writer.wait_closed()

    async def _dispatch(self, req: Request, writer: asyncio.StreamWriter,
                        gone: Callable[[], bool] = lambda: False) -> bool:
        """Answer one request; whether the connection stays open."""
        keep_alive = req.keep_alive
        method = _ROUTES.get(req.path)
        if method is None:
            await self._error(writer, 404, f"no route {req.path}", keep_alive)
        elif req.method != method:
            await self._error(writer, 405, f"{req.method} not allowed on {req.path}", keep_alive, [("allow", method)])
        elif req.path == "/health":
            await self._send(writer, 200 if self.loaded else 503, b"", "text/plain; charset=utf-8", keep_alive)
        elif req.path == "/metrics":
            await self._send(writer, 200, self.metrics_text().encode(), "text/plain; version=0.0.4; charset=utf-8",
                             keep_alive)
        elif not self.loaded:
            await self._error(writer, 503, f"model {self.spec.model} is still loading", keep_alive)
        elif req.path == "/v1/models":
            await self._json(writer, 200, {"object": "list", "data": [{
                "id": self.spec.model, "object": "model", "created": self._created, "owned_by": "vllm",
                "root": self.spec.model, "parent": None}]}, keep_alive)
        else:
            return await self._complete(req, writer, keep_alive, chat=req.path == "/v1/chat/completions", gone=gone)
        return keep_alive

    async def _complete(self, req: Request, writer: asyncio.StreamWriter, keep_alive: bool, chat: bool,
                        gone: Callable[[], bool] = lambda: False) -> bool:
        arrival = self._clock()
        try:
            params = _parse_completion(req.body, chat, self.spec.default_output_tokens)
        except BadRequest as exc:
            await self._error(writer, exc.status, str(exc), keep_alive)
            return keep_alive
        if params.model is not None and params.model != self.spec.model:
            await self._error(writer, 404, f"The model `{params.model}` does not exist.", keep_alive)
            return keep_alive
        server = self.route(params.prompt) if self.route is not None else self
        if server is self:
            return await self._serve(params, req, writer, keep_alive, chat, gone, arrival)
        if server._closed:
            await self._error(writer, 503, f"{server.spec.pod_ref} is stopping", keep_alive)
            return keep_alive
        server._connections.add(writer)  # the connection is the chosen server's while it serves: its close aborts it
        try:
            return await server._serve(params, req, writer, keep_alive, chat, gone, arrival)
        finally:
            server._connections.discard(writer)

    async def _serve(self, params: _Completion, req: Request, writer: asyncio.StreamWriter, keep_alive: bool,
                     chat: bool, gone: Callable[[], bool], arrival: float) -> bool:
        """Generate the completion on this server (the one the request reached, or the one its route chose)."""
        if not await self._acquire(gone):
            self._aborted += 1
            return False  # the client left while its request waited: vLLM aborts it, so does the stand-in
        try:
            if self.spec.error_rate > 0 and self._rng.random() < self.spec.error_rate:
                self._errors += 1
                await self._error(writer, 500, f"injected error ({ERROR_RATE}={self.spec.error_rate})", keep_alive)
                return keep_alive
            kind = "chat.completion" if chat else "text_completion"
            base = {"id": f"{'chatcmpl' if chat else 'cmpl'}-{self._rng.getrandbits(96):024x}",
                    "object": kind + (".chunk" if chat and params.stream else ""),
                    "created": int(time.time()), "model": self.spec.model}
            n = params.output_tokens
            usage = {"prompt_tokens": params.prompt_tokens, "completion_tokens": n,
                     "total_tokens": params.prompt_tokens + n}
            if not params.stream:
                await self._generate(params.prompt, n, arrival, None)
                text = "tok " * n
                choice = ({"index": 0, "message": {"role": "assistant", "content": text}} if chat
                          else {"index": 0, "text": text})
                choice |= {"logprobs": None, "finish_reason": "length"}
                await self._json(writer, 200, base | {"choices": [choice], "usage": usage}, keep_alive)
                return keep_alive
            chunked = req.version == "HTTP/1.1"
            keep_alive = keep_alive and chunked  # without chunking the stream ends at the close
            headers = [("cache-control", "no-cache")] + ([("transfer-encoding", "chunked")] if chunked else [])
            writer.write(self._head(200, "text/event-stream; charset=utf-8", keep_alive, headers))

            async def event(payload: dict[str, Any] | str) -> None:
                text = payload if isinstance(payload, str) else json.dumps(payload | self._served_by())
                data = f"data: {text}\n\n".encode()
                writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n" if chunked else data)
                await writer.drain()

            def choice_of(content: str | None, finish: str | None) -> dict[str, Any]:
                if chat:
                    delta = {} if content is None else {"content": content}
                    return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                return {"index": 0, "text": content or "", "logprobs": None, "finish_reason": finish}

            async def token(i: int) -> None:
                choice = choice_of("tok ", None)
                if chat and i == 0:
                    choice["delta"] = {"role": "assistant", "content": "tok "}
                await event(base | {"choices": [choice]})

            await self._generate(params.prompt, n, arrival, token)
            await event(base | {"choices": [choice_of(None, "length")]})
            if params.include_usage:
                await event(base | {"choices": [], "usage": usage})
            await event("[DONE]")
            if chunked:
                writer.write(b"0\r\n\r\n")
                await writer.drain()
            return keep_alive
        finally:
            self._release()

    async def _generate(self, prompt: list[str], n: int, arrival: float,
                        on_token: Callable[[int], Awaitable[None]] | None) -> None:
        """Prefill (of the prompt's tokens not found in the prefix cache) then n tokens, with the current batch's
        slowdown; records vLLM's metrics."""
        spec = self.spec
        queued = self._clock() - arrival
        cached = self._cache.lookup(prompt) if self._cache is not None else 0
        await asyncio.sleep((spec.ttft_s + spec.ttft_per_prompt_token_s * (len(prompt) - cached)) * self._factor())
        self._prompt_tokens += len(prompt)
        last = self._clock()
        self._ttft.observe(last - arrival)
        for i in range(n):
            if i:
                await asyncio.sleep(spec.itl_s * self._factor())
                now = self._clock()
                self._itl.observe(now - last)
                last = now
            self._generation_tokens += 1
            if on_token is not None:
                await on_token(i)
        self._queue.observe(queued)
        self._e2e.observe(self._clock() - arrival)
        self._success += 1

    def _factor(self) -> float:
        return 1 + self.spec.slowdown * max(self._running - 1, 0)

    async def _acquire(self, gone: Callable[[], bool] = lambda: False) -> bool:
        """A generation slot, first come first served; False when the client left while waiting (no slot taken)."""
        if self._running < self.spec.max_num_seqs and not self._waiters:
            self._running += 1
            return True
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        try:
            while not future.done():
                await asyncio.wait([future], timeout=GONE_CHECK_S)
                if not future.done() and gone():
                    self._waiters.remove(future)
                    return False
            return True
        except asyncio.CancelledError:
            if future in self._waiters:
                self._waiters.remove(future)
            elif not future.cancelled():  # handed a slot just before the cancel: pass it on
                self._release()
            raise

    def _release(self) -> None:
        while self._waiters:
            future = self._waiters.popleft()
            if not future.done():
                future.set_result(None)  # the slot passes to the waiter; running stays the same
                return
        self._running -= 1

    def metrics_text(self) -> str:
        """Prometheus text exposition (0.0.4) of vLLM's metrics for this pod."""
        spec = self.spec
        labels = ",".join(f'{k}="{_escape(v)}"' for k, v in (
            ("model_name", spec.model), ("pod", spec.pod), ("namespace", spec.namespace), ("version", spec.version)))
        lines: list[str] = []

        def family(name: str, kind: str, help_text: str, samples: list[tuple[str, str, float]]) -> None:
            lines.extend((f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"))
            lines.extend(f"{name}{suffix}{{{labels}{extra}}} {float(value)!r}" for suffix, extra, value in samples)

        def histogram(name: str, help_text: str, h: Histogram) -> None:
            samples, total = [], 0
            for bound, count in zip((*h.bounds, None), h.counts):
                total += count
                le = "+Inf" if bound is None else repr(float(bound))
                samples.append(("_bucket", f',le="{le}"', float(total)))
            family(name, "histogram", help_text, samples + [("_sum", "", h.sum), ("_count", "", h.count)])

        family("gpupoc_sim_standin_info", "gauge",
               "Marks these series as coming from the gpupoc sim's model-server stand-in, not a real vLLM.",
               [("", "", 1)])
        family("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
               [("", "", self._running)])
        family("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
               [("", "", self.waiting)])
        family("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
               [("", "", self._running / spec.max_num_seqs)])
        histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", self._ttft)
        histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", self._itl)
        histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", self._e2e)
        histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
                  self._queue)
        family("vllm:request_success_total", "counter", "Count of successfully processed requests.",
               [("", ',finished_reason="length"', self._success),
                ("", ',finished_reason="abort"', self._aborted)])
        family("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
               [("", "", self._prompt_tokens)])
        cache = self._cache or PrefixCache(0)
        family("vllm:prefix_cache_queries_total", "counter",
               "Prefix cache queries, in terms of number of queried tokens.", [("", "", cache.queries)])
        family("vllm:prefix_cache_hits_total", "counter",
               "Prefix cache hits, in terms of number of cached tokens.", [("", "", cache.hits)])
        family("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
               [("", "", self._generation_tokens)])
        family("gpupoc_sim_request_errors_total", "counter",
               f"Requests the gpupoc sim's stand-in failed on purpose ({ERROR_RATE}); the sim's own, not vLLM's.",
               [("", "", self._errors)])
        return "\n".join(lines) + "\n"

    def _served_by(self) -> dict[str, Any]:
        return {"served_by": {"pod": self.spec.pod_ref, "version": self.spec.version}}

    def _head(self, status: int, content_type: str, keep_alive: bool,
              headers: list[tuple[str, str]] | None = None) -> bytes:
        lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", f"content-type: {content_type}",
                 *(f"{k}: {v}" for k, v in headers or []),
                 f"x-gpupoc-pod: {self.spec.pod_ref}", f"x-gpupoc-version: {self.spec.version}",
                 f"connection: {'keep-alive' if keep_alive else 'close'}"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    async def _send(self, writer: asyncio.StreamWriter, status: int, body: bytes, content_type: str,
                    keep_alive: bool, headers: list[tuple[str, str]] | None = None) -> None:
        head = self._head(status, content_type, keep_alive, [("content-length", str(len(body))), *(headers or [])])
        writer.write(head + body)
        await writer.drain()

    async def _json(self, writer: asyncio.StreamWriter, status: int, body: dict[str, Any], keep_alive: bool,
                    headers: list[tuple[str, str]] | None = None) -> None:
        data = json.dumps(body | self._served_by()).encode()
        await self._send(writer, status, data, "application/json", keep_alive, headers)

    async def _error(self, writer: asyncio.StreamWriter, status: int, message: str, keep_alive: bool,
                     headers: list[tuple[str, str]] | None = None) -> None:
        kind = "".join(HTTPStatus(status).phrase.split())
        error = {"message": message, "type": kind if kind.endswith("Error") else kind + "Error",
                 "param": None, "code": status}
        await self._json(writer, status, {"error": error}, keep_alive, headers)


def arguments(parser: argparse.ArgumentParser) -> None:
    """The stand-in's command line (`gpupoc standin`, `python3 -m harness.sim.standin`)."""
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model", default="sim-llm", help="the model name it answers for (default: %(default)s)")
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                        help="its latency model, as the sim's pod annotations name it: version=v2, load-time=2s, "
                             "ttft=40ms, ttft-per-prompt-token=1ms, itl=10ms, max-num-seqs=16, slowdown=0.02, "
                             "error-rate=0, output-tokens=32, prefix-cache-tokens=0")


def spec_from_arguments(args: argparse.Namespace) -> ServerSpec:
    """ValueError names a bad setting."""
    annotations = {MODEL: args.model, PORT: str(args.port)}
    for item in args.settings:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set {item!r}: expected KEY=VALUE, e.g. ttft=40ms")
        annotations[PREFIX + key.strip()] = value.strip()
    return spec_from_pod(os.environ.get("HOSTNAME", "standin"), os.environ.get("POD_NAMESPACE", ""), annotations, {})


async def serve(spec: ServerSpec) -> None:
    """Serve `spec` on every address of this host (IPv4 and IPv6) until SIGTERM or SIGINT (the pod ends)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    server = ModelServer(spec)
    listener = await asyncio.start_server(server.handle, host=None, port=spec.port)
    print(f"gpupoc stand-in: {spec.model} (version {spec.version}) on port {spec.port}, /health after "
          f"{spec.load_time_s:g}s; simulated: no GPU, no model", flush=True)
    try:
        await stop.wait()
    finally:
        server.close()
        listener.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="standin", description="gpupoc's vLLM stand-in: a model server without a GPU")
    arguments(parser)
    args = parser.parse_args(argv)
    try:
        spec = spec_from_arguments(args)
    except ValueError as exc:
        print(f"standin: error: {exc}", file=sys.stderr)
        return 2
    asyncio.run(serve(spec))
    return 0


async def read_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Request | None:
    """One request off the connection; None when the client closed it between requests."""
    async def line() -> str | None:
        try:
            raw = await reader.readline()
        except ValueError:  # longer than the reader's limit
            raise BadRequest("request line or header too long") from None
        return raw.decode("latin-1").rstrip("\r\n") if raw.endswith(b"\n") else None

    request_line = await line()
    if request_line == "":  # a stray CRLF after the previous body is allowed (RFC 9112 2.2)
        request_line = await line()
    if request_line is None:
        return None
    parts = request_line.split(" ")
    if len(parts) != 3 or not parts[0].isalpha() or parts[2] not in ("HTTP/1.0", "HTTP/1.1"):
        raise BadRequest(f"malformed request line {request_line[:80]!r}")
    headers: dict[str, str] = {}
    while (header := await line()) != "":
        if header is None:
            raise EOFError("connection closed inside the headers")
        name, colon, value = header.partition(":")
        if not colon or not name or name != name.strip() or len(headers) >= MAX_HEADERS:
            raise BadRequest(f"malformed header {header[:80]!r}")
        headers[name.lower()] = value.strip()
    if "transfer-encoding" in headers:
        raise BadRequest("request bodies must have a Content-Length; Transfer-Encoding is not supported")
    length = headers.get("content-length", "0")
    if not re.fullmatch(r"[0-9]{1,9}", length):
        raise BadRequest(f"bad Content-Length {length!r}")
    if int(length) > MAX_BODY:
        raise BadRequest(f"body of {length} bytes is over {MAX_BODY}", 413)
    if int(length) and headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    body = await reader.readexactly(int(length))
    return Request(parts[0], parts[1].split("?", 1)[0], parts[2], headers, body, parts[1])


def _parse_completion(body: bytes, chat: bool, default_tokens: int) -> _Completion:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        raise BadRequest("body is not valid JSON") from None
    if not isinstance(data, dict):
        raise BadRequest("body must be a JSON object")
    if chat:
        messages = data.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise BadRequest("messages must be a non-empty list of objects")
        prompt = [w for m in messages for w in _words(m.get("content"), "messages[].content")]
    else:
        if data.get("prompt") is None:
            raise BadRequest("prompt is required")
        prompt = _words(data["prompt"], "prompt")
    output = default_tokens
    for key in ("max_completion_tokens", "max_tokens"):
        value = data.get(key)
        if value is not None:
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise BadRequest(f"{key} must be an integer >= 1, got {value!r}")
            output = value
            break
    options = data.get("stream_options")
    include_usage = isinstance(options, dict) and options.get("include_usage") is True
    return _Completion(prompt, output, data.get("stream") is True, include_usage, data.get("model"))


def _words(value: object, what: str) -> list[str]:
    """Prompt tokens: whitespace-separated words (a list's token ids count one each)."""
    if value is None:
        return []
    if isinstance(value, str):
        return value.split()
    if isinstance(value, int) and not isinstance(value, bool):
        return [str(value)]
    if isinstance(value, dict):  # a chat content part; images and the like count nothing
        text = value.get("text")
        return text.split() if isinstance(text, str) else []
    if isinstance(value, list):
        return [w for item in value if item is not None for w in _words(item, what)]
    raise BadRequest(f"{what} must be a string or a list of strings")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


if __name__ == "__main__":
    sys.exit(main())

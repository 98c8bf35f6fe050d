"""The sim's vLLM stand-in: spec parsing, HTTP behaviour, timing, queueing, errors and metrics."""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from harness.sim.standin import (BLOCK_TOKENS, ModelServer, PrefixCache, PrefixRouter, ServerSpec, parse_duration,
                                   serves, spec_from_pod)

FAST = {"sim.gpupoc.io/model-server": "true", "sim.gpupoc.io/load-time": "0", "sim.gpupoc.io/ttft": "20ms",
        "sim.gpupoc.io/itl": "2ms", "sim.gpupoc.io/output-tokens": "4"}


def spec(**annotations: str) -> ServerSpec:
    return spec_from_pod("llm-0", "serving", FAST | annotations, {"version": "v2"})


def run(coro: Coroutine[Any, Any, None]) -> None:
    asyncio.run(asyncio.wait_for(coro, 8))


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes
    first_chunk_at: float | None = None
    chunks: list[bytes] = field(default_factory=list)

    def json(self) -> Any:
        return json.loads(self.body)

    def events(self) -> list[str]:
        return [line[len("data: "):] for line in self.body.decode().split("\n\n") if line.startswith("data: ")]


class Client:
    """A raw HTTP/1.1 client on one connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
                      raw: bytes | None = None) -> Response:
        data = b"" if body is None else json.dumps(body).encode()
        head = f"{method} {path} HTTP/1.1\r\nhost: test\r\ncontent-length: {len(data)}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self.writer.write(raw if raw is not None else head.encode() + b"\r\n" + data)
        await self.writer.drain()
        return await self.read_response()

    async def read_response(self) -> Response:
        status_line = await self.reader.readline()
        status = int(status_line.split()[1])
        headers: dict[str, str] = {}
        while (line := (await self.reader.readline()).decode().rstrip("\r\n")):
            name, _, value = line.partition(":")
            headers[name.lower()] = value.strip()
        response = Response(status, headers, b"")
        if headers.get("transfer-encoding") == "chunked":
            while size := int((await self.reader.readline()).strip(), 16):
                chunk = await self.reader.readexactly(size)
                response.first_chunk_at = response.first_chunk_at or time.monotonic()
                response.chunks.append(chunk)
                assert await self.reader.readexactly(2) == b"\r\n"
            assert await self.reader.readexactly(2) == b"\r\n"
            response.body = b"".join(response.chunks)
        elif "content-length" in headers:
            response.body = await self.reader.readexactly(int(headers["content-length"]))
        else:
            response.body = await self.reader.read()
        return response

    async def closed(self) -> bool:
        return await asyncio.wait_for(self.reader.read(), 2) == b""

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


@asynccontextmanager
async def serving(server: ModelServer) -> AsyncIterator[Callable[[], Coroutine[Any, Any, Client]]]:
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    clients: list[Client] = []

    async def connect() -> Client:
        clients.append(Client(*await asyncio.open_connection("127.0.0.1", port)))
        return clients[-1]

    try:
        yield connect
    finally:
        for client in clients:
            client.writer.close()
        listener.close()
        await listener.wait_closed()


def samples(text: str) -> dict[str, float]:
    """Metric samples keyed by name and labels as written, with every family's HELP and TYPE checked."""
    described = set(re.findall(r"^# TYPE (\S+) (?:gauge|counter|histogram)$", text, re.M))
    assert described == set(re.findall(r"^# HELP (\S+) .+$", text, re.M))
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        match = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*)\{((?:[a-z_]+="[^"]*",?)*)\} (\S+)', line)
        assert match, line
        name = match[1]
        assert name in described or re.sub(r"_(bucket|sum|count)$", "", name) in described, name
        labels = dict(re.findall(r'([a-z_]+)="([^"]*)"', match[2]))
        ours = {"model_name": "sim-llm", "pod": "llm-0", "namespace": "serving", "version": "v2"}
        assert ours.items() <= labels.items()
        extra = ",".join(f"{k}={v}" for k, v in labels.items() if k in ("le", "finished_reason"))
        out[f"{name}{{{extra}}}" if extra else name] = float(match[3])
    return out


# --- spec ---

@pytest.mark.parametrize("text, seconds", [("50ms", 0.05), ("1.5s", 1.5), ("2s", 2.0), ("0.2", 0.2), ("1m", 60.0),
                                           (" 0 ", 0.0), (".5s", 0.5)])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "fast", "-1s", "1h", "1 s", "ms", "1e3"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="bad duration"):
        parse_duration(text)


def test_spec_defaults_and_version_fallbacks() -> None:
    assert serves({"sim.gpupoc.io/model-server": "True"}) and not serves({}) and not serves(
        {"sim.gpupoc.io/model-server": "yes"})
    default = spec_from_pod("p", "ns", {}, {})
    assert default == ServerSpec(pod="p", namespace="ns", model="sim-llm", version="v1", port=8000, load_time_s=2.0,
                                 ttft_s=0.04, ttft_per_prompt_token_s=0.0, itl_s=0.01, max_num_seqs=16,
                                 slowdown=0.02, error_rate=0.0, default_output_tokens=32)
    assert spec_from_pod("p", "ns", {}, {"app.kubernetes.io/version": "b"}).version == "b"
    assert spec_from_pod("p", "ns", {}, {"version": "a", "app.kubernetes.io/version": "b"}).version == "a"
    assert spec_from_pod("p", "ns", {"sim.gpupoc.io/version": "c"}, {"version": "a"}).version == "c"
    custom = spec(**{"sim.gpupoc.io/model": "m", "sim.gpupoc.io/model-port": "9000", "sim.gpupoc.io/max-num-seqs": "3",
                     "sim.gpupoc.io/slowdown": "0.5", "sim.gpupoc.io/error-rate": "0.25",
                     "sim.gpupoc.io/ttft-per-prompt-token": "1ms"})
    assert (custom.model, custom.port, custom.max_num_seqs) == ("m", 9000, 3)
    assert (custom.slowdown, custom.error_rate) == (0.5, 0.25)
    assert custom.ttft_per_prompt_token_s == pytest.approx(0.001) and custom.pod_ref == "serving/llm-0"


@pytest.mark.parametrize("key, value", [("model-port", "http"), ("model-port", "0"), ("max-num-seqs", "0"),
                                        ("error-rate", "1.5"), ("slowdown", "-1"), ("slowdown", "inf"), ("itl", "fast"),
                                        ("output-tokens", "2.5"), ("model", ""), ("version", "a\nb")])
def test_spec_rejects_bad_annotation(key: str, value: str) -> None:
    with pytest.raises(ValueError) as info:
        spec(**{f"sim.gpupoc.io/{key}": value})
    assert f"sim.gpupoc.io/{key}" in str(info.value) and repr(value) in str(info.value)


# --- serving ---

def test_loading_then_healthy() -> None:
    now = [100.0]
    server = ModelServer(spec(**{"sim.gpupoc.io/load-time": "2s"}), clock=lambda: now[0])

    async def main() -> None:
        async with serving(server) as connect:
            client = await connect()
            assert not server.loaded
            assert (await client.request("GET", "/health")).status == 503
            loading = await client.request("POST", "/v1/completions", {"prompt": "hi"})
            assert loading.status == 503 and "loading" in loading.json()["error"]["message"]
            assert (await client.request("GET", "/v1/models")).status == 503
            now[0] += 2.0
            assert server.loaded
            healthy = await client.request("GET", "/health")
            assert (healthy.status, healthy.body) == (200, b"")
            models = (await client.request("GET", "/v1/models")).json()
            assert models["object"] == "list" and [m["id"] for m in models["data"]] == ["sim-llm"]

    run(main())


def test_streaming_completion_chunks_usage_and_ttft() -> None:
    server = ModelServer(spec(**{"sim.gpupoc.io/ttft": "50ms", "sim.gpupoc.io/itl": "5ms"}))

    async def main() -> None:
        async with serving(server) as connect:
            client = await connect()
            sent = time.monotonic()
            response = await client.request("POST", "/v1/completions", {
                "model": "sim-llm", "prompt": "one two three", "max_tokens": 5, "stream": True,
                "stream_options": {"include_usage": True}})
            assert response.status == 200 and response.headers["content-type"].startswith("text/event-stream")
            assert response.first_chunk_at is not None and 0.045 <= response.first_chunk_at - sent < 2
            events = response.events()
            assert events[-1] == "[DONE]"
            chunks = [json.loads(e) for e in events[:-1]]
            tokens, final, usage = chunks[:5], chunks[5], chunks[6]
            assert len(chunks) == 7 and all(c["choices"][0]["text"] == "tok " for c in tokens)
            assert final["choices"][0]["finish_reason"] == "length"
            assert usage["choices"] == [] and usage["usage"] == {"prompt_tokens": 3, "completion_tokens": 5,
                                                                  "total_tokens": 8}
            assert all(c["object"] == "text_completion" and c["model"] == "sim-llm" for c in chunks)
            assert all(c["served_by"] == {"pod": "serving/llm-0", "version": "v2"} for c in chunks)
            assert len({c["id"] for c in chunks}) == 1

    run(main())


def test_chat_stream_and_non_stream() -> None:
    server = ModelServer(spec())

    async def main() -> None:
        async with serving(server) as connect:
            client = await connect()
            messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": [
                {"type": "text", "text": "hello there you"}]}]
            plain = (await client.request("POST", "/v1/chat/completions", {
                "messages": messages, "max_completion_tokens": 3})).json()
            assert plain["object"] == "chat.completion" and plain["choices"][0]["message"] == {
                "role": "assistant", "content": "tok tok tok "}
            assert plain["usage"] == {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
            assert plain["served_by"]["pod"] == "serving/llm-0"
            stream = await client.request("POST", "/v1/chat/completions", {"messages": messages, "stream": True})
            chunks = [json.loads(e) for e in stream.events()[:-1]]
            assert len(chunks) == 4 + 1  # default output tokens, then the finish; no usage asked for
            assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": "tok "}
            assert chunks[-1]["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "length"}
            assert all(c["object"] == "chat.completion.chunk" for c in chunks)

    run(main())


def test_max_num_seqs_queues_the_next_request() -> None:
    server = ModelServer(spec(**{"sim.gpupoc.io/max-num-seqs": "2", "sim.gpupoc.io/ttft": "150ms",
                                 "sim.gpupoc.io/output-tokens": "2"}))

    async def main() -> None:
        async with serving(server) as connect:
            clients = [await connect() for _ in range(3)]
            calls = [asyncio.create_task(c.request("POST", "/v1/completions", {"prompt": "x"})) for c in clients]
            for _ in range(100):
                if server.running == 2 and server.waiting == 1:
                    break
                await asyncio.sleep(0.005)
            assert (server.running, server.waiting) == (2, 1)
            metrics = samples((await (await connect()).request("GET", "/metrics")).body.decode())
            assert metrics["vllm:num_requests_running"] == 2 and metrics["vllm:num_requests_waiting"] == 1
            assert all(r.status == 200 for r in await asyncio.gather(*calls))
            assert (server.running, server.waiting) == (0, 0)
            metrics = samples((await clients[0].request("GET", "/metrics")).body.decode())
            assert metrics["vllm:request_queue_time_seconds_count"] == 3
            assert metrics["vllm:request_queue_time_seconds_sum"] >= 0.1  # the third waited for a slot

    run(main())


def test_error_rate_one_answers_500_and_counts() -> None:
    server = ModelServer(spec(**{"sim.gpupoc.io/error-rate": "1"}), rng=random.Random(1))

    async def main() -> None:
        async with serving(server) as connect:
            client = await connect()
            for _ in range(2):
                failed = await client.request("POST", "/v1/completions", {"prompt": "x", "stream": True})
                assert failed.status == 500 and failed.json()["error"]["code"] == 500
                assert failed.headers["x-gpupoc-pod"] == "serving/llm-0"
            metrics = samples((await client.request("GET", "/metrics")).body.decode())
            assert metrics["gpupoc_sim_request_errors_total"] == 2
            assert metrics["vllm:request_success_total{finished_reason=length}"] == 0
            assert server.running == 0

    run(main())


def test_metrics_histograms_count_requests() -> None:
    server = ModelServer(spec())

    async def main() -> None:
        async with serving(server) as connect:
            client = await connect()
            for stream in (False, True, False):
                response = await client.request("POST", "/v1/completions", {
                    "prompt": ["a b", "c"], "max_tokens": 4, "stream": stream})
                assert response.status == 200
            text = (await client.request("GET", "/metrics")).body.decode()
            assert "# TYPE vllm:time_to_first_token_seconds histogram" in text
            assert "# TYPE vllm:request_success_total counter" in text
            assert re.search(r"^gpupoc_sim_standin_info\{.*\} 1\.0$", text, re.M)
            metrics = samples(text)
            for name, count in [("time_to_first_token", 3), ("inter_token_latency", 9), ("e2e_request_latency", 3),
                                ("request_queue_time", 3)]:
                assert metrics[f"vllm:{name}_seconds_count"] == count
                buckets = [v for k, v in metrics.items() if k.startswith(f"vllm:{name}_seconds_bucket")]
                assert buckets == sorted(buckets) and buckets[-1] == count
            assert metrics["vllm:time_to_first_token_seconds_bucket{le=0.001}"] == 0
            assert metrics["vllm:time_to_first_token_seconds_bucket{le=+Inf}"] == 3
            assert metrics["vllm:time_to_first_token_seconds_sum"] >= 3 * 0.015
            assert metrics["vllm:request_success_total{finished_reason=length}"] == 3
            assert metrics["vllm:prompt_tokens_total"] == 9 and metrics["vllm:generation_tokens_total"] == 12

    run(main())


def test_headers_identify_pod_and_version_on_every_response() -> None:
    server = ModelServer(spec())

    async def main() -> None:
        async with serving(server) as connect:
            client = await connect()
            answers = [await client.request("GET", "/health"), await client.request("GET", "/metrics"),
                       await client.request("GET", "/nowhere"), await client.request("GET", "/v1/completions"),
                       await client.request("POST", "/v1/completions", raw=None, body=["not", "an", "object"]),
                       await client.request("POST", "/v1/completions", {"prompt": "x"})]
            assert [a.status for a in answers] == [200, 200, 404, 405, 400, 200]
            assert answers[3].headers["allow"] == "POST"
            for answer in answers:
                assert answer.headers["x-gpupoc-pod"] == "serving/llm-0"
                assert answer.headers["x-gpupoc-version"] == "v2"
            assert answers[-1].json()["served_by"] == {"pod": "serving/llm-0", "version": "v2"}

    run(main())


@pytest.mark.parametrize("body, message", [
    (b"{nope", "not valid JSON"), (b'{"prompt": 3.5}', "prompt must be"), (b"{}", "prompt is required"),
    (b'{"prompt": "x", "max_tokens": 0}', "max_tokens must be"),
    (b'{"prompt": "x", "model": "other"}', "does not exist"),
])
def test_bad_completion_bodies(body: bytes, message: str) -> None:
    server = ModelServer(spec())

    async def main() -> None:
        async with serving(server) as connect:
            client = await connect()
            head = f"POST /v1/completions HTTP/1.1\r\ncontent-length: {len(body)}\r\n\r\n".encode()
            response = await client.request("POST", "/", raw=head + body)
            assert response.status in (400, 404) and message in response.json()["error"]["message"]
            assert (await client.request("GET", "/health")).status == 200  # the connection stays usable

    run(main())


def test_keep_alive_then_close() -> None:
    server = ModelServer(spec())

    async def main() -> None:
        async with serving(server) as connect:
            client = await connect()
            first = await client.request("POST", "/v1/completions", {"prompt": "a", "stream": True})
            second = await client.request("POST", "/v1/completions", {"prompt": "b"})
            assert (first.status, second.status) == (200, 200)
            assert first.headers["connection"] == second.headers["connection"] == "keep-alive"
            last = await client.request("GET", "/health", headers={"connection": "close"})
            assert last.headers["connection"] == "close" and await client.closed()

    run(main())


@pytest.mark.parametrize("raw", [b"GARBAGE\r\n\r\n", b"GET /health HTTP/1.1\r\nno colon here\r\n\r\n",
                                 b"POST /v1/completions HTTP/1.1\r\ncontent-length: ten\r\n\r\n"])
def test_malformed_requests_get_400_and_close(raw: bytes) -> None:
    server = ModelServer(spec())

    async def main() -> None:
        async with serving(server) as connect:
            client = await connect()
            response = await client.request("GET", "/", raw=raw)
            assert response.status == 400 and response.headers["connection"] == "close"
            assert await client.closed()

    run(main())


def test_client_vanishing_mid_stream_frees_the_slot() -> None:
    server = ModelServer(spec(**{"sim.gpupoc.io/itl": "20ms", "sim.gpupoc.io/output-tokens": "50"}))

    async def main() -> None:
        async with serving(server) as connect:
            client = await connect()
            body = json.dumps({"prompt": "x", "stream": True}).encode()
            head = f"POST /v1/completions HTTP/1.1\r\ncontent-length: {len(body)}\r\n\r\n"
            client.writer.write(head.encode() + body)
            await client.reader.readuntil(b"data: ")
            client.writer.transport.abort()
            for _ in range(200):
                if server.running == 0:
                    break
                await asyncio.sleep(0.01)
            assert server.running == 0
            assert (await (await connect()).request("GET", "/health")).status == 200

    run(main())


def test_close_drops_open_connections() -> None:
    server = ModelServer(spec())

    async def main() -> None:
        async with serving(server) as connect:
            client = await connect()
            assert (await client.request("GET", "/health")).status == 200
            server.close()
            assert await client.closed()
            assert await (await connect()).closed()

    run(main())


def test_a_waiting_request_whose_client_left_is_aborted() -> None:
    """Like vLLM: a queued request of a client that hung up never runs (it would hold the queue metric up). The
    first request holds the one slot 2 s: at 300 ms it had ended before the check under make test's start-up load."""
    server = ModelServer(spec(**{"sim.gpupoc.io/max-num-seqs": "1", "sim.gpupoc.io/ttft": "2s",
                                 "sim.gpupoc.io/output-tokens": "1"}))

    async def main() -> None:
        async with serving(server) as connect:
            first = await connect()
            running = asyncio.create_task(first.request("POST", "/v1/completions", {"prompt": "x"}))
            leaver = await connect()
            body = json.dumps({"prompt": "x"}).encode()
            leaver.writer.write(f"POST /v1/completions HTTP/1.1\r\ncontent-length: {len(body)}\r\n\r\n".encode()
                                + body)
            for _ in range(100):
                if server.waiting == 1:
                    break
                await asyncio.sleep(0.005)
            assert server.waiting == 1
            leaver.writer.close()
            for _ in range(100):
                if server.waiting == 0:
                    break
                await asyncio.sleep(0.01)
            assert server.waiting == 0 and server.running == 1  # gone before the slot freed
            assert (await running).status == 200
            metrics = samples((await (await connect()).request("GET", "/metrics")).body.decode())
            assert metrics["vllm:request_success_total{finished_reason=abort}"] == 1

    run(main())


# --- prefix caching ---

def test_prefix_cache_finds_leading_whole_blocks_and_evicts_the_least_recently_used() -> None:
    cache = PrefixCache(capacity_tokens=4 * BLOCK_TOKENS)
    system = [f"s{i}" for i in range(2 * BLOCK_TOKENS)]
    assert cache.lookup(system + ["q1"] * 5) == 0  # cold
    assert cache.lookup(system + ["q2"] * 5) == 2 * BLOCK_TOKENS  # the shared system prompt's two blocks
    assert cache.lookup(system) == 2 * BLOCK_TOKENS - 1  # never the whole prompt
    other = [f"o{i}" for i in range(3 * BLOCK_TOKENS)]
    assert cache.lookup(["x"] + system) == 0  # a prefix, not a substring: shifted by one token, no block matches
    cache.lookup(other)  # 3 more blocks: the cache holds 4, the system prompt's were used least recently
    assert cache.lookup(system) == 0
    assert (cache.queries, cache.hits) == (5 * len(system) + 2 * 5 + 1 + len(other), 4 * BLOCK_TOKENS - 1)
    tail = PrefixCache(capacity_tokens=2 * BLOCK_TOKENS)  # a prompt's tail is evicted first, as vLLM frees it
    tail.lookup(system)
    tail.lookup(other[:BLOCK_TOKENS])
    assert tail.lookup(system) == BLOCK_TOKENS


def test_a_cached_prefix_shortens_time_to_first_token_and_is_counted() -> None:
    server = ModelServer(spec(**{"sim.gpupoc.io/ttft": "5ms", "sim.gpupoc.io/ttft-per-prompt-token": "2ms",
                                 "sim.gpupoc.io/prefix-cache-tokens": "1024"}))
    prompt = " ".join(f"w{i}" for i in range(4 * BLOCK_TOKENS))

    async def ttft(client: Client) -> float:
        sent = time.monotonic()
        response = await client.request("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 1,
                                                                     "stream": True})
        assert response.status == 200 and response.first_chunk_at is not None
        return response.first_chunk_at - sent

    async def main() -> None:
        async with serving(server) as connect:
            client = await connect()
            cold, warm = await ttft(client), await ttft(client)
            assert cold >= 0.005 + 0.002 * 4 * BLOCK_TOKENS and warm < cold / 4  # 133 ms against 7 ms
            metrics = samples((await client.request("GET", "/metrics")).body.decode())
            assert metrics["vllm:prefix_cache_queries_total"] == 2 * 4 * BLOCK_TOKENS
            assert metrics["vllm:prefix_cache_hits_total"] == 4 * BLOCK_TOKENS - 1

    run(main())


# --- the prefix-aware route (the sim's stand-in for an endpoint picker) ---

def replica(name: str) -> ModelServer:
    return ModelServer(spec_from_pod(name, "serving", FAST | {"sim.gpupoc.io/prefix-route": "llm"}, {}))


def test_a_prefix_route_keeps_each_prefix_on_one_replica_and_spreads_new_ones() -> None:
    router, servers = PrefixRouter(), [replica("llm-0"), replica("llm-1")]
    groups = [[f"g{g}-{i}" for i in range(2 * BLOCK_TOKENS)] for g in range(4)]
    first = [router.pick(servers, system + ["q"]) for system in groups]
    assert [s.spec.pod for s in first] == ["llm-0", "llm-1", "llm-0", "llm-1"]  # the one sent fewest blocks
    again = [router.pick(servers, system + [f"other-{n}"] * 5) for n, system in enumerate(groups)]
    assert again == first  # a prefix comes back to the replica that was sent it
    assert router.pick(servers[1:], groups[0]) is servers[1]  # its replica gone: one of those left
    small = PrefixRouter(capacity_blocks=2)  # it forgets a prompt's tail first: its leading block still routes it
    owner = small.pick(servers, groups[3])
    small.pick([s for s in servers if s is not owner], groups[2])
    assert small.pick(servers, groups[3]) is owner
    assert spec_from_pod("a", "b", {"sim.gpupoc.io/prefix-route": "llm"}, {}).prefix_route == "llm"


def test_a_request_on_a_routed_replica_is_served_by_the_replica_its_route_picks() -> None:
    receiving, chosen = replica("llm-0"), replica("llm-1")
    receiving.route = lambda words: chosen

    async def main() -> None:
        async with serving(receiving) as connect:
            response = await (await connect()).request("POST", "/v1/completions",
                                                       {"prompt": "a b c", "max_tokens": 2, "stream": True})
            assert response.status == 200
            assert json.loads(response.events()[0])["served_by"]["pod"] == "serving/llm-1"
        def generated(server: ModelServer) -> float:
            found = re.search(r"^vllm:generation_tokens_total\{[^}]*\} (\S+)$", server.metrics_text(), re.M)
            assert found
            return float(found[1])

        assert (generated(chosen), generated(receiving)) == (2, 0)

    run(main())

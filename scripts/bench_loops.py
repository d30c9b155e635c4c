"""The gateway benchmarks' request loops and the gateway they start (loopback only, bounded request counts).

* `latency`: `n` requests one after another (c=1), each timed to its last byte: p50/p99;
* `throughput`: `n` requests from `concurrency` workers: requests per second;
* `stream`: `n` streamed requests one after another: time to the first SSE event and to the end, and the events;
* `Target.cpu_seconds`: the CPU time of the process behind a target, read around a loop for its CPU per request.

`BenchGateway` is `worker-serve gateway` in its own process, started through `python scripts/bench_loops.py
--serve CONFIG [--metrics-off]`, which runs the CLI as typed (uvicorn, its defaults) and, with `--metrics-off`,
makes the per-request metrics a no-op: the one feature without a config switch, priced by `bench_gateway_cost.py`.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from core.process import ServiceProcess, free_port  # noqa: E402

WORKSPACE = "ws-bench"
CHAT_BODY: dict[str, Any] = {"messages": [
    {"role": "user", "content": "Say hi to the finance team."},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "call-1", "type": "function", "function": {
        "name": "find_team", "arguments": "{\"name\": \"finance\"}"}}]},
    {"role": "tool", "tool_call_id": "call-1", "content": "{\"team\": \"finance\", \"members\": 4}"}],
    "tools": [{"type": "function", "function": {"name": "find_team", "parameters": {
        "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}}],
    "max_tokens": 8, "temperature": 0}
MESSAGES_BODY: dict[str, Any] = {"max_tokens": 8, "messages": [
    {"role": "user", "content": "Say hi to the finance team."},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "tu-1", "name": "find_team",
                                       "input": {"name": "finance"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu-1",
                                  "content": "{\"team\": \"finance\", \"members\": 4}"}]}],
    "tools": [{"name": "find_team", "input_schema": {"type": "object", "properties": {"name": {"type": "string"}}}}]}
PATHS = {"chat": "/v1/chat/completions", "messages": "/v1/messages"}


@dataclass(frozen=True)
class Target:
    """Where a loop sends its requests: a base URL, the model name it asks for and its headers."""

    name: str
    url: str
    model: str
    headers: dict[str, str] = field(default_factory=dict)
    pid: int | None = None
    """The process serving it (its children counted too): what `cpu_seconds` reads."""

    def cpu_seconds(self) -> float:
        """CPU time its process tree has used so far (user + system): a cost the other processes sharing the
        machine's cores cannot inflate, unlike a latency."""
        if self.pid is None:
            return 0.0
        root = psutil.Process(self.pid)
        return sum(sum(p.cpu_times()[:2]) for p in [root, *root.children(recursive=True)])

    def request(self, api: str, stream: bool = False, max_tokens: int = 8) -> tuple[str, dict[str, Any]]:
        body = CHAT_BODY if api == "chat" else MESSAGES_BODY
        return self.url + PATHS[api], {**body, "model": self.model, "stream": stream, "max_tokens": max_tokens}


def cut(values: list[float], q: int) -> float:
    """The q-th percentile in ms (statistics' inclusive-free cut, as bench_gateway.py reads it)."""
    return 1000 * (statistics.median(values) if q == 50 else statistics.quantiles(values, n=100)[q - 1])


TURNS = 20
"""Requests per session: a session's requests rotate to a new `X-Session-Id` after this many, as agent sessions do
(capture labels within a session, so one endless session would price the store's growth, not a request)."""
_COUNT = itertools.count()


def _turn(headers: dict[str, str]) -> dict[str, str]:
    if "X-Session-Id" not in headers:
        return headers
    return {**headers, "X-Session-Id": f"{headers['X-Session-Id']}-{next(_COUNT) // TURNS}"}


async def _one(session: aiohttp.ClientSession, url: str, body: dict[str, Any], headers: dict[str, str]) -> float:
    headers = _turn(headers)
    started = time.perf_counter()
    async with session.post(url, json=body, headers=headers) as response:
        await response.read()
        if response.status != 200:
            raise RuntimeError(f"{url}: HTTP {response.status}: {(await response.text())[:300]}")
    return time.perf_counter() - started


async def latency(target: Target, api: str, n: int) -> list[float]:
    """Seconds of `n` sequential requests, each to its last byte."""
    url, body = target.request(api)
    async with aiohttp.ClientSession() as session:
        return [await _one(session, url, body, target.headers) for _ in range(n)]


async def throughput(target: Target, api: str, n: int, concurrency: int) -> float:
    """Requests per second of `n` requests from `concurrency` workers."""
    url, body = target.request(api)
    todo = iter(range(n))

    async def worker(session: aiohttp.ClientSession) -> None:
        for _ in todo:
            await _one(session, url, body, target.headers)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
        started = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        return n / (time.perf_counter() - started)


async def stream(target: Target, api: str, n: int, tokens: int) -> tuple[list[float], list[float], int]:
    """(seconds to the first SSE event, seconds to the end, events per stream) of `n` sequential streams."""
    url, body = target.request(api, stream=True, max_tokens=tokens)
    firsts, totals, events = [], [], 0
    async with aiohttp.ClientSession() as session:
        for _ in range(n):
            started, first, seen = time.perf_counter(), None, b""
            async with session.post(url, json=body, headers=_turn(target.headers)) as response:
                if response.status != 200:
                    raise RuntimeError(f"{url}: HTTP {response.status}: {(await response.text())[:300]}")
                async for chunk in response.content.iter_any():
                    if first is None and b"data:" in chunk:
                        first = time.perf_counter() - started
                    seen += chunk
            assert first is not None, f"{url}: the stream had no event"
            firsts.append(first)
            totals.append(time.perf_counter() - started)
            events = seen.count(b"\n\n")
    return firsts, totals, events


class BenchGateway:
    """`worker-serve gateway` with this config text (its port and state put in), in its own process."""

    def __init__(self, work: Path, name: str, config: str, metrics: bool = True, repo: Path = REPO) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        path = work / f"gateway-{name}.toml"
        path.write_text(f'[gateway]\nport = {self.port}\nstate_db = "state-{name}.sqlite"\n{config}')
        command = [sys.executable, __file__, "--serve", str(path), str(repo)] + ([] if metrics else ["--metrics-off"])
        self.service = ServiceProcess(f"gateway {name}", command, dict(os.environ), self.url, 120,
                                      log_path=work / f"gateway-{name}.log")

    def __enter__(self) -> BenchGateway:
        self.service.start()
        self.service.wait_healthy()
        return self

    def __exit__(self, *_: object) -> None:
        self.service.stop()

    @property
    def pid(self) -> int:
        assert self.service.proc is not None
        return self.service.proc.pid


def serve(config: str, repo: str, metrics: bool) -> int:
    """Run the gateway CLI of the checkout `repo` as typed (`--log-level warning`, as the benchmarks always have)."""
    sys.path.insert(0, repo)
    from serve.cli import main
    from serve.gateway.metrics import GatewayMetrics

    if not metrics:
        GatewayMetrics.observe = lambda *_, **__: None  # type: ignore[method-assign]
    return main(["gateway", "--config", config, "--log-level", "warning"])


if __name__ == "__main__" and sys.argv[1:2] == ["--serve"]:
    sys.exit(serve(sys.argv[2], sys.argv[3], "--metrics-off" not in sys.argv))

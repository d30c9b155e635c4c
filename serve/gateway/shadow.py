"""Shadow trials: re-send a sample of a route's production requests to a candidate version in
the background, store both answers and grade their agreement with the shared parser and
key-set scorer (`core.toolcalls.parse_response`, `core.scoring.compare_calls`).

The production path only ever calls `ShadowRunner.submit`, which never waits: when the
bounded queue is full the job is dropped and counted. Workers send the candidate request
with their own timeout, so a failing or slow candidate costs production nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from core.jsonfile import parse_problem
from core.records import ParsedResponse
from core.scoring import CallAgreement, chosen_call, compare_calls
from core.toolcalls import parse_response, parse_text, request_schemas, transport_error
from serve.gateway.errors import GatewayError
from serve.gateway.metrics import GatewayMetrics
from serve.gateway.registry import Registry, ShadowRow

Endpoint = Literal["chat", "completions"]
Answer = dict[str, Any] | str  # a chat message, or a completion's text
log = logging.getLogger(__name__)


class BadAnswer(ValueError):
    """A 200 answer without the fields an OpenAI answer must have."""


def answer_of(endpoint: Endpoint, payload: Any) -> Answer:
    """`choices[0].message` of a chat answer, `choices[0].text` of a completion."""
    try:
        choice = payload["choices"][0]
        answer = choice["message"] if endpoint == "chat" else choice["text"]
    except (KeyError, IndexError, TypeError) as exc:
        raise BadAnswer(f"the answer has no choices[0].{'message' if endpoint == 'chat' else 'text'}") from exc
    if not isinstance(answer, dict if endpoint == "chat" else str):
        raise BadAnswer(f"choices[0] has a malformed {'message' if endpoint == 'chat' else 'text'}")
    return answer


def tool_names(body: Mapping[str, Any]) -> frozenset[str] | None:
    """Names of the tools a chat request offered (None when it offered none: no unknown-tool check)."""
    tools = body.get("tools")
    if not isinstance(tools, list) or not tools:
        return None
    return frozenset(t["function"]["name"] for t in tools
                     if isinstance(t, dict) and isinstance(t.get("function"), dict) and "name" in t["function"])


def parse_answer(answer: Answer, request: Mapping[str, Any]) -> ParsedResponse:
    """Read an answer against the tools its request offered (names, and schemas to type text calls)."""
    names, schemas = tool_names(request), request_schemas(request.get("tools"))
    if isinstance(answer, dict):
        return parse_response(answer, names, schemas=schemas)
    return parse_text(answer, names, schemas=schemas)


class StreamAccumulator:
    """Rebuilds the final answer from an OpenAI SSE stream as it is relayed (choice 0 only)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._buffer = b""
        self._content: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self.done = False
        """The stream's `data: [DONE]` was seen: the answer is whole."""

    def feed(self, chunk: bytes) -> None:
        """Take the next bytes of the stream (SSE lines may be split across chunks)."""
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                self.done = True
                continue
            event, problem = parse_problem(data)
            if problem is None:
                self._event(event)

    def _event(self, event: Any) -> None:
        choices = event.get("choices") if isinstance(event, dict) else None
        for choice in choices if isinstance(choices, list) else []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            if self.endpoint == "completions":
                self._content.append(choice.get("text") or "")
                continue
            delta = choice.get("delta") or {}
            self._content.append(delta.get("content") or "")
            for call in delta.get("tool_calls") or []:
                slot = self._calls.setdefault(call.get("index", 0), {
                    "id": None, "type": "function", "function": {"name": "", "arguments": ""}})
                slot["id"] = call.get("id") or slot["id"]
                function = call.get("function") or {}
                slot["function"]["name"] += function.get("name") or ""
                slot["function"]["arguments"] += function.get("arguments") or ""

    def answer(self) -> Answer:
        """The answer the stream amounted to: a chat message (content and tool calls) or a completion's text."""
        text = "".join(self._content)
        if self.endpoint == "completions":
            return text
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if self._calls:
            message["tool_calls"] = [self._calls[i] for i in sorted(self._calls)]
        return message


@dataclass(frozen=True)
class ShadowJob:
    request_id: str  # the gateway's own id of the production request (= its capture's id)
    route: str
    production: str
    candidate: str
    endpoint: Endpoint
    body: dict[str, Any]  # the request as the candidate gets it (model = candidate, not streamed)
    production_answer: Answer
    replica_key: str | None
    request_sha256: str


def shadow_body(body: Mapping[str, Any], candidate: str) -> dict[str, Any]:
    """The production request re-addressed to the candidate, never streamed."""
    shadow = {k: v for k, v in body.items() if k != "stream_options"}
    shadow["model"] = candidate
    shadow["stream"] = False
    return shadow


Send = Callable[[ShadowJob], Awaitable[Any]]


class ShadowRunner:
    def __init__(self, queue_size: int, concurrency: int, timeout_s: float, send: Send,
                 registry: Registry, metrics: GatewayMetrics) -> None:
        self.queue: asyncio.Queue[ShadowJob] = asyncio.Queue(maxsize=queue_size)
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self._send = send
        self._registry = registry
        self._metrics = metrics
        self._workers: list[asyncio.Task[None]] = []
        self.running = 0

    def start(self) -> None:
        self._workers = [asyncio.create_task(self._work(), name=f"shadow-{i}") for i in range(self.concurrency)]

    async def stop(self) -> None:
        for task in self._workers:
            task.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers = []

    def submit(self, job: ShadowJob) -> bool:
        """Queue without waiting; a full queue drops the job (counted), never delays production."""
        try:
            self.queue.put_nowait(job)
        except asyncio.QueueFull:
            self.drop(job.route, "queue_full")
            return False
        return True

    def drop(self, route: str, reason: str) -> None:
        """Count a shadow request that was not sent (queue full, shutting down)."""
        self._metrics.shadow_dropped.labels(route, reason).inc()

    async def _work(self) -> None:
        while True:
            job = await self.queue.get()
            self.running += 1
            try:
                await self.run(job)
            except Exception:  # a bug in one comparison must not stop the shadow workers
                log.exception("shadow job %s failed", job.request_id)
            finally:
                self.running -= 1
                self.queue.task_done()

    async def run(self, job: ShadowJob) -> CallAgreement:
        """Send one shadow request, compare its answer with production's, and record and count the result."""
        started = time.perf_counter()
        answer: Answer | None = None
        status, reason = 200, None
        try:
            payload = await asyncio.wait_for(self._send(job), self.timeout_s)
            answer = answer_of(job.endpoint, payload)
            shadow = parse_answer(answer, job.body)
        except GatewayError as exc:
            status, reason, shadow = exc.status_code, exc.code, transport_error(exc.message)
        except TimeoutError:
            status, reason = 504, "shadow_timeout"
            shadow = transport_error(f"no shadow answer within {self.timeout_s:g} s")
        except BadAnswer as exc:
            status, reason, shadow = 502, "bad_upstream_response", transport_error(str(exc))
        elapsed = time.perf_counter() - started
        production = parse_answer(job.production_answer, job.body)
        agreement = compare_calls(production, shadow)
        self._metrics.observe(job.route, job.candidate, "shadow", status, elapsed, reason)
        self._metrics.shadow_comparisons.labels(job.route, job.candidate, agreement.value).inc()
        production_call, shadow_call = chosen_call(production), chosen_call(shadow)
        self._registry.record_shadow(ShadowRow(
            request_id=job.request_id, route=job.route, endpoint=job.endpoint, production=job.production,
            candidate=job.candidate, request_sha256=job.request_sha256,
            production_answer=json.dumps(job.production_answer), shadow_answer=json.dumps(answer),
            production_outcome=production.outcome.value, shadow_outcome=shadow.outcome.value,
            production_tool=production_call.tool if production_call else None,
            shadow_tool=shadow_call.tool if shadow_call else None,
            agreement=agreement.value, error=shadow.error, shadow_latency_s=elapsed))
        return agreement

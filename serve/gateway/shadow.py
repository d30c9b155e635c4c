"""Shadow trials: re-send a sample of a route's production requests to a candidate version in
the background, through the same API the production request came by, store both answers and
grade their agreement with the shared parser and key-set scorer (`Conversation.parse`,
`core.scoring.compare_calls`): a Messages API `tool_use` block is compared by tool and key set
exactly as a chat `tool_calls` entry.

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
from dataclasses import dataclass, field
from typing import Any

from core.scoring import CallAgreement, chosen_call, compare_calls
from core.toolcalls import transport_error
from serve.gateway.apis import APIS
from serve.gateway.apis.base import Answer, ApiName, BadAnswerError
from serve.gateway.errors import GatewayError
from serve.gateway.metrics import GatewayMetrics
from serve.gateway.registry import Registry, ShadowRow

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShadowJob:
    request_id: str  # the gateway's own id of the production request (= its capture's id)
    route: str
    production: str
    candidate: str
    api: ApiName  # the candidate gets the request through the same API
    body: dict[str, Any]  # the request as the candidate gets it (model = candidate, not streamed)
    production_answer: Answer
    replica_key: str | None
    request_sha256: str
    passed_on: Mapping[str, str] = field(default_factory=dict)  # the API's headers, as the client sent them
    cache_salt: str | None = None  # its production request's (serve/gateway/prefixcache.py)


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
        api = APIS[job.api]
        conversation = api.conversation(job.body)
        try:
            payload = await asyncio.wait_for(self._send(job), self.timeout_s)
            answer = api.answer(payload)
            shadow = conversation.parse(answer)
        except GatewayError as exc:
            status, reason, shadow = exc.status_code, exc.code, transport_error(exc.message)
        except TimeoutError:
            status, reason = 504, "shadow_timeout"
            shadow = transport_error(f"no shadow answer within {self.timeout_s:g} s")
        except BadAnswerError as exc:
            status, reason, shadow = 502, "bad_upstream_response", transport_error(str(exc))
        elapsed = time.perf_counter() - started
        production = conversation.parse(job.production_answer)
        agreement = compare_calls(production, shadow)
        self._metrics.observe(job.route, job.candidate, "shadow", status, elapsed, reason, api=job.api)
        self._metrics.shadow_comparisons.labels(job.route, job.candidate, agreement.value).inc()
        production_call, shadow_call = chosen_call(production), chosen_call(shadow)
        self._registry.record_shadow(ShadowRow(
            request_id=job.request_id, route=job.route, endpoint=job.api, production=job.production,
            candidate=job.candidate, request_sha256=job.request_sha256,
            production_answer=json.dumps(job.production_answer), shadow_answer=json.dumps(answer),
            production_outcome=production.outcome.value, shadow_outcome=shadow.outcome.value,
            production_tool=production_call.tool if production_call else None,
            shadow_tool=shadow_call.tool if shadow_call else None,
            agreement=agreement.value, error=shadow.error, shadow_latency_s=elapsed))
        return agreement

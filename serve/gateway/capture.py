"""Capture of live decisions (001 S13) and the tool-outcome guard (S11), off the production path.

A chat request that has been answered becomes a `CaptureJob`, queued on the event loop before
the client can see the end of the answer (JSON: as soon as the engine's answer is read; streams:
at the engine's `[DONE]`, else the stream's end). A client's next turn comes after it has seen
the answer, so a session's turns are queued in order, whatever the thread pool does; a job is
never queued from another thread (asyncio queues are not thread-safe). `Capture.submit` never
waits: a full queue drops the job and counts it. One worker does the rest, one job at a time in
queue order, in a thread, and any error there is logged and counted, never raised into a request:

* **guard**: the tool results at the end of the request (the results of the previous turn's
  calls) are classified (core/guard.py) and anomalies counted per workspace, tool and kind.
  This runs for every chat request that carries tool results, whatever the capture mode.
* **capture** (mode `descriptor` or `full`, workspace in the allowlist when there is one,
  session sampled at `sample_rate`, decided by a hash of the session id so a sampled session
  is captured whole): the guard's labels are attached to the captured decisions of the same
  session whose call produced them (matched by call id, else the session's latest unlabelled
  decision that called that tool), and the new decision is stored. A descriptor holds no
  message text: ids, hashes, roles, tool names offered, tool choice, the chosen call's tool
  and key set, route, adapter version, timings. `full` also stores the request and the chosen
  call's arguments; it is only allowed with an allowlist (serve/gateway/config.py refuses otherwise).

The store is its own SQLite file (WAL), so captures survive restarts; `read_decisions` is how
the suite builder (replay/capture_suite.py) reads it. It is bounded: at start-up and every
`retention_interval_s`, the worker deletes the decisions older than `retention_days` and the
oldest beyond `max_rows` (whole rows, so `full` text goes with them), in a thread and never at
the same time as a job; `worker_capture_rows` and `worker_capture_bytes` say what it holds.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from core.capture import CapturedDecision, CaptureStore, ToolResult, choice_label, message_hash, request_sha256
from core.guard import classify
from core.scoring import chosen_call
from serve.gateway.config import CaptureSection

if TYPE_CHECKING:  # the store and its reader stay importable without the gateway's web stack
    from serve.gateway.metrics import GatewayMetrics
    from serve.gateway.shadow import Answer

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class CaptureJob:
    """One answered chat request, as the capture worker gets it."""

    key: str  # the gateway's own id of the request: the capture's unique id
    request_id: str  # X-Request-Id as the client sent it (or the gateway's when it sent none)
    workspace: str | None
    session: str | None
    route: str
    adapter: str
    kind: str
    body: dict[str, Any]
    answer: Answer
    duration_s: float
    captured_at: str


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def sampled(key: str, rate: float) -> bool:
    """Deterministic per key, so every request of a sampled session is captured."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) < rate * 2**32


def tool_results(messages: list[Any], settings: CaptureSection) -> list[ToolResult]:
    """The guard's labels for the tool messages after the last assistant message."""
    tail: list[Mapping[str, Any]] = []
    for message in reversed(messages):
        if not isinstance(message, Mapping) or message.get("role") != "tool":
            break
        tail.insert(0, message)
    names: dict[str, str] = {}
    last = len(messages) - len(tail) - 1
    if tail and last >= 0 and isinstance(messages[last], Mapping):
        for call in messages[last].get("tool_calls") or []:
            if isinstance(call, Mapping) and isinstance(call.get("function"), Mapping):
                names[str(call.get("id"))] = str(call["function"].get("name", ""))
    results = []
    for message in tail:
        call_id = message.get("tool_call_id")
        tool = names.get(str(call_id)) or str(message.get("name") or "")
        results.append(ToolResult(call_id if isinstance(call_id, str) else None, tool,
                                  classify(message.get("content"), settings.guard, tool)))
    return results


def describe(job: CaptureJob, mode: str) -> CapturedDecision:
    """The stored record of a decision: text only in `full` mode."""
    from serve.gateway.shadow import parse_answer, tool_names

    given = job.body.get("messages")
    messages: list[Any] = given if isinstance(given, list) else []
    offered = tool_names(job.body)
    parsed = parse_answer(job.answer, job.body)
    call = chosen_call(parsed)
    raw_calls = job.answer.get("tool_calls") if isinstance(job.answer, dict) else None
    call_id = raw_calls[0].get("id") if raw_calls and isinstance(raw_calls[0], dict) else None
    full = mode == "full"
    return CapturedDecision(
        id=job.key, request_id=job.request_id, captured_at=job.captured_at, mode=mode, workspace=job.workspace or "",
        session=job.session or "", route=job.route, adapter=job.adapter, kind=job.kind,
        request_sha256=request_sha256(job.body),
        message_hashes=[message_hash(m) for m in messages],
        roles=[str(m.get("role", "")) if isinstance(m, Mapping) else "" for m in messages],
        tools_offered=sorted(offered or ()), tool_choice=choice_label(job.body.get("tool_choice", "auto")),
        parse_outcome=parsed.outcome.value,
        chosen_tool=call.tool if call else None, chosen_keys=list(call.key_set) if call else [],
        call_id=call_id if isinstance(call_id, str) else None, calls=len(parsed.calls),
        duration_s=round(job.duration_s, 6),
        request={k: job.body[k] for k in ("messages", "tools", "tool_choice") if k in job.body} if full else None,
        chosen_arguments=call.arguments if (full and call) else None)


class Capture:
    """The gateway's capture runtime: a bounded queue and one worker."""

    def __init__(self, settings: CaptureSection, metrics: GatewayMetrics) -> None:
        self.settings = settings
        self.metrics = metrics
        self.store = CaptureStore(settings.db) if settings.mode != "off" else None
        self.queue: asyncio.Queue[CaptureJob] = asyncio.Queue(settings.queue_size)
        self._worker: asyncio.Task[None] | None = None
        self._keeper: asyncio.Task[None] | None = None
        self._store_lock = asyncio.Lock()  # the store's one connection serves one thread at a time

    def wants(self, body: Mapping[str, Any]) -> bool:
        """Whether an answered chat request is worth a job (cheap: no parsing, no hashing)."""
        if self.store is not None:
            return True
        messages = body.get("messages")
        return isinstance(messages, list) and bool(messages) and isinstance(messages[-1], Mapping) \
            and messages[-1].get("role") == "tool"

    def submit(self, job: CaptureJob) -> None:
        """Queue a finished request for capture; never blocks (a full queue is counted and dropped)."""
        try:
            self.queue.put_nowait(job)
        except asyncio.QueueFull:
            self.metrics.capture_errors.labels("queue_full").inc()

    def start(self) -> None:
        self._worker = asyncio.create_task(self._work(), name="capture")
        if self.store is not None:
            self._keeper = asyncio.create_task(self._keep(), name="capture-retention")

    async def stop(self) -> None:
        for task in (self._worker, self._keeper):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self.store is not None:
            self.store.close()

    async def _keep(self) -> None:
        while True:
            try:
                async with self._store_lock:
                    await asyncio.to_thread(self.enforce_retention)
            except Exception:  # retention must never take the gateway down; the next pass tries again
                log.exception("capture retention failed")
                self.metrics.capture_errors.labels("retention").inc()
            await asyncio.sleep(self.settings.retention_interval_s)

    def enforce_retention(self) -> None:
        """Delete what is past `retention_days` or beyond `max_rows`, and update the store's gauges."""
        assert self.store is not None
        pruned = self.store.prune(datetime.now(UTC), self.settings.retention_days, self.settings.max_rows)
        self.metrics.capture_pruned.inc(pruned)
        held = self.store.held()
        self.metrics.capture_rows.set(held.rows)
        self.metrics.capture_bytes.set(held.bytes)

    async def _work(self) -> None:
        while True:
            job = await self.queue.get()
            try:
                async with self._store_lock:
                    await asyncio.to_thread(self.process, job)
            except Exception:  # capture must never take the gateway down
                log.exception("capture of request %s failed", job.request_id)
                self.metrics.capture_errors.labels("process").inc()
            finally:
                self.queue.task_done()

    def captures(self, job: CaptureJob) -> bool:
        """Whether this request is stored: a store is open, its workspace is allowed and its session sampled."""
        allowed = not self.settings.workspaces or (job.workspace or "") in self.settings.workspaces
        return self.store is not None and allowed and sampled(job.session or job.key, self.settings.sample_rate)

    def process(self, job: CaptureJob) -> None:
        """Count the guard's anomalies in the request's tool results; if captured, label the session's earlier
        decisions with those outcomes and store this one."""
        messages = job.body.get("messages")
        results = tool_results(messages, self.settings) if isinstance(messages, list) else []
        workspace = self.metrics.bounded("workspace", job.workspace or "")
        for result in results:
            if result.kind != "ok":
                self.metrics.guard_anomalies.labels(workspace, self.metrics.bounded("tool", result.tool),
                                                    result.kind).inc()
        if not self.captures(job):
            return
        assert self.store is not None
        if results and job.session:
            self.store.label(workspace, job.session, results)
        self.store.insert(describe(job, self.settings.mode))
        self.metrics.capture_descriptors.labels(self.settings.mode, workspace).inc()

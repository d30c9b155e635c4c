"""Capture of live decisions (001 S13) and the tool-outcome guard (S11), off the production path.

A request that has been answered (chat, Messages or Responses API: each reads its turn through
its API module, serve/gateway/apis/) becomes a `CaptureJob`, queued on the event loop before
the client can see the end of the answer (JSON: as soon as the engine's answer is read; streams:
at the API's last event, and never for a stream the engine failed: serve/gateway/proxy.py's `Relay`).
A client's next turn comes after it has seen the answer, so a session's turns are queued in order.
`Capture.submit` never waits: a full queue drops the job and counts it. One worker thread, started with
the gateway and fed through a thread-safe bounded queue (the event loop puts, the thread takes: no hand-off
per job through the loop's thread pool, no wake-up of the loop when a job is done), does the rest, one job at
a time in queue order, and any error there is logged and counted, never raised into a request:

* **guard**: the tool results at the end of the request (the results of the previous turn's
  calls) are classified (core/guard.py) and anomalies counted per workspace, tool and kind.
  This runs for every request that carries tool results, whatever the capture mode; a result the
  runtime itself marked failed (Anthropic's `is_error`) is `failed`, or `blocked` when its text says so
  (such results are text, not the JSON envelopes the guard otherwise expects).
* **capture** (mode `descriptor` or `full`, workspace in the allowlist when there is one,
  session sampled at `sample_rate`, decided by a hash of the session id so a sampled session
  is captured whole): the guard's labels are attached to the captured decisions of the same
  session whose call produced them (matched by call id, else the session's latest unlabelled
  decision that called that tool), and the new decision is stored. A descriptor holds no
  message text: ids, hashes (over the messages as sent in that API's shape), roles, tool names
  offered, tool choice, the chosen call's tool and key set, route, adapter version, timings, and
  the API it came through (`api`). `full` also stores the request and the chosen
  call's arguments; it is only allowed with an allowlist (serve/gateway/config.py refuses otherwise).

The store is its own SQLite file (WAL), so captures survive restarts; `read_decisions` is how
the suite builder (replay/corpus/capture_suite.py) reads it. It is bounded: at start-up and every
`retention_interval_s`, the worker deletes the decisions older than `retention_days` and the
oldest beyond `max_rows` (whole rows, so `full` text goes with them), between two jobs in its own
thread; `worker_capture_rows` and `worker_capture_bytes` say what it holds. A clean stop (SIGTERM
included) processes what is still queued before the store closes.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import queue
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from core.canonical import message_digest, request_digest
from core.capture_store import CANONICAL, CapturedDecision, CaptureStore, ToolResult
from core.guard import GuardKind, classify
from core.scoring import chosen_call
from core.wire import WIRES, DecisionApi
from serve.gateway.apis import APIS
from serve.gateway.apis.base import Answer, Api, ApiName, Conversation
from serve.gateway.config import CaptureSection

if TYPE_CHECKING:  # the store and its reader stay importable without the gateway's web stack
    from serve.gateway.metrics import GatewayMetrics

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class CaptureJob:
    """One answered request, as the capture worker gets it."""

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
    api: ApiName = "chat"
    forced: bool = False  # a forced tool route set the request's tool choice


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def sampled(key: str, rate: float) -> bool:
    """Deterministic per key, so every request of a sampled session is captured."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) < rate * 2**32


def tool_results(conversation: Conversation, settings: CaptureSection) -> list[ToolResult]:
    """The guard's labels for the tool results a request carries (the previous turn's calls)."""
    return [ToolResult(reply.call_id, reply.tool, classify(reply.content, settings.guard, reply.tool,
                                                           is_error=reply.is_error))
            for reply in conversation.replies]


def decision_api(name: ApiName) -> DecisionApi:
    """The API of a captured job: only the decision APIs capture (completions and count_tokens do not)."""
    assert name in WIRES, name
    return WIRES[name].api


def thread_of(message_hashes: list[str]) -> str | None:
    """The conversation a turn belongs to, told apart within its session by its first message's hash (a subagent's
    loop starts with its own prompt; the main loop keeps its first message until a compaction)."""
    return message_hashes[0][:16] if message_hashes else None


def describe(job: CaptureJob, mode: str, conversation: Conversation | None = None) -> CapturedDecision:
    """The stored record of a decision: text only in `full` mode; hashes over the canonical form.
    `conversation`: the job's body already read through its API (the worker has it; else it is read here)."""
    api = decision_api(job.api)
    conversation = conversation if conversation is not None else APIS[job.api].conversation(job.body)
    message_hashes = [message_digest(api, m) for m in conversation.messages]
    parsed = conversation.parse(job.answer)
    call = chosen_call(parsed)
    raw_calls = job.answer.get("tool_calls") if isinstance(job.answer, dict) else None
    call_id = raw_calls[0].get("id") if raw_calls and isinstance(raw_calls[0], dict) else None
    full = mode == "full"
    return CapturedDecision(
        id=job.key, request_id=job.request_id, captured_at=job.captured_at, mode=mode, workspace=job.workspace or "",
        session=job.session or "", route=job.route, adapter=job.adapter, kind=job.kind,
        request_sha256=request_digest(api, job.body),
        message_hashes=message_hashes, roles=conversation.roles,
        tools_offered=sorted(conversation.tool_names() or ()), tool_choice=conversation.tool_choice,
        parse_outcome=parsed.outcome.value,
        chosen_tool=call.tool if call else None, chosen_keys=list(call.key_set) if call else [],
        call_id=call_id if isinstance(call_id, str) else None, calls=len(parsed.calls),
        duration_s=round(job.duration_s, 6),
        request=conversation.request if full else None,
        chosen_arguments=call.arguments if (full and call) else None, api=job.api, hashing=CANONICAL,
        forced=job.forced, thread=thread_of(message_hashes))


class Capture:
    """The gateway's capture runtime: a bounded queue and one worker thread."""

    def __init__(self, settings: CaptureSection, metrics: GatewayMetrics) -> None:
        self.settings = settings
        self.metrics = metrics
        self.store = CaptureStore(settings.db) if settings.mode != "off" else None
        self.queue: queue.Queue[CaptureJob | None] = queue.Queue(settings.queue_size)  # None: the stop
        self._worker: threading.Thread | None = None

    def wants(self, api: Api, body: Mapping[str, Any]) -> bool:
        """Whether an answered request is worth a job: it generated, and a store is open or it carries tool
        results for the guard (cheap: no parsing, no hashing)."""
        return api.captures and (self.store is not None or bool(api.conversation(body).replies))

    def submit(self, job: CaptureJob) -> None:
        """Queue a finished request for capture; never blocks (a full queue is counted and dropped)."""
        try:
            self.queue.put_nowait(job)
        except queue.Full:
            self.metrics.capture_errors.labels("queue_full").inc()

    def start(self) -> None:
        self._worker = threading.Thread(target=self._work, name="capture", daemon=True)
        self._worker.start()

    async def stop(self) -> None:
        """Stop the worker once it has processed what is queued (a clean stop, SIGTERM included, loses no job),
        then close the store. The wait is in a thread: the event loop keeps serving meanwhile."""
        if self._worker is None:  # never started: what was queued is still processed
            self.start()
        assert self._worker is not None
        await asyncio.to_thread(self._finish, self._worker)
        if self.store is not None:
            self.store.close()

    def _finish(self, worker: threading.Thread) -> None:
        self.queue.put(None)  # after every job already queued
        worker.join()

    def _work(self) -> None:
        """The worker thread: each job in queue order, retention when it is due (at start-up, then every
        `retention_interval_s`), until the stop."""
        due = time.monotonic()
        while True:
            if self.store is not None and time.monotonic() >= due:
                self._keep()
                due = time.monotonic() + self.settings.retention_interval_s
            try:
                job = self.queue.get(timeout=max(0.0, due - time.monotonic()) if self.store is not None else None)
            except queue.Empty:
                continue
            if job is None:
                self.queue.task_done()
                return
            try:
                self.process(job)
            except Exception:  # capture must never take the gateway down
                log.exception("capture of request %s failed", job.request_id)
                self.metrics.capture_errors.labels("process").inc()
            finally:
                self.queue.task_done()

    def _keep(self) -> None:
        try:
            self.enforce_retention()
        except Exception:  # retention must never take the gateway down; the next pass tries again
            log.exception("capture retention failed")
            self.metrics.capture_errors.labels("retention").inc()

    def enforce_retention(self) -> None:
        """Delete what is past `retention_days` or beyond `max_rows`, and update the store's gauges."""
        assert self.store is not None
        pruned = self.store.prune(datetime.now(UTC), self.settings.retention_days, self.settings.max_rows)
        self.metrics.capture_pruned.inc(pruned)
        held = self.store.held()
        self.metrics.capture_rows.set(held.rows)
        self.metrics.capture_bytes.set(held.bytes)

    def captures(self, job: CaptureJob) -> bool:
        """Whether this request is stored: a store is open, its workspace is allowed and its session sampled."""
        allowed = not self.settings.workspaces or (job.workspace or "") in self.settings.workspaces
        return self.store is not None and allowed and sampled(job.session or job.key, self.settings.sample_rate)

    def process(self, job: CaptureJob) -> None:
        """Count the guard's anomalies in the request's tool results; if captured, label the session's earlier
        decisions with those outcomes and store this one."""
        conversation = APIS[job.api].conversation(job.body)
        results = tool_results(conversation, self.settings)
        label = self.metrics.bounded("workspace", job.workspace or "")  # the metrics' name for it, never a lookup key
        for result in results:
            if result.kind != GuardKind.OK:
                self.metrics.guard_anomalies.labels(label, self.metrics.bounded("tool", result.tool), result.kind).inc()
        if not self.captures(job):
            return
        assert self.store is not None
        self.store.record(describe(job, self.settings.mode, conversation), results)
        self.metrics.capture_descriptors.labels(self.settings.mode, label).inc()

"""The shared forwarder: one request of any API (serve/gateway/apis/) to an engine replica, JSON
answers and SSE streams, with routing, shadow, capture, the guard and the request log applied the
same way whatever the API. The API module says the path, the error shape and how a turn and its
answer read; nothing here branches on which API it is.

Failures become errors in the API's own shape with a stable code (also the `reason` of the error
metrics):

* no healthy replica, or every replica refuses the connection → 503 `engine_unavailable`
  with `Retry-After` (529 `overloaded_error` on the Messages API; the engine is down or
  restarting; the health loop brings it back);
* a body that cannot be read (not JSON, nested too deeply, not an object) → 400 `invalid_json`;
  a `stream` that is not a boolean (or null) → 400 `invalid_stream`;
  an unexpected failure in the gateway → 500 `internal_error`; both counted like any request;
* no answer within `gateway.request_timeout_s` (or a stream silent for
  `gateway.stream_idle_timeout_s`) → 504 `upstream_timeout`;
* the engine answers 5xx → 502 `upstream_error`; a 200 that is not an OpenAI answer (or, to a
  stream request, not `text/event-stream`) → 502 `bad_upstream_response`; the engine's 4xx
  (bad parameters) are passed on with its message;
* an adapter the engine does not know although the registry loaded it → 503 and an
  immediate re-apply of the registry to that engine.

A failure after a stream has started cannot change the status any more: it ends the stream
with the API's error event (`data: {"error": ...}` as vLLM ends a chat stream, `event: error`
on the Messages and Responses APIs), and the request is logged and counted with the status it
would have had (`Relay`): the stream breaks off → 502 `stream_interrupted`; it ends without its
API's last event → 502 `stream_incomplete`; the engine's own error event (vLLM ends a failed
generation with one, then `[DONE]`) → 502 `upstream_error`; an event that cannot be read → 502
`bad_upstream_response`; silence → 504. When the client goes away mid-stream the upstream
connection is closed, which makes vLLM abort the generation.

`model` may also be one of `gateway.model_aliases` (the names a runtime sends for its background
calls), which resolves as the route it names. The session is `X-Session-Id`, else the header or
body field the API's runtime sends it in. On the Messages API a `max_tokens` larger than the
engine can give is clamped (see `_clamp`), and the response says so in `X-Worker-Max-Tokens`.

Who the caller is and whether it may run now (its client key, the workspace that key is for, its
fair share and an engine slot) is decided here too, once for every API (serve/gateway/tenancy.py):
refusals are errors in the API's shape like any other, and the share and slot are given back in
`finish`, so a relayed stream holds them until it closes. The workspace also decides the request's
`cache_salt`, which keeps its prefix-cache hits its own (serve/gateway/prefixcache.py): set on the
body as it leaves for the engine, so capture, hashes and the shadow's request hash see the body as sent.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import aiohttp
import msgspec
from fastapi import Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.types import Receive, Scope, Send

from core.capture_store import request_sha256
from core.jsonfile import JsonFileError, loads_bounded, parse_problem
from core.names import BadNameError, check_name, is_name
from serve.gateway.apis import APIS
from serve.gateway.apis.base import JSON_HEADERS, Accumulator, Answer, Api, BadAnswerError, SseEvent, SseEvents
from serve.gateway.capture import CaptureJob, now_iso
from serve.gateway.edge import (
    SESSION_HEADER,
    WORKSPACE_HEADER,
    client_request_id,
    header_name,
    parse_json,
    unless_client_leaves,
)
from serve.gateway.errors import GatewayError, bounded_message, unavailable
from serve.gateway.fairshare import used_tokens
from serve.gateway.registry import RequestRow
from serve.gateway.routing import Resolution
from serve.gateway.shadow import ShadowJob
from serve.gateway.tenancy import Admission
from serve.gateway.upstreams import REFUSED, Upstream

if TYPE_CHECKING:
    from serve.gateway.service import Gateway

log = logging.getLogger(__name__)
_BOOT = uuid.uuid4().hex[:12]  # request ids: unique per process start, then a counter (no syscall each)
_SEQUENCE = itertools.count(1)
_ENCODE = msgspec.json.Encoder().encode
PASSED_ON = ("anthropic-version", "anthropic-beta")
"""Request headers the engine reads (vLLM's Messages API), passed on as sent."""
PROMPT_SLACK = 1024
"""Tokens the chat template may add beyond the body's own bytes: below `max_model_len` minus this and
the body's size, `max_tokens` certainly fits and no count is asked for."""


@dataclass
class ProxiedCall:
    """One request on its way through the gateway."""

    request_id: str  # X-Request-Id: the client's when it sent one, so not unique
    api: Api
    started: float
    key: str  # the gateway's own id, unique per request: what stored records are keyed by
    requested: str | None = None
    resolution: Resolution | None = None
    upstream: str | None = None
    workspace: str | None = None
    session: str | None = None
    passed_on: dict[str, str] | None = None  # PASSED_ON headers the client sent
    clamped: str | None = None  # what `_clamp` did to the output limit
    forced: bool = False  # a forced tool route made the request call a tool
    admission: Admission | None = None  # its fair share and engine slot, given back in `finish`
    used_tokens: int | None = None  # from the answer's usage, when known
    cache_salt: str | None = None  # what the engine gets as `cache_salt` in `workspace` scope (prefixcache.py)
    nonfinite: bool = False  # the body may hold NaN or Infinity (see `encode_body`)

    def headers(self) -> dict[str, str]:
        headers = {"X-Request-Id": self.request_id}
        if self.clamped is not None:
            headers["X-Worker-Max-Tokens"] = self.clamped
        if self.forced:
            headers["X-Worker-Tool-Choice"] = "forced"
        if self.resolution is not None:
            headers |= {"X-Worker-Route": self.resolution.route, "X-Worker-Adapter": self.resolution.target,
                        "X-Worker-Kind": self.resolution.kind}
        if self.upstream is not None:
            headers["X-Worker-Upstream"] = self.upstream
        return headers


def finish(gw: Gateway, call: ProxiedCall, status: int, reason: str | None = None) -> None:
    """Give back the request's share and engine slot, count it and log its routing decision (the canary
    split per request). Runs once per request, for a stream when its relay closes."""
    if call.admission is not None:
        call.admission.release(call.used_tokens)
    res = call.resolution
    route, adapter, kind = (res.route, res.target, res.kind) if res else ("", "", "")
    elapsed = time.perf_counter() - call.started
    gw.metrics.observe(route, adapter, kind, status, elapsed, reason, api=call.api.name)
    gw.registry.record_request(RequestRow(
        request_id=call.request_id, endpoint=call.api.name, requested=call.requested, route=route or None,
        adapter=adapter or None, kind=kind or None, sticky_key=res.cohort_key if res else None,
        upstream=call.upstream, status=status, reason=reason, duration_s=elapsed))


def encode_body(body: dict[str, Any], nonfinite: bool) -> bytes:
    """The body as the engine gets it, by msgspec (the parser's library; several times `json.dumps`). Only a body
    that may hold NaN or Infinity (which `json` reads and msgspec would write as null) goes through `json`, so
    the engine is sent what it always was."""
    return json.dumps(body).encode() if nonfinite else _ENCODE(body)


def parse_body(raw: bytes) -> dict[str, Any]:
    """The request body as a JSON object of valid Unicode text, else a 400."""
    body = parse_json(raw)
    if not isinstance(body, dict):
        raise GatewayError(400, "the request body must be a JSON object", "invalid_json")
    return body


def session_of(request: Request, api: Api, body: dict[str, Any]) -> str | None:
    """`X-Session-Id` (a name, else the request is refused), else what the API's runtime sends, kept only
    when it is a name (it is the runtime's own field, so an odd one is ignored, never refused)."""
    explicit = header_name(request, SESSION_HEADER)
    if explicit is not None:
        return explicit
    for header in api.session_headers:
        if is_name(value := request.headers.get(header)):
            return value
    from_body = api.session(body)
    return from_body if is_name(from_body) else None


async def handle(gw: Gateway, request: Request, api: Api) -> Response:
    """One request of `api` end to end: resolve, forward (relaying streams), shadow, capture, count and log."""
    key = f"{_BOOT}-{next(_SEQUENCE)}"
    call = ProxiedCall(key, api, time.perf_counter(), key)
    try:
        call.request_id = client_request_id(request) or key
        caller = gw.tenancy.caller(request.headers, request.query_params.multi_items(),
                                   header_name(request, WORKSPACE_HEADER))
        call.workspace = caller.workspace  # the key's: what capture, canary, trials, shadow and metrics see
        raw = await request.body()
        body = parse_body(raw)
        call.nonfinite = b"NaN" in raw or b"Infinity" in raw
        call.session = session_of(request, api, body)
        call.passed_on = {h: v for h in PASSED_ON if (v := request.headers.get(h)) is not None}
        model = body.get("model", gw.config.gateway.default_route)
        try:
            call.requested = check_name(model, "'model' (a route, an adapter version or the base model)")
        except BadNameError as exc:
            raise GatewayError(400, str(exc), "invalid_model") from exc
        call.resolution = gw.resolve(gw.config.gateway.alias(model), call.workspace, call.session)
        body["model"] = call.resolution.target
        api.check(body)
        if api.generates:  # a token count fills no cache
            call.cache_salt = gw.prefix_cache.salt(call.workspace, body)
        if call.resolution.route in gw.config.gateway.forced_tool_routes and api.force_tool(body):
            call.forced = True
        stream = body.get("stream") if api.generates else None
        if stream is not None and not isinstance(stream, bool):
            raise GatewayError(400, f"'stream' must be true or false, not {json.dumps(stream)[:40]}", "invalid_stream")
        if api.output_limit(body) is not None:
            await _clamp(gw, call, body, len(raw))
        if api.generates:  # a token count takes no engine slot and no share
            admit = gw.tenancy.admit(caller, body, len(raw))
            call.admission = await (admit if gw.tenancy.slots is None else unless_client_leaves(request, admit))
        if stream:
            return await _stream(gw, call, body)
        return await _json(gw, call, body, request)
    except GatewayError as exc:
        return _failed(gw, call, exc)
    except Exception:
        # A bug, not the client's fault; still answered in the API's shape and counted.
        log.exception("request %s failed", call.request_id)
        return _failed(gw, call, GatewayError(500, "internal gateway error (logged)", "internal_error"))


def error_response(api: Api, exc: GatewayError) -> Response:
    """A gateway error in `api`'s own shape, with the status and headers its SDK acts on."""
    status = api.error_status(exc.status_code, exc.code)
    return JSONResponse(api.error_body(exc.message, exc.code, status), status,
                        headers={**(exc.headers or {}), **api.error_headers(status)})


def _failed(gw: Gateway, call: ProxiedCall, exc: GatewayError) -> Response:
    response = error_response(call.api, exc)
    finish(gw, call, response.status_code, exc.code)
    response.headers.update(call.headers())
    return response


async def _clamp(gw: Gateway, call: ProxiedCall, body: dict[str, Any], size: int) -> None:
    """Fit the output limit into what the engine can give (runtimes default to more than a small engine's
    context: Claude Code asks for 32000 tokens). Only when the limit could not fit (above the context minus
    the body's size and PROMPT_SLACK) is the engine asked for the prompt's exact token count; the limit is
    then lowered to the room left, and a prompt that leaves no room is a 400 that says so."""
    field = call.api.output_limit(body)
    limit = body.get(field) if field else None
    windows = [u.max_model_len for u in gw.pool.healthy() if u.max_model_len]
    if field is None or not isinstance(limit, int) or isinstance(limit, bool) or not windows:
        return  # the engine judges the value itself
    window = min(windows)
    if limit + size + PROMPT_SLACK <= window:
        return
    prompt = await _count_tokens(gw, call, {k: v for k, v in body.items() if k not in ("stream", field)})
    room = window - prompt
    if room < 1:
        raise GatewayError(400, f"the prompt is {prompt} tokens and the engine's context is {window}: no room for "
                                "an answer", "context_too_long")
    if limit > room:
        body[field] = room
        call.clamped = f"{limit}->{room} (context {window}, prompt {prompt})"


async def _count_tokens(gw: Gateway, call: ProxiedCall, body: dict[str, Any]) -> int:
    """The prompt's tokens as the engine renders it (its own `count_tokens`)."""
    probe = ProxiedCall(call.key, APIS["count_tokens"], time.perf_counter(), call.key, resolution=call.resolution,
                        passed_on=call.passed_on)
    upstream, resp = await _open(gw, probe, body, stream=False)
    raw = await _read(gw, upstream, resp)
    if resp.status != 200:
        raise _upstream_failure(gw, probe, upstream, resp.status, raw)
    payload, _ = _parse_answer(probe, upstream, raw)
    tokens: int = payload["input_tokens"]
    return tokens


def _timeout(gw: Gateway, stream: bool) -> aiohttp.ClientTimeout:
    """The engine request's timeouts from the gateway's settings (ClientTimeout is frozen: built once per
    settings, not per request)."""
    settings = gw.config.gateway
    return _timeouts(settings.connect_timeout_s, settings.request_timeout_s, settings.stream_idle_timeout_s)[stream]


@functools.lru_cache(maxsize=8)
def _timeouts(connect: float, total: float, idle: float) -> tuple[aiohttp.ClientTimeout, aiohttp.ClientTimeout]:
    return (aiohttp.ClientTimeout(total=total, connect=connect),
            aiohttp.ClientTimeout(total=None, connect=connect, sock_read=idle))


def _timeout_error(gw: Gateway, upstream: Upstream, stream: bool) -> GatewayError:
    """The 504 naming the setting that ran out: streams wait `stream_idle_timeout_s` per read."""
    if stream:
        idle = gw.config.gateway.stream_idle_timeout_s
        return GatewayError(504, f"upstream {upstream.name} sent nothing for {idle:g} s "
                                 "(gateway.stream_idle_timeout_s)", "upstream_timeout")
    limit = gw.config.gateway.request_timeout_s
    return GatewayError(504, f"upstream {upstream.name} did not answer within {limit:g} s "
                             "(gateway.request_timeout_s)", "upstream_timeout")


async def _open(gw: Gateway, call: ProxiedCall, body: dict[str, Any],
                stream: bool) -> tuple[Upstream, aiohttp.ClientResponse]:
    """POST to the first replica that accepts the connection (a refused one is marked down)."""
    assert call.resolution is not None
    payload = encode_body(gw.prefix_cache.forwarded(body, call.cache_salt), call.nonfinite)
    headers = {**JSON_HEADERS, **(call.passed_on or {})}
    refused = []
    for upstream in gw.pool.order(call.resolution.replica_key):
        upstream.busy += 1
        resp = None
        try:
            resp = await gw.pool.session.post(upstream.url + call.api.path, data=payload,
                                              headers=headers, timeout=_timeout(gw, stream))
        except REFUSED as exc:
            refused.append(f"{upstream.name}: {exc}")
            gw.pool.mark(upstream, False, str(exc))
            gw.metrics.upstream_healthy.labels(upstream.name).set(0.0)
            continue
        except TimeoutError as exc:
            raise _timeout_error(gw, upstream, stream) from exc
        except aiohttp.ClientError as exc:
            raise GatewayError(502, f"upstream {upstream.name} failed: {exc}", "upstream_disconnected") from exc
        finally:
            if resp is None:
                upstream.busy -= 1
        call.upstream = upstream.name
        return upstream, resp
    why = "; ".join(refused) or ", ".join(f"{u.name}: {u.last_error}" for u in gw.pool.upstreams)
    raise unavailable(f"no engine is available (starting, restarting or down: {why}); "
                      f"retry in {gw.retry_after_s} s", gw.retry_after_s)


async def _read(gw: Gateway, upstream: Upstream, resp: aiohttp.ClientResponse, stream: bool = False) -> bytes:
    complete = False
    try:
        raw = await resp.read()
        complete = True
    except TimeoutError as exc:
        raise _timeout_error(gw, upstream, stream) from exc
    except aiohttp.ClientError as exc:
        raise GatewayError(502, f"upstream {upstream.name} broke off its answer: {exc}",
                           "upstream_disconnected") from exc
    finally:
        upstream.busy -= 1
        if complete:
            resp.release()
        else:
            resp.close()  # dropping the connection makes vLLM abort the generation
    return raw


def _engine_message(raw: bytes) -> str:
    """The engine's error message, bounded (it is passed on to the client and stored with a shadow result)."""
    body, _ = parse_problem(raw)
    if isinstance(body, dict):
        error = body.get("error")
        message = error.get("message") if isinstance(error, dict) else body.get("message")
        if message is not None:
            return bounded_message(str(message))
    return bounded_message(raw.decode(errors="replace").strip() or "(empty body)")


def _upstream_failure(gw: Gateway, call: ProxiedCall, upstream: Upstream, status: int, raw: bytes) -> GatewayError:
    assert call.resolution is not None
    message = _engine_message(raw)
    if status >= 500:
        return GatewayError(502, f"upstream {upstream.name} failed with HTTP {status}: {message}", "upstream_error")
    if status == 404 and call.resolution.target != gw.registry.state.base:
        gw.request_check(upstream)
        return unavailable(f"upstream {upstream.name} does not serve {call.resolution.target!r} yet ({message}); "
                           "the registry is being re-applied to it", gw.retry_after_s)
    return GatewayError(status, message, f"upstream_{status}")


def _parse_answer(call: ProxiedCall, upstream: Upstream, raw: bytes) -> tuple[Any, Answer]:
    try:
        return (payload := loads_bounded(raw, "the answer")), call.api.answer(payload)
    except (JsonFileError, BadAnswerError) as exc:
        raise GatewayError(502, f"upstream {upstream.name} sent a malformed answer: {exc!s:.300}",
                           "bad_upstream_response") from exc


async def _json(gw: Gateway, call: ProxiedCall, body: dict[str, Any], request: Request) -> Response:
    assert call.resolution is not None
    candidate = gw.shadow_for(call.resolution) if call.api.generates else None
    upstream, status, raw = await unless_client_leaves(request, _exchange(gw, call, body))
    if status != 200:
        raise _upstream_failure(gw, call, upstream, status, raw)
    payload, answer = _parse_answer(call, upstream, raw)
    call.used_tokens = used_tokens(payload)
    finish(gw, call, 200)
    if candidate is not None:
        _submit_shadow(gw, call, body, candidate, answer)
    if call.api.generates and gw.capture.wants(call.api, body):
        _submit_capture(gw, call, body, answer)  # queued before the client can see the answer
    return Response(raw, 200, media_type="application/json", headers=call.headers())


async def _exchange(gw: Gateway, call: ProxiedCall, body: dict[str, Any]) -> tuple[Upstream, int, bytes]:
    upstream, resp = await _open(gw, call, body, stream=False)
    return upstream, resp.status, await _read(gw, upstream, resp)


async def _stream(gw: Gateway, call: ProxiedCall, body: dict[str, Any]) -> Response:
    assert call.resolution is not None
    candidate = gw.shadow_for(call.resolution)
    upstream, resp = await _open(gw, call, body, stream=True)
    if resp.status != 200:
        try:
            raw = await _read(gw, upstream, resp, stream=True)
        except GatewayError:
            raw = b""
        raise _upstream_failure(gw, call, upstream, resp.status, raw)
    content_type = resp.headers.get("Content-Type", "")
    if not call.api.stream_ok(content_type):
        await _read(gw, upstream, resp, stream=True)
        raise GatewayError(502, f"upstream {upstream.name} answered a stream request with "
                                f"{content_type or 'no Content-Type'}, not an SSE stream", "bad_upstream_response")
    relay = Relay(gw, call, body, upstream, resp, candidate)
    return RelayResponse(relay, media_type=content_type, headers=call.headers())


class Relay:
    """One upstream SSE stream relayed to one client, event by event; `close` always runs exactly once.

    Every event is read as it passes (serve/gateway/apis/base.py's `SseEvents`). At an event that says the
    engine failed (vLLM's `data: {"error": ...}` before its `[DONE]`, an `event: error`, `response.failed`)
    or one that cannot be read, the relay stops: the client gets the API's error event instead of it and of
    the rest of the engine's stream, and the request is a 502 (`upstream_error`, `bad_upstream_response`)
    in the request log, the error metrics and a trial's server errors, with nothing captured or shadowed —
    an engine failure is never recorded as the model's answer."""

    def __init__(self, gw: Gateway, call: ProxiedCall, body: dict[str, Any], upstream: Upstream,
                 resp: aiohttp.ClientResponse, candidate: str | None) -> None:
        self.gw, self.call, self.body, self.upstream, self.resp = gw, call, body, upstream, resp
        self.candidate = candidate
        self.captured = gw.capture.wants(call.api, body)
        self.accumulator: Accumulator | None = \
            call.api.accumulator() if candidate is not None or self.captured else None
        self.whole = False  # the API's last event was seen
        self.status = 499  # until the stream ends another way
        self.reason: str | None = "client_disconnected"
        self.closed = False

    def _capture(self) -> None:
        """Queue the capture once the answer is whole: at the API's last event, before that event is
        relayed (a client may send its next turn as soon as it reads it)."""
        if self.captured and self.accumulator is not None:
            self.captured = False
            _submit_capture(self.gw, self.call, self.body, self.accumulator.answer())

    def _failure(self, event: SseEvent) -> tuple[str, str] | None:
        """The reason and message when `event` ends the stream as an engine failure."""
        if event.problem is not None:
            return "bad_upstream_response", (f"upstream {self.upstream.name} sent a stream event that cannot be "
                                             f"read ({event.problem}), so the answer is not whole")
        message = self.call.api.stream_failure(event)
        if message is not None:
            return "upstream_error", f"upstream {self.upstream.name} failed mid-stream: {message}"
        return None

    def _take(self, events: list[SseEvent]) -> tuple[bytes, bool]:
        """What to relay of these events, and whether the stream ends here (an engine failure)."""
        relayed = []
        for event in events:
            failure = self._failure(event)
            if failure is not None:
                self.status, self.reason = 502, failure[0]
                relayed.append(self.call.api.sse_error(failure[1], self.reason, self.status))
                return b"".join(relayed), True
            if self.accumulator is not None:
                self.accumulator.event(event.name, event.data)
            if not self.whole and self.call.api.stream_end(event):
                self.whole = True
                self._capture()
            relayed.append(event.raw)
        return b"".join(relayed), False

    async def _batches(self) -> AsyncGenerator[list[SseEvent], None]:
        """The engine's stream as the events each chunk completes (one write to the client per chunk)."""
        events = SseEvents()
        async for chunk in self.resp.content.iter_any():
            yield events.feed(chunk)
        yield events.flush()

    async def chunks(self) -> AsyncIterator[bytes]:
        """The relayed stream; the relay closes (the request is counted and logged) as the last chunk has been
        handed over, before the response's end is written, so a client that has read the whole stream finds its
        request already in the log."""
        try:
            async with aclosing(self._relayed()) as relayed:
                async for chunk in relayed:
                    yield chunk
        finally:
            self.close()

    async def _relayed(self) -> AsyncGenerator[bytes, None]:
        try:
            async with aclosing(self._batches()) as batches:
                async for batch in batches:
                    relayed, failed = self._take(batch)
                    if relayed:
                        yield relayed
                    if failed:
                        return
            if not self.whole:
                self.status, self.reason = 502, "stream_incomplete"
                yield self.call.api.sse_error(f"upstream {self.upstream.name}: the stream ended without its last "
                                              "event, so the answer is not whole", self.reason, self.status)
                return
            self.status, self.reason = 200, None
        except (TimeoutError, aiohttp.ClientError) as exc:
            timed_out = isinstance(exc, TimeoutError)
            self.status, self.reason = (504, "upstream_timeout") if timed_out else (502, "stream_interrupted")
            message = _timeout_error(self.gw, self.upstream, stream=True).message if timed_out else \
                f"upstream {self.upstream.name}: the stream broke off ({type(exc).__name__}: {exc})"
            yield self.call.api.sse_error(message, self.reason, self.status)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.status == 200:
            self.resp.release()
        else:
            self.resp.close()  # dropping the connection makes vLLM abort the generation
        self.upstream.busy -= 1
        finish(self.gw, self.call, self.status, self.reason)
        if self.status == 200 and self.accumulator is not None and self.candidate is not None:
            _submit_shadow(self.gw, self.call, self.body, self.candidate, self.accumulator.answer())


class RelayResponse(StreamingResponse):
    """Streams a relay and closes it (and with it the engine request) however the stream ends,
    also when the client left before or during the stream."""

    def __init__(self, relay: Relay, media_type: str, headers: dict[str, str]) -> None:
        super().__init__(relay.chunks(), media_type=media_type, headers=headers)
        self.relay = relay

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.body_iterator.aclose()  # type: ignore[attr-defined]
            self.relay.close()


# --- capture: queued on the event loop in the order the answers are seen; serve/gateway/capture.py ---
# --- does the rest off-path, one job at a time --------------------------------------------------

def _submit_capture(gw: Gateway, call: ProxiedCall, body: dict[str, Any], answer: Answer) -> None:
    res = call.resolution
    assert res is not None
    gw.capture.submit(CaptureJob(
        key=call.key, request_id=call.request_id, workspace=call.workspace, session=call.session, route=res.route,
        adapter=res.target, kind=res.kind, body=body, answer=answer,
        duration_s=time.perf_counter() - call.started, captured_at=now_iso(), api=call.api.name, forced=call.forced))


def _submit_shadow(gw: Gateway, call: ProxiedCall, body: dict[str, Any], candidate: str, answer: Answer) -> None:
    res = call.resolution
    assert res is not None
    gw.shadow.submit(ShadowJob(
        request_id=call.key, route=res.route, production=res.target, candidate=candidate,
        api=call.api.name, body=call.api.shadow_body(body, candidate), production_answer=answer,
        replica_key=res.replica_key, request_sha256=request_sha256(body), passed_on=call.passed_on or {},
        cache_salt=call.cache_salt))


async def send_shadow(gw: Gateway, job: ShadowJob) -> Any:
    """The candidate's answer to a shadow job (GatewayError on any failure, like production)."""
    call = ProxiedCall(job.request_id, APIS[job.api], time.perf_counter(), job.request_id, job.candidate,
                       Resolution(job.candidate, job.route, job.candidate, "shadow", job.replica_key),
                       passed_on=dict(job.passed_on), cache_salt=job.cache_salt)
    upstream, resp = await _open(gw, call, job.body, stream=False)
    raw = await _read(gw, upstream, resp)
    if resp.status != 200:
        raise _upstream_failure(gw, call, upstream, resp.status, raw)
    payload, _ = _parse_answer(call, upstream, raw)
    return payload

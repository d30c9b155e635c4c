"""A named fault injector: a tiny OpenAI/vLLM-like upstream for the faults the real engine cannot
produce on demand (answer HTTP 500, send a malformed body, hang until released, break a
stream off, refuse an adapter load, go down and come back empty).

Used ONLY for those faults; everything else in the gateway tests runs against the real engine.
The behaviour is chosen per served model name with `behaviour[model] = mode`:

* `ok` (default): a well-formed answer; with `tools` it calls the first tool with `{"id": "1"}`; a body
  it cannot read (say, a tool without a function name) gets a 400, as from vLLM;
* `fail`: HTTP 500 with an OpenAI-shaped error;
* `malformed`: HTTP 200 with a body that is not JSON;
* `no_choices`: HTTP 200 with JSON that has no `choices`;
* `deep`: HTTP 200 with JSON nested 100,000 levels deep;
* `hang`: no answer until `release()` (then `ok`); `in_flight` counts the waiting requests and
  `abandoned` those whose client went away first (like vLLM, a handler is cancelled then);
  `hang_after = N` makes every completion after the first N hang so, whatever the model's mode: a
  client killed then is killed mid-run at a known point;
* `break_stream`: a stream that sends one chunk and then drops the connection;
* `endless_stream`: a stream that sends a chunk every 20 ms until the client goes away
  (`stream_disconnects` counts how many streams saw their client go);
* `json_for_stream`: a plain JSON answer (`application/json`) to a stream request;
* `unfinished_stream`: a stream that sends its first event and ends the body properly without the API's
  last event (`[DONE]`, `message_stop`, `response.completed`);
* `error_event`: a stream that fails as vLLM's does: its first event, then the API's error event
  (`data: {"error": {"message", "type", "param", "code"}}` and then `[DONE]`, as vLLM's chat and
  completions serving ends a failed generation; on the Messages API `event: error` and no `message_stop`,
  as vLLM's Anthropic converter; on the Responses API OpenAI's `event: error`);
* `unreadable_event`: a stream whose second event's data is not JSON, then the API's last event.

`/v1/messages` (Anthropic's shape), `/v1/messages/count_tokens` and `/v1/responses` answer `ok`,
`fail` (500 in the API's shape) and, for streams, `unfinished_stream`, `error_event`, `unreadable_event`,
(Messages) `break_stream` (one event, then the connection drops) and (Responses) `failed_response`
(`response.failed` with the response's error).

`redirect_to = URL` makes every request (models and completions) answer `307` to `URL` + the
request's path: a hop off the address the client was told to use. `served_by[model] = version`
answers that model's completions with `X-Worker-Adapter: version`, as a gateway does: set it
between calls to make a route resolve to another version under a running replay.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

from aiohttp import web

from tests.support.live import free_port

BASE = "worker-base"
SLOW_HEALTH_S = 5.0  # longer than any test's probe timeout


class FaultUpstream:
    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.behaviour: dict[str, str] = {}
        self.adapters: dict[str, str] = {}  # name -> path, as vLLM lists them
        self.fail_loads: set[str] = set()
        self.load_delay_s = 0.0
        self.slow_health = 0  # the next N /health calls answer only after SLOW_HEALTH_S (a busy engine)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []  # of each Messages / Responses request, as received
        self.loads: list[str] = []
        self.in_flight = 0
        self.abandoned = 0
        self.stream_disconnects = 0
        self.redirect_to: str | None = None
        self.served_by: dict[str, str] = {}
        self.hang_after: int | None = None
        self.completions = 0  # completion requests received (chat and completions)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._release: asyncio.Event | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --- lifecycle (a thread with its own event loop) --------------------------------------

    def start(self) -> FaultUpstream:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._release = asyncio.Event()
            app = web.Application()
            app.router.add_get("/health", self._health)
            app.router.add_get("/v1/models", self._models)
            app.router.add_get("/metrics", self._metrics)
            app.router.add_post("/v1/load_lora_adapter", self._load)
            app.router.add_post("/v1/unload_lora_adapter", self._unload)
            app.router.add_post("/v1/chat/completions", self._complete)
            app.router.add_post("/v1/completions", self._complete)
            app.router.add_post("/v1/messages", self._messages)
            app.router.add_post("/v1/messages/count_tokens", self._count_tokens)
            app.router.add_post("/v1/responses", self._responses)
            self._runner = web.AppRunner(app, shutdown_timeout=0.5, handler_cancellation=True)
            loop.run_until_complete(self._runner.setup())
            loop.run_until_complete(web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True).start())
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fault upstream did not start")
        return self

    def stop(self) -> None:
        """Go down like a crashed engine; a later start() comes back with no adapters loaded."""
        if self._loop is not None and self._thread is not None:
            self.release()
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop = self._thread = None
            self.adapters.clear()

    def release(self) -> None:
        """Let every `hang` request answer."""
        if self._loop is not None and self._release is not None:
            self._loop.call_soon_threadsafe(self._release.set)

    def __enter__(self) -> FaultUpstream:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- handlers --------------------------------------------------------------------------

    async def _health(self, _: web.Request) -> web.Response:
        if self.slow_health > 0:
            self.slow_health -= 1
            await asyncio.sleep(SLOW_HEALTH_S)
        return web.Response(text="")

    def _redirect(self, request: web.Request) -> web.Response | None:
        if self.redirect_to is None:
            return None
        return web.Response(status=307, headers={"Location": self.redirect_to.rstrip("/") + request.path})

    async def _models(self, request: web.Request) -> web.Response:
        if (redirect := self._redirect(request)) is not None:
            return redirect
        data = [{"id": BASE, "object": "model", "root": "/models/base", "parent": None}]
        data += [{"id": name, "object": "model", "root": path, "parent": BASE} for name, path in self.adapters.items()]
        return web.json_response({"object": "list", "data": data})

    async def _metrics(self, _: web.Request) -> web.Response:
        return web.Response(text=(
            'vllm:prefix_cache_queries_total{engine="0",model_name="worker-base"} 100.0\n'
            'vllm:prefix_cache_hits_total{engine="0",model_name="worker-base"} 40.0\n'
            'vllm:request_success_total{engine="0",finished_reason="stop",model_name="worker-base"} 3.0\n'
            'vllm:request_success_total{engine="0",finished_reason="error",model_name="worker-base"} 1.0\n'))

    async def _load(self, request: web.Request) -> web.Response:
        body = await request.json()
        await asyncio.sleep(self.load_delay_s)
        name = body["lora_name"]
        if name in self.fail_loads:
            return web.json_response({"error": {"message": f"cannot load {name}", "type": "InternalServerError",
                                                "code": 500}}, status=500)
        if name in self.adapters:
            return web.json_response({"error": {"message": f"'{name}' has already been loaded", "code": 400}},
                                     status=400)
        self.adapters[name] = body["lora_path"]
        self.loads.append(name)
        return web.Response(text=f"Success: LoRA adapter '{name}' added successfully.")

    async def _unload(self, request: web.Request) -> web.Response:
        name = (await request.json())["lora_name"]
        if self.adapters.pop(name, None) is None:
            return web.json_response({"error": {"message": f"'{name}' cannot be found", "code": 404}}, status=404)
        return web.Response(text="Success")

    async def _complete(self, request: web.Request) -> web.StreamResponse:
        if (redirect := self._redirect(request)) is not None:
            return redirect
        body = await request.json()
        model = body.get("model")
        self.requests.append(body)
        if model != BASE and model not in self.adapters:
            return web.json_response({"error": {"message": f"The model `{model}` does not exist.", "code": 404}},
                                     status=404)
        mode = self.behaviour.get(model, "ok")
        self.completions += 1
        if self.hang_after is not None and self.completions > self.hang_after:
            mode = "hang"
        chat = request.path.endswith("/chat/completions")
        if mode == "fail":
            return web.json_response({"error": {"message": "engine exploded", "type": "InternalServerError",
                                                "code": 500}}, status=500)
        if mode == "malformed":
            return web.Response(text='{"choices": [', content_type="application/json")
        if mode == "deep":
            return web.Response(text="[" * 100_000 + "]" * 100_000, content_type="application/json")
        if mode == "no_choices":
            return web.json_response({"id": "x", "object": "chat.completion"})
        if mode == "hang":
            self.in_flight += 1
            try:
                assert self._release is not None
                await self._release.wait()
            except asyncio.CancelledError:
                self.abandoned += 1
                raise
            finally:
                self.in_flight -= 1
        try:  # like vLLM, a body it cannot read is a 400 (the gateway passes bodies on unchecked)
            answer, _ = _answer(body, chat), _stream_events(body, chat)
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            return web.json_response({"error": {"message": f"cannot read the request: {exc!r}",
                                                "type": "BadRequestError", "code": 400}}, status=400)
        if body.get("stream") and mode != "json_for_stream":
            return await self._stream(request, body, chat, mode)
        headers = {"X-Worker-Adapter": self.served_by[model]} if model in self.served_by else None
        return web.json_response(answer, headers=headers)

    async def _stream(self, request: web.Request, body: dict[str, Any], chat: bool, mode: str) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if mode == "break_stream":
            await response.write(_sse({"choices": [{"index": 0, "delta": {"content": "Hel"}}]}))
            assert request.transport is not None
            request.transport.close()
            return response
        first, *rest = _stream_events(body, chat)
        if mode == "unfinished_stream":
            await response.write(_sse(first))
            await response.write_eof()
            return response
        if mode == "error_event":
            await response.write(_sse(first) + _sse(ENGINE_ERROR) + b"data: [DONE]\n\n")
            await response.write_eof()
            return response
        if mode == "unreadable_event":
            await response.write(_sse(first) + UNDECODABLE + b"".join(map(_sse, rest)) + b"data: [DONE]\n\n")
            await response.write_eof()
            return response
        if mode == "endless_stream":
            try:
                while True:
                    await response.write(_sse({"choices": [{"index": 0, "delta": {"content": "x"}}]}))
                    await asyncio.sleep(0.02)
            except (ConnectionResetError, asyncio.CancelledError):
                self.stream_disconnects += 1
                raise
        for event in _stream_events(body, chat):
            await response.write(_sse(event))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


    async def _other_api(self, request: web.Request) -> tuple[dict[str, Any], str] | web.Response:
        """The body and mode of a Messages or Responses request, or the error answer it gets."""
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        model = body.get("model")
        if model != BASE and model not in self.adapters:
            return web.json_response({"type": "error", "error": {"type": "not_found_error",
                                                                 "message": f"The model `{model}` does not exist."}},
                                     status=404)
        mode = self.behaviour.get(model, "ok")
        if mode == "fail":
            return web.json_response({"type": "error", "error": {"type": "api_error", "message": "engine exploded"}},
                                     status=500)
        return body, mode

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        read = await self._other_api(request)
        if isinstance(read, web.Response):
            return read
        body, mode = read
        try:  # like vLLM, a body it cannot read is a 400 (the gateway passes bodies on unchecked)
            tools = body.get("tools") or []
            content = [{"type": "tool_use", "id": "toolu_1", "name": str(tools[0]["name"]), "input": {"id": "1"}}] \
                if tools else [{"type": "text", "text": "Hello"}]
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            return web.json_response({"type": "error", "error": {"type": "invalid_request_error",
                                                                 "message": f"cannot read the request: {exc!r}"}},
                                     status=400)
        message = {"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"], "content": content,
                   "stop_reason": "tool_use" if tools else "end_turn", "usage": {"input_tokens": 5, "output_tokens": 2}}
        if not body.get("stream"):
            return web.json_response(message)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(_event("message_start", {"type": "message_start", "message": {**message, "content": []}}))
        if mode == "break_stream":
            assert request.transport is not None
            request.transport.close()
            return response
        if mode in ("unfinished_stream", "error_event"):  # vLLM's converter ends at its error event
            if mode == "error_event":
                await response.write(_event("error", {"type": "error", "error": {
                    "type": "internal_error", "message": ENGINE_ERROR["error"]["message"]}}))
            await response.write_eof()
            return response
        if mode == "unreadable_event":
            await response.write(UNDECODABLE)
        for index, block in enumerate(content):
            await response.write(_event("content_block_start", {"type": "content_block_start", "index": index,
                                                                "content_block": block}))
            await response.write(_event("content_block_stop", {"type": "content_block_stop", "index": index}))
        await response.write(_event("message_stop", {"type": "message_stop"}))
        await response.write_eof()
        return response

    async def _count_tokens(self, request: web.Request) -> web.Response:
        read = await self._other_api(request)
        return read if isinstance(read, web.Response) else web.json_response({"input_tokens": 5})

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        read = await self._other_api(request)
        if isinstance(read, web.Response):
            return read
        body, mode = read
        answer = {"id": "resp_1", "object": "response", "model": body["model"], "status": "completed",
                  "output": [{"type": "message", "role": "assistant", "id": "m1",
                              "content": [{"type": "output_text", "text": "Hello"}]}]}
        if not body.get("stream"):
            return web.json_response(answer)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(_event("response.created", {"type": "response.created", "response": answer}))
        message = ENGINE_ERROR["error"]["message"]
        if mode == "error_event":
            await response.write(_event("error", {"type": "error", "code": "server_error", "message": message,
                                                  "param": None, "sequence_number": 1}))
        elif mode == "failed_response":
            await response.write(_event("response.failed", {"type": "response.failed", "response": {
                **answer, "status": "failed", "output": [], "error": {"code": "server_error", "message": message}}}))
        elif mode == "unreadable_event":
            await response.write(UNDECODABLE)
        if mode in ("unfinished_stream", "error_event", "failed_response"):
            await response.write_eof()
            return response
        await response.write(_event("response.completed", {"type": "response.completed", "response": answer}))
        await response.write_eof()
        return response


UNDECODABLE = b"data: {\"type\": \x00 not json\n\n"
ENGINE_ERROR = {"error": {"message": "Internal server error", "type": "InternalServerError", "param": None,
                          "code": 500}}
"""What vLLM sends when a generation fails mid-stream (`GenerationError`, create_streaming_error_response)."""


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def _sse(event: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def _call(body: dict[str, Any]) -> dict[str, Any] | None:
    tools = body.get("tools") or []
    if not tools:
        return None
    return {"id": "call-1", "type": "function",
            "function": {"name": tools[0]["function"]["name"], "arguments": json.dumps({"id": "1"})}}


def _answer(body: dict[str, Any], chat: bool) -> dict[str, Any]:
    created = int(time.time())
    if not chat:
        return {"id": "cmpl-1", "object": "text_completion", "created": created, "model": body["model"],
                "choices": [{"index": 0, "text": "Hello", "finish_reason": "stop"}]}
    call = _call(body)
    message = {"role": "assistant", "content": None if call else "Hello", "tool_calls": [call] if call else []}
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": created, "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}


def _stream_events(body: dict[str, Any], chat: bool) -> list[dict[str, Any]]:
    if not chat:
        return [{"choices": [{"index": 0, "text": part}]} for part in ("Hel", "lo")]
    call = _call(body)
    if call is None:
        return [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": part}}]} for part in ("Hel", "lo")]
    arguments = call["function"]["arguments"]
    return [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [
            {"index": 0, "id": call["id"], "type": "function",
             "function": {"name": call["function"]["name"], "arguments": ""}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": arguments[:4]}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": arguments[4:]}}]}}]},
    ]

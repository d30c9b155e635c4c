"""The benchmarks' planted upstream: a minimal vLLM-like engine that answers at once, so what a gateway in
front of it adds is the gateway's own cost. Loopback only; no model, no state but the adapter list.

It serves what a gateway calls: `/health`, `/v1/models`, `/metrics`, adapter load/unload, chat completions and
Messages (JSON, or an SSE stream of `max_tokens` text chunks when `stream` is true) and Messages count_tokens.
Usage: `python scripts/bench_instant_upstream.py PORT` (the benchmarks start it themselves).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from aiohttp import web

CHAT_ANSWER = {"id": "c", "object": "chat.completion", "created": 0, "model": "worker-base", "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "Hi team."}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}}
MESSAGE_ANSWER = {"id": "msg_1", "type": "message", "role": "assistant", "model": "worker-base",
                  "content": [{"type": "text", "text": "Hi team."}], "stop_reason": "end_turn",
                  "stop_sequence": None, "usage": {"input_tokens": 12, "output_tokens": 3}}
SSE = "text/event-stream"


def _sse(name: str | None, data: Any) -> bytes:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {data if isinstance(data, str) else json.dumps(data)}\n\n".encode()


def chat_stream(tokens: int) -> list[bytes]:
    """A chat stream of `tokens` one-word deltas, as vLLM sends it (then `[DONE]`)."""
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse(None, {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "worker-base",
                           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    return ([chunk({"role": "assistant", "content": ""})] + [chunk({"content": " hi"}) for _ in range(tokens)]
            + [chunk({}, "stop"), _sse(None, "[DONE]")])


def messages_stream(tokens: int) -> list[bytes]:
    """A Messages stream of `tokens` text deltas in one text block, as vLLM's Messages API sends it."""
    start = {"type": "message_start", "message": {**MESSAGE_ANSWER, "content": [], "stop_reason": None}}
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " hi"}}
    return ([_sse("message_start", start),
             _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                          "content_block": {"type": "text", "text": ""}})]
            + [_sse("content_block_delta", delta) for _ in range(tokens)]
            + [_sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
               _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                      "usage": {"output_tokens": tokens}}),
               _sse("message_stop", {"type": "message_stop"})])


def app() -> web.Application:
    adapters: dict[str, str] = {}
    chat_json, message_json = json.dumps(CHAT_ANSWER).encode(), json.dumps(MESSAGE_ANSWER).encode()

    async def empty(_: web.Request) -> web.Response:
        return web.Response(text="")

    async def models(_: web.Request) -> web.Response:
        data = [{"id": "worker-base", "root": "/m", "max_model_len": 8192}] + [
            {"id": n, "root": p} for n, p in adapters.items()]
        return web.json_response({"data": data})

    async def load_adapter(request: web.Request) -> web.Response:
        body = await request.json()
        adapters[body["lora_name"]] = body["lora_path"]
        return web.Response(text="ok")

    async def unload_adapter(request: web.Request) -> web.Response:
        adapters.pop((await request.json())["lora_name"], None)
        return web.Response(text="ok")

    async def answer(request: web.Request, whole: bytes, stream: Any) -> web.StreamResponse:
        body = json.loads(await request.read())
        if not body.get("stream"):
            return web.Response(body=whole, content_type="application/json")
        response = web.StreamResponse(headers={"Content-Type": SSE})
        await response.prepare(request)
        for event in stream(int(body.get("max_tokens") or 8)):
            await response.write(event)
        await response.write_eof()
        return response

    async def chat(request: web.Request) -> web.StreamResponse:
        return await answer(request, chat_json, chat_stream)

    async def messages(request: web.Request) -> web.StreamResponse:
        return await answer(request, message_json, messages_stream)

    async def count_tokens(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response({"input_tokens": 12})

    application = web.Application()
    application.add_routes([
        web.get("/health", empty), web.get("/v1/models", models), web.get("/metrics", empty),
        web.post("/v1/load_lora_adapter", load_adapter), web.post("/v1/unload_lora_adapter", unload_adapter),
        web.post("/v1/chat/completions", chat), web.post("/v1/messages", messages),
        web.post("/v1/messages/count_tokens", count_tokens)])
    return application


if __name__ == "__main__":
    web.run_app(app(), host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)

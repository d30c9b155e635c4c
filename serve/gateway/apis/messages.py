"""The Anthropic Messages API (`/v1/messages`, `/v1/messages/count_tokens`): what the Claude Agent SDK
(Claude Code) speaks. vLLM serves both endpoints itself; the gateway forwards to them untouched.

* Errors are Anthropic's `{"type": "error", "error": {"type", "message"}}`, typed by status as
  Anthropic types them; "no engine can answer" is 529 `overloaded_error` with `retry-after`, and
  `x-should-retry: true` on what the SDK should retry (429, 529). A stream that fails after it
  started ends with an `event: error` of the same shape; so does vLLM's own failed stream (the
  error event, and no `message_stop`): a stream is whole at `message_stop`.
* The session is `X-Session-Id`, else `X-Claude-Code-Session-Id`, else the `session_id` inside
  `metadata.user_id` (a JSON string, or Claude Code's older `…_session_<id>` form).
* A turn's tool results are the `tool_result` blocks of the last user message, named by the
  previous assistant message's `tool_use` blocks; `is_error` marks a result failed.
* The neutral answer joins the text blocks and turns each `tool_use` block into a call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from core.wire import WIRES, messages_replies, messages_tools
from core.wire import messages_answer as answer_of
from core.wire import messages_choice_label as tool_choice_label
from serve.gateway.apis.base import (
    Accumulator,
    Answer,
    Api,
    ApiName,
    BadAnswerError,
    Conversation,
    SseEvent,
    failure_message,
)
from serve.gateway.errors import bounded_message

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 529: "overloaded_error"}
RETRY = frozenset({429, 529})
_OLD_USER_ID_SESSION = re.compile(r"_session_([A-Za-z0-9._:-]+)$")


def error_type(status: int) -> str:
    return ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")


def anthropic_error(message: str, status: int) -> dict[str, Any]:
    text = bounded_message(message).encode("utf-8", "backslashreplace").decode("utf-8")
    return {"type": "error", "error": {"type": error_type(status), "message": text}}


class MessagesAccumulator(Accumulator):
    """Content blocks rebuilt from `content_block_start` / `_delta` events."""

    def __init__(self) -> None:
        super().__init__()
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[str]] = {}

    def event(self, name: str, data: Any) -> None:
        if not isinstance(data, dict):
            return
        kind, index = data.get("type"), data.get("index")
        if kind == "content_block_start" and isinstance(index, int) and isinstance(data.get("content_block"), dict):
            self._blocks[index] = dict(data["content_block"])
        elif kind == "content_block_delta" and index in self._blocks and isinstance(data.get("delta"), dict):
            delta, block = data["delta"], self._blocks[index]
            if delta.get("type") == "text_delta" and isinstance(delta.get("text"), str):
                block["text"] = str(block.get("text") or "") + delta["text"]
            elif delta.get("type") == "input_json_delta" and isinstance(delta.get("partial_json"), str):
                self._json.setdefault(index, []).append(delta["partial_json"])

    def answer(self) -> Answer:
        content = []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if block.get("type") == "tool_use" and self._json.get(index):
                block = {**block, "input": "".join(self._json[index])}  # text: the parser decodes (or refuses) it
            content.append(block)
        return answer_of(content)


class AnthropicErrors:
    def error_body(self, message: str, code: str, status: int) -> dict[str, Any]:
        return anthropic_error(message, status)

    def error_status(self, status: int, code: str) -> int:
        return 529 if status == 503 else status

    def error_headers(self, status: int) -> dict[str, str]:
        return {"x-should-retry": "true"} if status in RETRY else {}

    def sse_error(self, message: str, code: str, status: int) -> bytes:
        return b"event: error\ndata: " + json.dumps(anthropic_error(message, status)).encode() + b"\n\n"


class MessagesApi(AnthropicErrors, Api):
    name: ApiName = "messages"
    path = "/v1/messages"
    session_headers = ("X-Claude-Code-Session-Id",)

    def conversation(self, body: Mapping[str, Any]) -> Conversation:
        given = body.get("messages")
        messages: list[Any] = given if isinstance(given, list) else []
        offered = messages_tools(body.get("tools"))
        return Conversation(
            messages=messages, roles=[str(m.get("role", "")) if isinstance(m, Mapping) else "" for m in messages],
            tools=offered, tool_choice=tool_choice_label(body.get("tool_choice")),
            replies=messages_replies(messages).replies,
            request={k: body[k] for k in ("system", "messages", "tools", "tool_choice") if k in body})

    def force_tool(self, body: dict[str, Any]) -> bool:
        return WIRES["messages"].force_tool(body)

    def session(self, body: Mapping[str, Any]) -> str | None:
        metadata = body.get("metadata")
        user_id = metadata.get("user_id") if isinstance(metadata, Mapping) else None
        if not isinstance(user_id, str):
            return None
        try:
            value = json.loads(user_id)
        except ValueError:
            old = _OLD_USER_ID_SESSION.search(user_id)
            return old.group(1) if old else None
        session = value.get("session_id") if isinstance(value, dict) else None
        return session if isinstance(session, str) else None

    def output_limit(self, body: Mapping[str, Any]) -> str | None:
        return "max_tokens"

    def stream_end(self, event: SseEvent) -> bool:
        return isinstance(event.data, dict) and event.data.get("type") == "message_stop"

    def stream_failure(self, event: SseEvent) -> str | None:
        data = event.data if isinstance(event.data, dict) else {}
        return failure_message(data.get("error")) if "error" in (event.name, data.get("type")) else None

    def answer(self, payload: Any) -> Answer:
        if not isinstance(payload, dict) or not isinstance(payload.get("content"), list):
            raise BadAnswerError("the answer has no content blocks")
        return answer_of(payload["content"])

    def accumulator(self) -> Accumulator:
        return MessagesAccumulator()


class CountTokensApi(MessagesApi):
    """`count_tokens`: forwarded and counted like any request; it generates nothing to shadow or capture."""

    name: ApiName = "count_tokens"
    path = "/v1/messages/count_tokens"
    generates = False
    captures = False

    def force_tool(self, body: dict[str, Any]) -> bool:
        return False

    def output_limit(self, body: Mapping[str, Any]) -> str | None:
        return None

    def answer(self, payload: Any) -> Answer:
        if not isinstance(payload, dict) or not isinstance(payload.get("input_tokens"), int):
            raise BadAnswerError("the answer has no input_tokens")
        return ""

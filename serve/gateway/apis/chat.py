"""OpenAI Chat Completions (`/v1/chat/completions`) and Completions (`/v1/completions`).

Errors are OpenAI's `{"error": {"message", "type", "code"}}`; a stream that fails after it started
ends with a `data: {"error": ...}` event, as vLLM ends its own (vLLM then sends `[DONE]`: a stream is
whole at `[DONE]` only when no error came before it). The tool results of a chat turn are the `tool`
messages after the last assistant message, named by that message's `tool_calls`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from core.wire import WIRES, chat_message, chat_replies, chat_tools, first_choice
from core.wire import chat_choice_label as label
from core.wireshapes import ChatToolCall
from serve.gateway.apis.base import Accumulator, Answer, Api, ApiName, Conversation, SseEvent, failure_message
from serve.gateway.errors import error_body


class OpenAIErrors:
    """OpenAI's error shapes (shared by every OpenAI API the gateway serves)."""

    def error_body(self, message: str, code: str, status: int) -> dict[str, Any]:
        return error_body(message, code, status)

    def sse_error(self, message: str, code: str, status: int) -> bytes:
        return b"data: " + json.dumps(error_body(message, code, status)).encode() + b"\n\n"


class ChoicesStream:
    """How a chat or completions stream ends (`[DONE]`) and says a failure (an event with an `error` object,
    vLLM's `{"error": {"message", "type", "param", "code"}}`)."""

    def stream_end(self, event: SseEvent) -> bool:
        return event.done

    def stream_failure(self, event: SseEvent) -> str | None:
        error = event.data.get("error") if isinstance(event.data, dict) else None
        return None if error is None else failure_message(error)


def choice_zero(data: Any) -> list[dict[str, Any]]:
    """A stream event's entries for choice 0 (`[DONE]`, None, has none): the one the gateway reads."""
    choices = data.get("choices") if isinstance(data, dict) else None
    return [c for c in choices if isinstance(c, dict) and c.get("index", 0) == 0] if isinstance(choices, list) else []


class ChatAccumulator(Accumulator):
    """Choice 0 of a chat stream: its content and its tool calls, joined from their deltas."""

    def __init__(self) -> None:
        super().__init__()
        self._content: list[str] = []
        self._calls: dict[int, ChatToolCall] = {}

    def event(self, name: str, data: Any) -> None:
        for choice in choice_zero(data):
            delta = choice["delta"] if isinstance(choice.get("delta"), dict) else {}
            self._content.append(delta.get("content") or "")
            for call in delta.get("tool_calls") or []:
                if not isinstance(call, dict):
                    continue
                slot = self._calls.setdefault(call.get("index", 0), {
                    "id": None, "type": "function", "function": {"name": "", "arguments": ""}})
                slot["id"] = call.get("id") or slot["id"]
                function = call["function"] if isinstance(call.get("function"), dict) else {}
                slot["function"]["name"] += function.get("name") or ""
                slot["function"]["arguments"] += function.get("arguments") or ""

    def answer(self) -> Answer:
        return chat_message("".join(self._content), [self._calls[i] for i in sorted(self._calls)])


class CompletionAccumulator(Accumulator):
    """Choice 0 of a completion stream: its text."""

    def __init__(self) -> None:
        super().__init__()
        self._text: list[str] = []

    def event(self, name: str, data: Any) -> None:
        for choice in choice_zero(data):
            self._text.append(choice.get("text") or "")

    def answer(self) -> Answer:
        return "".join(self._text)


class ChatApi(OpenAIErrors, ChoicesStream, Api):
    name: ApiName = "chat"
    path = "/v1/chat/completions"

    def conversation(self, body: Mapping[str, Any]) -> Conversation:
        given = body.get("messages")
        messages: list[Any] = given if isinstance(given, list) else []
        return Conversation(
            messages=messages,
            roles=[str(m.get("role", "")) if isinstance(m, Mapping) else "" for m in messages],
            tools=chat_tools(body.get("tools")), tool_choice=label(body.get("tool_choice")),
            replies=chat_replies(messages).replies,
            request={k: body[k] for k in ("messages", "tools", "tool_choice") if k in body})

    def force_tool(self, body: dict[str, Any]) -> bool:
        return WIRES["chat"].force_tool(body)

    def answer(self, payload: Any) -> Answer:
        return WIRES["chat"].answer(payload)

    def accumulator(self) -> Accumulator:
        return ChatAccumulator()


class CompletionsApi(OpenAIErrors, ChoicesStream, Api):
    name: ApiName = "completions"
    path = "/v1/completions"
    captures = False

    def conversation(self, body: Mapping[str, Any]) -> Conversation:
        return Conversation(messages=[], roles=[], tools=[], tool_choice="auto")

    def answer(self, payload: Any) -> Answer:
        text: str = first_choice(payload, "text", str)
        return text

    def accumulator(self) -> Accumulator:
        return CompletionAccumulator()

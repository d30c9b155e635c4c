"""The OpenAI Responses API (`/v1/responses`): what the OpenAI Agents SDK speaks. vLLM serves it itself.

The gateway is stateless here: a request carries its whole conversation in `input`, so capture, the
guard and replay see every turn. `previous_response_id` is refused (400): a response stored by one
engine replica is unknown to the others and lost when it restarts, and the gateway could not hash,
guard or replay a turn it cannot see. `store` is passed on as sent (vLLM ignores it unless its store
is enabled).

A turn's tool results are the `function_call_output` items at the end of `input`, named by the
`function_call` items with the same `call_id`; the neutral answer joins the `output_text` parts of
the output's messages and turns each `function_call` item into a call. A stream is whole at
`response.completed` (or `.incomplete`), whose event carries the whole response; an `error` event or
`response.failed` says the engine failed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from core.wire import WIRES, chat_message, items, responses_replies, responses_tools
from core.wire import responses_answer as answer_of
from core.wire import responses_choice_label as tool_choice_label
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
from serve.gateway.apis.chat import OpenAIErrors
from serve.gateway.errors import GatewayError, bounded_message

FINAL_EVENTS = frozenset({"response.completed", "response.incomplete"})


class ResponsesAccumulator(Accumulator):
    def __init__(self) -> None:
        super().__init__()
        self._response: Any = None

    def event(self, name: str, data: Any) -> None:
        if isinstance(data, dict) and data.get("type") in FINAL_EVENTS:
            self._response = data.get("response")

    def answer(self) -> Answer:
        try:
            return answer_of(self._response)
        except BadAnswerError:
            return chat_message("", [])


class ResponsesApi(OpenAIErrors, Api):
    name: ApiName = "responses"
    path = "/v1/responses"

    def check(self, body: Mapping[str, Any]) -> None:
        if body.get("previous_response_id") is not None:
            raise GatewayError(400, "'previous_response_id' is not supported: the gateway is stateless (a response "
                                    "stored by one engine replica is unknown to the others); send the whole "
                                    "conversation in 'input'", "unsupported_field")

    def force_tool(self, body: dict[str, Any]) -> bool:
        return WIRES["responses"].force_tool(body)

    def sse_error(self, message: str, code: str, status: int) -> bytes:
        event = {"type": "error", "code": code, "message": bounded_message(message), "param": None}
        return b"event: error\ndata: " + json.dumps(event).encode() + b"\n\n"

    def stream_end(self, event: SseEvent) -> bool:
        return isinstance(event.data, dict) and event.data.get("type") in FINAL_EVENTS

    def stream_failure(self, event: SseEvent) -> str | None:
        data = event.data if isinstance(event.data, dict) else {}
        if "error" in (event.name, data.get("type")):
            return failure_message(data)
        if data.get("type") == "response.failed":
            response = data.get("response")
            return failure_message(response.get("error") if isinstance(response, dict) else None)
        return None

    def conversation(self, body: Mapping[str, Any]) -> Conversation:
        given = items(body.get("input"))
        offered = responses_tools(body.get("tools"))
        return Conversation(
            messages=given,
            roles=[str(i.get("role") or i.get("type") or "") if isinstance(i, Mapping) else "" for i in given],
            tools=offered, tool_choice=tool_choice_label(body.get("tool_choice")),
            replies=responses_replies(given).replies,
            request={k: body[k] for k in ("instructions", "input", "tools", "tool_choice") if k in body})

    def answer(self, payload: Any) -> Answer:
        return answer_of(payload)

    def accumulator(self) -> Accumulator:
        return ResponsesAccumulator()

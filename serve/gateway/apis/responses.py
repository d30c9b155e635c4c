"""The OpenAI Responses API (`/v1/responses`): what the OpenAI Agents SDK speaks. vLLM serves it itself.

The gateway is stateless here: a request carries its whole conversation in `input`, so capture, the
guard and replay see every turn. `previous_response_id` is refused (400): a response stored by one
engine replica is unknown to the others and lost when it restarts, and the gateway could not hash,
guard or replay a turn it cannot see. `store` is passed on as sent (vLLM ignores it unless its store
is enabled).

A turn's tool results are the `function_call_output` items at the end of `input`, named by the
`function_call` items with the same `call_id`; the neutral answer joins the `output_text` parts of
the output's messages and turns each `function_call` item into a call. A stream is whole at
`response.completed` (or `.failed` / `.incomplete`), whose event carries the whole response.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from serve.gateway.apis.base import (
    Accumulator,
    Answer,
    Api,
    ApiName,
    BadAnswer,
    Conversation,
    ToolReply,
    chat_message,
    function_tool,
    tool_call,
)
from serve.gateway.apis.chat import OpenAIErrors
from serve.gateway.errors import GatewayError, bounded_message

FINAL_EVENTS = frozenset({"response.completed", "response.failed", "response.incomplete"})


def items(value: Any) -> list[Any]:
    """`input` as items: a string is one user message."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return value if isinstance(value, list) else []


def tool_choice_label(choice: Any) -> str:
    if isinstance(choice, Mapping):
        return f"function:{choice.get('name', '')}" if choice.get("type") == "function" else str(choice.get("type"))
    return "auto" if choice is None else str(choice)


def tool_replies(given: list[Any]) -> list[ToolReply]:
    tail: list[Mapping[str, Any]] = []
    for item in reversed(given):
        if not isinstance(item, Mapping) or item.get("type") != "function_call_output":
            break
        tail.insert(0, item)
    names = {str(i.get("call_id")): str(i.get("name") or "") for i in given
             if isinstance(i, Mapping) and i.get("type") == "function_call"}
    return [ToolReply(i.get("call_id") if isinstance(i.get("call_id"), str) else None,
                      names.get(str(i.get("call_id")), ""), i.get("output")) for i in tail]


def answer_of(response: Any) -> Answer:
    if not isinstance(response, Mapping) or not isinstance(response.get("output"), list):
        raise BadAnswer("the answer has no output items")
    text, calls = [], []
    for item in response["output"]:
        if not isinstance(item, Mapping):
            continue
        if item.get("type") == "message":
            parts = item.get("content")
            text += [p["text"] for p in parts if isinstance(p, Mapping) and p.get("type") == "output_text"
                     and isinstance(p.get("text"), str)] if isinstance(parts, list) else []
        elif item.get("type") == "function_call":
            calls.append(tool_call(item.get("call_id"), item.get("name"), item.get("arguments")))
    return chat_message("".join(text), calls)


class ResponsesAccumulator(Accumulator):
    def __init__(self) -> None:
        super().__init__()
        self._response: Any = None

    def event(self, name: str, data: Any) -> None:
        if isinstance(data, dict) and data.get("type") in FINAL_EVENTS:
            self._response = data.get("response")
            self.done = True

    def answer(self) -> Answer:
        try:
            return answer_of(self._response)
        except BadAnswer:
            return chat_message("", [])


class ResponsesApi(OpenAIErrors, Api):
    name: ApiName = "responses"
    path = "/v1/responses"

    def check(self, body: Mapping[str, Any]) -> None:
        if body.get("previous_response_id") is not None:
            raise GatewayError(400, "'previous_response_id' is not supported: the gateway is stateless (a response "
                                    "stored by one engine replica is unknown to the others); send the whole "
                                    "conversation in 'input'", "unsupported_field")

    def sse_error(self, message: str, code: str, status: int) -> bytes:
        event = {"type": "error", "code": code, "message": bounded_message(message), "param": None}
        return b"event: error\ndata: " + json.dumps(event).encode() + b"\n\n"

    def conversation(self, body: Mapping[str, Any]) -> Conversation:
        given = items(body.get("input"))
        tools = body.get("tools")
        offered = [entry for t in tools if isinstance(t, Mapping) and t.get("type") == "function"
                   and (entry := function_tool(t.get("name"), t.get("parameters")))] \
            if isinstance(tools, list) else []
        return Conversation(
            messages=given,
            roles=[str(i.get("role") or i.get("type") or "") if isinstance(i, Mapping) else "" for i in given],
            tools=offered, tool_choice=tool_choice_label(body.get("tool_choice")), replies=tool_replies(given),
            request={k: body[k] for k in ("instructions", "input", "tools", "tool_choice") if k in body})

    def answer(self, payload: Any) -> Answer:
        return answer_of(payload)

    def accumulator(self) -> Accumulator:
        return ResponsesAccumulator()

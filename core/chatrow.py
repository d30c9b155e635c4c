"""A decision as the chat row trainers read (OpenAI fine-tuning's shape, which TRL and Axolotl read too):
`messages` ending in the assistant's target turn, and `tools` as functions.

The runtime speaks Anthropic Messages; the row is its chat reading: the system prompt (text blocks joined)
first, a user turn's `tool_result` blocks as `tool` messages (in order, before the turn's text), an assistant
turn's `tool_use` blocks as `tool_calls` with JSON-text arguments. Thinking blocks and images carry nothing a
text trainer reads and are left out; a tool result's content is its text blocks joined.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from core.curated import ChatTrainingRow
from core.wire import blocks


def _text(content: Any) -> str:
    return "\n".join(str(b.get("text")) for b in blocks(content) if b.get("type") == "text"
                     and isinstance(b.get("text"), str))


def _call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False, sort_keys=True)}}


def _turn(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One Messages turn as chat messages."""
    role, content = message.get("role"), message.get("content")
    if role == "assistant":
        parts = blocks(content)
        calls = [_call(str(b.get("id")), str(b.get("name")), b.get("input") if isinstance(b.get("input"), dict) else {})
                 for b in parts if b.get("type") == "tool_use"]
        turn: dict[str, Any] = {"role": "assistant", "content": _text(parts) or None}
        return [{**turn, "tool_calls": calls} if calls else turn]
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    results = [{"role": "tool", "tool_call_id": str(b.get("tool_use_id")), "content": _text(b.get("content"))}
               for b in blocks(content) if b.get("type") == "tool_result"]
    text = _text(content)
    return [*results, *([{"role": "user", "content": text}] if text else [])]


def chat_tools(tools: Any) -> list[dict[str, Any]]:
    """Messages tools (`name`, `description`, `input_schema`) as chat functions."""
    return [{"type": "function", "function": {"name": t["name"], "description": str(t.get("description") or ""),
                                              "parameters": t.get("input_schema") or {"type": "object"}}}
            for t in tools if isinstance(t, Mapping) and isinstance(t.get("name"), str)] \
        if isinstance(tools, list) else []


def chat_messages(request: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A Messages request's system prompt and turns as chat messages."""
    system = _text(request.get("system"))
    return [*([{"role": "system", "content": system}] if system else []),
            *(m for message in request.get("messages") or [] if isinstance(message, Mapping) for m in _turn(message))]


def chat_row(request: Mapping[str, Any], target: Mapping[str, Any]) -> ChatTrainingRow:
    """A Messages request and its target turn (a chat assistant message) as one training row."""
    return ChatTrainingRow(messages=[*chat_messages(request), dict(target)], tools=chat_tools(request.get("tools")))


def target_turn(tool: str | None, arguments: Mapping[str, Any] | None, text: str | None) -> dict[str, Any]:
    """The assistant turn a row trains: one call with its values, or (no tool) the answer's text."""
    if tool is None:
        return {"role": "assistant", "content": text or ""}
    return {"role": "assistant", "content": None, "tool_calls": [_call("call_0", tool, dict(arguments or {}))]}

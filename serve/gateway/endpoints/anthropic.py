"""The Anthropic API family (the Claude Agent SDK's): Messages and count_tokens, forwarded like the OpenAI
ones; their errors take Anthropic's shape (serve/gateway/apis/messages.py). The table of what each does is
in serve/app.py."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from serve.gateway.endpoints.bodies import MODEL, STREAM, declare_forwarded

_CONTENT = {"anyOf": [{"type": "string"}, {"type": "array", "items": {
    "type": "object", "required": ["type"], "properties": {"type": {"type": "string"}}}}]}
MESSAGES_BODY: dict[str, Any] = {
    "type": "object", "required": ["messages", "max_tokens"],
    "properties": {
        "model": MODEL, "stream": STREAM, "max_tokens": {"type": "integer", "minimum": 1},
        "system": _CONTENT,
        "messages": {"type": "array", "items": {
            "type": "object", "required": ["role", "content"],
            "properties": {"role": {"enum": ["user", "assistant"]}, "content": _CONTENT}}},
        "tools": {"type": "array", "items": {
            "type": "object", "required": ["name", "input_schema"],
            "properties": {"name": {"type": "string"}, "input_schema": {"type": "object"}}}},
        "metadata": {"type": "object", "properties": {"user_id": {"type": "string"}}}}}
COUNT_TOKENS_BODY: dict[str, Any] = {**MESSAGES_BODY, "required": ["messages"]}
ANTHROPIC_ANSWER: dict[int | str, dict[str, Any]] = {
    200: {"description": "The engine's message, or its SSE stream", "content": {
        "application/json": {"schema": {"type": "object"}},
        "text/event-stream": {"schema": {"type": "object"}}}},
    "4XX": {"description": "Refused (Anthropic-shaped error)", "content": {"application/json": {"schema": {
        "type": "object", "required": ["type", "error"], "properties": {"type": {"const": "error"}, "error": {
            "type": "object", "required": ["type", "message"]}}}}}},
    "5XX": {"description": "Failed (Anthropic-shaped error)", "content": {"application/json": {"schema": {
        "type": "object", "required": ["type", "error"]}}}}}

router = APIRouter()


# `?beta=true` (what the Claude Agent SDK sends) needs nothing: query parameters are not read.
declare_forwarded(router, {"messages": MESSAGES_BODY, "count_tokens": COUNT_TOKENS_BODY}, ANTHROPIC_ANSWER)

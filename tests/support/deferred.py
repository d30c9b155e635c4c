"""Descriptor captures made by the gateway's own `describe`, and transcripts written as the runtime would."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from core.capture_store import CapturedDecision
from core.wire import DecisionApi
from replay.corpus.transcripts import TranscriptHeader, transcript_lines
from serve.gateway.apis import APIS
from serve.gateway.capture import CaptureJob, describe


def call(tool: str, arguments: dict[str, Any], call_id: str = "c1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": tool, "arguments": json.dumps(arguments)}}


def answer(tool: str, arguments: dict[str, Any], call_id: str = "c1") -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [call(tool, arguments, call_id)]}


def tool_use(tool: str, arguments: dict[str, Any], call_id: str = "toolu_1") -> dict[str, Any]:
    """An Anthropic assistant message that calls one tool."""
    return {"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": tool, "input": arguments}]}


def messages_answer(message: dict[str, Any]) -> dict[str, Any]:
    """The neutral answer the gateway hands capture for an Anthropic answer (its content blocks)."""
    return APIS["messages"].answer({"content": message["content"]})  # type: ignore[return-value]


def descriptor(messages: list[dict[str, Any]], reply: dict[str, Any], *, workspace: str = "ws-a",
               session: str = "s-1", tools: list[Any] | None = None, tool_choice: Any = None,
               params: dict[str, Any] | None = None, outcome: str | None = None, request_id: str | None = None,
               at: str = "2026-08-02T10:00:00Z", api: DecisionApi = "chat", system: Any = None) -> CapturedDecision:
    """What the gateway stores in `descriptor` mode for this request: the body as proxy.py hands it
    over (params, then `model` rewritten to the route's target), answered by `reply` (the neutral
    answer: a chat message). `api` is the API it came through, whose shape `messages` (Responses:
    the `input` items) and `system` (Messages `system`, Responses `instructions`) are in."""
    turn = {"chat": "messages", "messages": "messages", "responses": "input"}[api]
    body: dict[str, Any] = {"model": "worker", **(params or {}), turn: messages}
    if system is not None:
        body["instructions" if api == "responses" else "system"] = system
    if tools is not None:
        body["tools"] = tools
    if tool_choice is not None:
        body["tool_choice"] = tool_choice
    body["model"] = "worker-base"
    key = request_id or f"r-{workspace}-{session}-{len(messages)}"
    job = CaptureJob(key=key, request_id=key, workspace=workspace, session=session,
                     route="worker", adapter="worker-base", kind="production", body=body, answer=reply,
                     duration_s=0.1, captured_at=at, api=api)
    return replace(describe(job, "descriptor"), outcome=outcome)


def write_session(root: Path, messages: list[dict[str, Any]], *, workspace: str = "ws-a", session: str = "s-1",
                  tools: list[Any] | None = None, tool_choice: Any = None,
                  params: dict[str, Any] | None = None, api: DecisionApi = "chat", system: Any = None) -> Path:
    """`<root>/<workspace>/<session>.jsonl`, as the runtime writes it (in `api`'s shape)."""
    header = TranscriptHeader(workspace=workspace, session=session, tools=tools, tool_choice=tool_choice,
                              params=params or {}, api=api, system=system if api == "messages" else None,
                              instructions=system if api == "responses" else None)
    path = root / workspace / f"{session}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(transcript_lines(header, messages), encoding="utf-8")
    return path

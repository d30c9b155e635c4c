"""Descriptor captures made by the gateway's own `describe`, and transcripts written as the runtime would."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from core.capture import CapturedDecision
from replay.transcripts import TranscriptHeader, transcript_lines
from serve.gateway.capture import CaptureJob, describe


def call(tool: str, arguments: dict[str, Any], call_id: str = "c1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": tool, "arguments": json.dumps(arguments)}}


def answer(tool: str, arguments: dict[str, Any], call_id: str = "c1") -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [call(tool, arguments, call_id)]}


def descriptor(messages: list[dict[str, Any]], reply: dict[str, Any], *, workspace: str = "ws-a",
               session: str = "s-1", tools: list[Any] | None = None, tool_choice: Any = None,
               params: dict[str, Any] | None = None, outcome: str | None = None, request_id: str | None = None,
               at: str = "2026-08-02T10:00:00Z") -> CapturedDecision:
    """What the gateway stores in `descriptor` mode for this request: the body as proxy.py hands it
    over (params, then `model` rewritten to the route's target), answered by `reply`."""
    body: dict[str, Any] = {"model": "worker", **(params or {}), "messages": messages}
    if tools is not None:
        body["tools"] = tools
    if tool_choice is not None:
        body["tool_choice"] = tool_choice
    body["model"] = "worker-base"
    key = request_id or f"r-{workspace}-{session}-{len(messages)}"
    job = CaptureJob(key=key, request_id=key, workspace=workspace, session=session,
                     route="worker", adapter="worker-base", kind="production", body=body, answer=reply,
                     duration_s=0.1, captured_at=at)
    return replace(describe(job, "descriptor"), outcome=outcome)


def write_session(root: Path, messages: list[dict[str, Any]], *, workspace: str = "ws-a", session: str = "s-1",
                  tools: list[Any] | None = None, tool_choice: Any = None,
                  params: dict[str, Any] | None = None) -> Path:
    """`<root>/<workspace>/<session>.jsonl`, as the runtime writes it."""
    header = TranscriptHeader(workspace=workspace, session=session, tools=tools, tool_choice=tool_choice,
                              params=params or {})
    path = root / workspace / f"{session}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(transcript_lines(header, messages), encoding="utf-8")
    return path

"""The one tool-call parser shared by replay and the serve gateway (DESIGN §3).

A model answer is read in this order:

1. the structured `tool_calls` field of the chat message (what vLLM's tool parser fills);
2. otherwise the text of `content`: Hermes blocks `<tool_call>{"name":..,"arguments":..}</tool_call>`
   (the LAST block may be unclosed: generation often stops on the closing tag) and
   Qwen3-Coder's `<function=NAME><parameter=KEY>value</parameter></function>`, bare or
   wrapped in `<tool_call>`. In Hermes JSON, `parameters` is read when `arguments` is absent
   (Llama-style output), and a call without either has no arguments (`{}`). Qwen3-Coder
   parameter values that parse as JSON are decoded, others kept as strings.

Reasoning is not an action: `reasoning_content` is never searched for calls, and in
`content` everything up to the last `</think>` (or inside `<think>…</think>`) is skipped.

Outcome precedence: `empty_response` (nothing but whitespace or reasoning) > `malformed_call`
(the first call cannot be read; `calls` stays empty so `calls[0]` is always the scored call,
and `error` names any later call that could be read) >
`unknown_tool` (the first call names a tool that was not offered) > `multiple_calls` (score on
the first, all are kept) > `ok`; no call at all is `no_call`. `error` always says what was wrong,
including problems in calls after the first.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from core.keyset import ArgumentsError, decode_arguments, sorted_key_set
from core.records import ParsedResponse, ParseOutcome, ToolCall

Source = Literal["structured", "hermes", "qwen3_coder"]

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)
_TOOL_CALL_OPEN = "<tool_call>"
_TOOL_CALL_CLOSE = "</tool_call>"
_FUNCTION = re.compile(r"<function=([^>\n]*)>")
_FUNCTION_CLOSE = "</function>"
_PARAMETER = re.compile(r"<parameter=([^>\n]*)>")
_PARAMETER_CLOSE = "</parameter>"


@dataclass(frozen=True)
class _Read:
    """One call as read from the answer: either a call or the reason it could not be read."""

    source: Source
    call: ToolCall | None = None
    error: str | None = None


def parse_response(message: Mapping[str, Any], tool_names: Collection[str] | None = None) -> ParsedResponse:
    """Read an OpenAI chat-completion `choices[0].message` into a typed outcome.

    `tool_names` are the tools the request offered; None skips the unknown-tool check.
    """
    structured = message.get("tool_calls") or []
    if structured:
        reads = [_read_structured(i, item) for i, item in enumerate(structured)]
        return _outcome(reads, tool_names)
    parsed = parse_text(_content_text(message.get("content")), tool_names)
    if parsed.outcome is ParseOutcome.EMPTY_RESPONSE and message.get("reasoning_content"):
        return ParsedResponse(outcome=ParseOutcome.EMPTY_RESPONSE, error="the answer has only reasoning, no content")
    return parsed


def parse_text(text: str | None, tool_names: Collection[str] | None = None) -> ParsedResponse:
    """Read calls from raw model text, e.g. a `/v1/completions` choice's `text`."""
    answer = _strip_reasoning(text or "")
    if not answer.strip():
        return ParsedResponse(outcome=ParseOutcome.EMPTY_RESPONSE, error="the answer has no content and no tool call")
    reads = _read_text(answer)
    if not reads:
        return ParsedResponse(outcome=ParseOutcome.NO_CALL)
    return _outcome(reads, tool_names)


def transport_error(error: str) -> ParsedResponse:
    """The outcome of a request that got no model answer (connection, timeout, HTTP error)."""
    return ParsedResponse(outcome=ParseOutcome.TRANSPORT_ERROR, error=error)


def _outcome(reads: list[_Read], tool_names: Collection[str] | None) -> ParsedResponse:
    calls = [r.call for r in reads if r.call is not None]
    problems = [f"call {i + 1}: {r.error}" for i, r in enumerate(reads) if r.error]
    offered = set(tool_names) if tool_names is not None else None
    if offered is not None:
        problems += [
            f"call {i + 1}: tool {r.call.tool!r} was not offered"
            for i, r in enumerate(reads)
            if r.call is not None and r.call.tool not in offered
        ]
    first = reads[0]
    if first.call is None:
        # calls[0] must be the scored call, so readable later calls are named, not kept.
        if calls:
            problems.append("not scored, though readable: " + ", ".join(c.tool for c in calls))
        outcome, calls = ParseOutcome.MALFORMED_CALL, []
    elif offered is not None and first.call.tool not in offered:
        outcome = ParseOutcome.UNKNOWN_TOOL
    elif len(reads) > 1:
        outcome = ParseOutcome.MULTIPLE_CALLS
        problems.insert(0, f"{len(reads)} calls in one turn; the first is scored")
    else:
        outcome = ParseOutcome.OK
    return ParsedResponse(
        outcome=outcome, calls=calls, source=first.source, error="; ".join(problems) if problems else None
    )


def _make_call(source: Source, name: Any, arguments: Any) -> _Read:
    if not isinstance(name, str) or not name.strip():
        return _Read(source, error=f"missing or non-string tool name: {name!r}")
    try:
        args = decode_arguments(arguments)
    except ArgumentsError as exc:
        return _Read(source, error=f"tool {name!r}: {exc}")
    return _Read(source, call=ToolCall(tool=name.strip(), arguments=args, key_set=sorted_key_set(args)))


def _read_structured(index: int, item: Any) -> _Read:
    function = item.get("function") if isinstance(item, Mapping) else None
    if not isinstance(function, Mapping):
        return _Read("structured", error=f"tool_calls[{index}] has no 'function' object")
    return _make_call("structured", function.get("name"), function.get("arguments", {}))


def _content_text(content: Any) -> str:
    """`content` as text: a string, or the text parts of an OpenAI content-part list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping) and p.get("type") == "text")
    return str(content)


def _strip_reasoning(text: str) -> str:
    """Drop thinking: `<think>…</think>` blocks, text before a final `</think>` (the template
    opened the block), and an unclosed `<think>` with everything after it."""
    text = _THINK_BLOCK.sub("", text)
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    if "<think>" in text:
        text = text.split("<think>", 1)[0]
    return text


def _read_text(text: str) -> list[_Read]:
    """All calls in the text, in order: `<tool_call>` blocks and bare `<function=` blocks."""
    reads: list[_Read] = []
    pos = 0
    while True:
        block = text.find(_TOOL_CALL_OPEN, pos)
        outside = text[pos:] if block < 0 else text[pos:block]
        reads += _read_functions(outside)
        if block < 0:
            return reads
        start = block + len(_TOOL_CALL_OPEN)
        end = text.find(_TOOL_CALL_CLOSE, start)
        nxt = text.find(_TOOL_CALL_OPEN, start)
        if end < 0 or (0 <= nxt < end):
            if nxt >= 0:
                reads.append(_Read("hermes", error="<tool_call> block is not closed before the next one"))
                pos = nxt
                continue
            reads += _read_block(text[start:])
            return reads
        reads += _read_block(text[start:end])
        pos = end + len(_TOOL_CALL_CLOSE)


def _read_block(body: str) -> list[_Read]:
    """One `<tool_call>` body: Hermes JSON (an object, or a list of objects) or Qwen3-Coder form."""
    stripped = body.strip()
    if _FUNCTION.search(stripped) and not stripped.startswith(("{", "[")):
        return _read_functions(stripped)
    if not stripped:
        return [_Read("hermes", error="empty <tool_call> block")]
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError as exc:
        return [_Read("hermes", error=f"<tool_call> block is not valid JSON: {exc}")]
    items = value if isinstance(value, list) and value else [value]
    return [_read_hermes_object(item) for item in items]


def _read_hermes_object(item: Any) -> _Read:
    if not isinstance(item, dict):
        return _Read("hermes", error="<tool_call> JSON must be an object with 'name' and 'arguments'")
    arguments = item.get("arguments", item.get("parameters", {}))
    return _make_call("hermes", item.get("name"), arguments)


def _read_functions(text: str) -> list[_Read]:
    """Qwen3-Coder `<function=NAME>` blocks; the last one may be unclosed."""
    reads = []
    matches = list(_FUNCTION.finditer(text))
    for i, match in enumerate(matches):
        limit = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        close = text.find(_FUNCTION_CLOSE, match.end(), limit)
        if close < 0 and i + 1 < len(matches):
            reads.append(_Read("qwen3_coder", error=f"<function={match.group(1)}> is not closed before the next one"))
            continue
        body = text[match.end() : close if close >= 0 else limit]
        reads.append(_read_function(match.group(1), body))
    return reads


def _read_function(name: str, body: str) -> _Read:
    arguments: dict[str, Any] = {}
    pos = 0
    for match in _PARAMETER.finditer(body):
        if match.start() < pos:
            continue
        key = match.group(1).strip()
        end = body.find(_PARAMETER_CLOSE, match.end())
        if end < 0:
            return _Read("qwen3_coder", error=f"tool {name!r}: <parameter={key}> is not closed")
        if key in arguments:
            return _Read("qwen3_coder", error=f"tool {name!r}: parameter {key!r} given twice")
        arguments[key] = _parameter_value(body[match.end() : end])
        pos = end + len(_PARAMETER_CLOSE)
    return _make_call("qwen3_coder", name, arguments)


def _parameter_value(raw: str) -> Any:
    """A parameter value: JSON when it parses as JSON, else the text (one leading and one
    trailing newline are layout, as in Qwen3-Coder's own parser)."""
    text = raw[1:] if raw.startswith("\n") else raw
    text = text[:-1] if text.endswith("\n") else text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text

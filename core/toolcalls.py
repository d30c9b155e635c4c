"""The one tool-call parser shared by replay and the serve gateway (DESIGN §3).

A model answer is read in this order:

1. the structured `tool_calls` field of the chat message (what vLLM's tool parser fills);
2. otherwise the text of `content`: Hermes blocks `<tool_call>{"name":..,"arguments":..}</tool_call>`
   (the LAST block may be unclosed: generation often stops on the closing tag) and
   Qwen3-Coder's `<function=NAME><parameter=KEY>value</parameter></function>`, bare or
   wrapped in `<tool_call>`.

The text is read as vLLM's own `hermes` and `qwen3_coder` parsers read it (vLLM 0.32;
tests/core/test_toolcalls_vllm.py is the differential test against them): wherever they return a
call whose text is whole, ours is the same tool, keys and typed values. Never silently wrong: where
vLLM reads no call, or a call that loses part of the text, ours is a typed `malformed_call`. Both
formats are read whichever parser a server runs (a scorer does not know which); each vLLM parser
reads only its own.

* Hermes: a block's JSON runs to the first `</tool_call>` (so one inside a JSON string cuts it)
  and must be an object with a string `name` (kept as written) and an object `arguments`. When
  any block cannot be read, the answer is `malformed_call`: vLLM's parser then returns no call.
* Qwen3-Coder: a function must end with `</function>` (vLLM reads a cut-off call with the
  parameters that were closed; ours calls it malformed), and its body must be `<parameter=…>`
  tags (vLLM skips other text; ours never drops it: it is in a value, or the call is malformed).
  A listed key's `<parameter=KEY>` always starts a parameter, closed before it or not, and a value
  that does not fit its type is text. When no value holds tag text the reading is vLLM's;
  otherwise a value may hold `</parameter>`, `</function>` and unlisted `<parameter=…>` lines (a
  file holding a tool-call template is one value, where vLLM cuts it and splits it into spurious
  keys): see `_reading`. A key given twice is malformed (vLLM keeps the last). A tool whose schema lists
  no keys (`"properties": {}`, `additionalProperties` only, `anyOf` of objects: MCP and free-form tools)
  is read as without a schema: every `<parameter=KEY>` starts a parameter, as vLLM reads it.
* Qwen3-Coder values are typed by the request's tool schema as vLLM types them
  (core/toolvalues.py); a value that does not fit its type stays text. Without schemas (none
  passed) a value that parses as JSON is decoded, others kept as text.

Reasoning is not an action: `reasoning_content` is never searched for calls, and in
`content` `<think>…</think>` blocks (and everything before a first `</think>` that no `<think>`
opened: the template opened it) are skipped; think tags inside a call are the call's text.

Outcome precedence: `empty_response` (nothing but whitespace or reasoning) > `malformed_call`
(the first call, or any Hermes block, cannot be read; `calls` stays empty so `calls[0]` is always
the scored call, and `error` names any other call that could be read) >
`unknown_tool` (the first call names a tool that was not offered) > `multiple_calls` (score on
the first, all are kept) > `ok`; no call at all is `no_call`. `error` always says what was wrong,
including problems in calls after the first.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from core.jsonfile import parse_problem
from core.keyset import ArgumentsError, decode_arguments, sorted_key_set
from core.records import ParsedResponse, ParseOutcome, ToolCall
from core.toolvalues import typed_value

Source = Literal["structured", "hermes", "qwen3_coder"]
# Tool name -> its JSON Schema `parameters` object, as the request offered it.
Schemas = Mapping[str, Mapping[str, Any]]

_TOOL_CALL_OPEN = "<tool_call>"
_TOOL_CALL_CLOSE = "</tool_call>"
_FUNCTION_OPEN = "<function="
_FUNCTION = re.compile(r"<function=([^>\n]*)>")
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_FUNCTION_CLOSE = "</function>"
_PARAMETER = re.compile(r"<parameter=([^>\n]*)>")
_PARAMETER_CLOSE = "</parameter>"
_TAG_TEXT = re.compile(r"</parameter>|<parameter=|</function>")
_SPACE = re.compile(r"\s*")
_TOP_LEVEL = re.compile(r"</?think>|<tool_call>|<function=")


@dataclass(frozen=True)
class _Read:
    """One call as read from the answer: either a call or the reason it could not be read."""

    source: Source
    call: ToolCall | None = None
    error: str | None = None


@dataclass(frozen=True)
class _Reading:
    """One way to read a Qwen3-Coder function body: its (key, raw value) pairs in order,
    and where the text goes on after `</function>`."""

    params: tuple[tuple[str, str], ...]
    end: int


def request_schemas(tools: Any) -> dict[str, dict[str, Any]] | None:
    """Tool name -> `parameters` schema from a request's OpenAI `tools` list (None: no tools)."""
    if not isinstance(tools, list) or not tools:
        return None
    schemas: dict[str, dict[str, Any]] = {}
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            parameters = function.get("parameters")
            schemas[function["name"]] = dict(parameters) if isinstance(parameters, Mapping) else {}
    return schemas


def parse_response(
    message: Mapping[str, Any], tool_names: Collection[str] | None = None, *, schemas: Schemas | None = None
) -> ParsedResponse:
    """Read an OpenAI chat-completion `choices[0].message` into a typed outcome.

    `tool_names` are the tools the request offered; None skips the unknown-tool check.
    `schemas` (see `request_schemas`) type Qwen3-Coder text values as the engine would.
    """
    structured = message.get("tool_calls") or []
    if structured:
        reads = [_read_structured(i, item) for i, item in enumerate(structured)]
        return _outcome(reads, tool_names)
    parsed = parse_text(_content_text(message.get("content")), tool_names, schemas=schemas)
    if parsed.outcome is ParseOutcome.EMPTY_RESPONSE and message.get("reasoning_content"):
        return ParsedResponse(outcome=ParseOutcome.EMPTY_RESPONSE, error="the answer has only reasoning, no content")
    return parsed


def parse_text(
    text: str | None, tool_names: Collection[str] | None = None, *, schemas: Schemas | None = None
) -> ParsedResponse:
    """Read calls from raw model text, e.g. a `/v1/completions` choice's `text`."""
    reads, content = _read_text(text or "", schemas)
    if not content.strip():
        return ParsedResponse(outcome=ParseOutcome.EMPTY_RESPONSE, error="the answer has no content and no tool call")
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
    if first.call is None or any(r.call is None and r.source == "hermes" for r in reads):
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
    if source != "hermes":
        name = name.strip()  # vLLM keeps a Hermes name as written, blank space included
    if source != "structured" and not _TOOL_NAME.fullmatch(name.strip()):
        # In text, a "name" with tag or JSON characters is a misread (a tag inside a value, a cut
        # rendering), not a call of an unknown tool.
        return _Read(source, error=f"{name.strip()!r} cannot be a tool name")
    try:
        args = decode_arguments(arguments)
        keys = sorted_key_set(args)
    except ArgumentsError as exc:
        return _Read(source, error=f"tool {name!r}: {exc}")
    except RecursionError:  # a structured call's arguments given as an object, not text, are not depth-bounded
        return _Read(source, error=f"tool {name!r}: arguments are nested too deeply to read")
    return _Read(source, call=ToolCall(tool=name, arguments=args, key_set=keys))


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


def _skip_space(text: str, pos: int) -> int:
    match = _SPACE.match(text, pos)
    return match.end() if match else pos


def _read_text(text: str, schemas: Schemas | None) -> tuple[list[_Read], str]:
    """All calls in the text, in order (`<tool_call>` blocks and bare `<function=` blocks), and
    the text that is not reasoning.

    Reasoning: `<think>…</think>` blocks, an unclosed `<think>` with everything after it, and
    everything before a first `</think>` that no `<think>` opened (the template opened it).
    Only tags between calls count: inside a call, `</think>` is the call's text (so reasoning
    that mentions an unclosed `<tool_call>` before a template-opened `</think>` reads as a
    malformed call: stricter, never silently another call). For the same reason a call that could
    not be read keeps a later template-opened `</think>` from making it reasoning: where the
    unreadable call ended is a guess, and the `</think>` may be its text.
    """
    reads: list[_Read] = []
    kept: list[str] = []
    pos = keep_from = 0
    seen_think = False
    while (tag := _TOP_LEVEL.search(text, pos)) is not None:
        name, at = tag.group(0), tag.start()
        if name == "<think>":
            kept.append(text[keep_from:at])
            seen_think = True
            end = text.find("</think>", tag.end())
            if end < 0:
                return reads, "".join(kept)
            pos = keep_from = end + len("</think>")
            continue
        if name == "</think>":
            if not seen_think and not any(read.call is None for read in reads):
                reads, kept, keep_from = [], [], tag.end()
            seen_think = True
            pos = tag.end()
            continue
        if name == _TOOL_CALL_OPEN:
            found, end = _read_block(text, tag.end(), schemas)
        elif _FUNCTION.match(text, at):
            read, end = _read_function(text, at, schemas, wrapped=False)
            found = [read]
        else:
            pos = tag.end()  # prose such as "<function=x" is not a call
            continue
        reads += found
        pos = end
    kept.append(text[keep_from:])
    return reads, "".join(kept)


def _skip_block(text: str, pos: int) -> int:
    """Where reading goes on after an unreadable `<tool_call>` block: after its close, or at
    the next block when that comes first."""
    close = text.find(_TOOL_CALL_CLOSE, pos)
    nxt = text.find(_TOOL_CALL_OPEN, pos)
    if nxt >= 0 and (close < 0 or nxt < close):
        return nxt
    return len(text) if close < 0 else close + len(_TOOL_CALL_CLOSE)


def _read_block(text: str, start: int, schemas: Schemas | None) -> tuple[list[_Read], int]:
    """One `<tool_call>` block from just after its open tag: Qwen3-Coder functions, or Hermes
    JSON. Returns the reads and where the text goes on."""
    pos = _skip_space(text, start)
    if text.startswith(_FUNCTION_OPEN, pos):
        reads: list[_Read] = []
        while True:
            read, end = _read_function(text, pos, schemas, wrapped=True)
            reads.append(read)
            if read.call is None:
                return reads, _skip_block(text, end)
            pos = _skip_space(text, end)
            if not text.startswith(_FUNCTION_OPEN, pos):
                closed = text.startswith(_TOOL_CALL_CLOSE, pos)
                return reads, pos + len(_TOOL_CALL_CLOSE) if closed else pos
    # Hermes, as vLLM reads it: the block's JSON is everything up to the first `</tool_call>` (or
    # the end), so a `</tool_call>` inside a JSON string cuts it (vLLM then reads no call at all).
    close = text.find(_TOOL_CALL_CLOSE, start)
    body = text[start:] if close < 0 else text[start:close]
    end = len(text) if close < 0 else close + len(_TOOL_CALL_CLOSE)
    if not body.strip():
        return [_Read("hermes", error="empty <tool_call> block")], end
    value, problem = parse_problem(body)
    if problem is not None:
        if _ends_inside_string(body):
            # Cut inside a JSON string: where the block ends is unknown, so nothing after it is read
            # as a call (or as the end of reasoning).
            return [_Read("hermes", error=f"<tool_call> block is not valid JSON: {problem}")], len(text)
        nxt = body.find(_TOOL_CALL_OPEN)
        if nxt >= 0:
            return [_Read("hermes", error="<tool_call> block is not closed before the next one")], start + nxt
        return [_Read("hermes", error=f"<tool_call> block is not valid JSON: {problem}")], end
    return [_read_hermes_object(value)], end


def _ends_inside_string(json_text: str) -> bool:
    """Whether JSON text that was cut ends inside a string."""
    in_string = escaped = False
    for char in json_text:
        if escaped:
            escaped = False
        elif char == "\\" and in_string:
            escaped = True
        elif char == '"':
            in_string = not in_string
    return in_string


def _read_hermes_object(item: Any) -> _Read:
    """A Hermes call as vLLM's `hermes` parser takes it: an object with a string `name` and an
    `arguments` key; ours also asks `arguments` to be an object (vLLM passes a list or a JSON string
    on as the call's arguments text, which no client reads as arguments)."""
    if not isinstance(item, dict):
        return _Read("hermes", error="<tool_call> JSON must be an object with 'name' and 'arguments'")
    if "arguments" not in item:
        return _Read("hermes", error="<tool_call> JSON has no 'arguments'")
    if not isinstance(item["arguments"], dict):
        return _Read("hermes", error=f"tool {item.get('name')!r}: 'arguments' must be a JSON object")
    return _make_call("hermes", item.get("name"), item["arguments"])


def _wrapped_follow(text: str, end: int) -> bool:
    """Inside `<tool_call>`, `</function>` is followed by the block's end, another call, or nothing."""
    pos = _skip_space(text, end)
    return pos == len(text) or text.startswith((_TOOL_CALL_CLOSE, _TOOL_CALL_OPEN, _FUNCTION_OPEN), pos)


def _read_function(text: str, start: int, schemas: Schemas | None, *, wrapped: bool) -> tuple[_Read, int]:
    """One Qwen3-Coder `<function=NAME>…</function>` at `start`; returns the read and where the
    text goes on."""
    match = _FUNCTION.match(text, start)
    if match is None:
        return _Read("qwen3_coder", error="<function= tag is cut off before its '>'"), len(text)
    name = match.group(1).strip()
    schema = schemas.get(name) if schemas is not None else None
    properties = _properties(schema) if schemas is not None else None
    follow: Callable[[str, int], bool] = _wrapped_follow if wrapped else (lambda _text, _end: True)
    # A schema that lists no keys (MCP's `"properties": {}`, `additionalProperties` only, `anyOf` of objects)
    # cannot tell a key from text: its tags are read as without a schema (every one starts a parameter, as
    # vLLM reads them), not as all unlisted, which glued every parameter into the first one.
    listing = properties or None
    try:
        reading = _reading(text, match.end(), follow, listing)
    except RecursionError:
        return _Read("qwen3_coder", error=f"tool {name!r}: too many parameters to read"), len(text)
    if reading is None:
        close = text.find(_FUNCTION_CLOSE, match.end())
        return _Read("qwen3_coder", error=f"tool {name!r}: {_diagnose(text, match.end(), name)}"), (
            len(text) if close < 0 else close + len(_FUNCTION_CLOSE)
        )
    arguments: dict[str, Any] = {}
    for key, raw in reading.params:
        if key in arguments:
            return _Read("qwen3_coder", error=f"tool {name!r}: parameter {key!r} given twice"), reading.end
        arguments[key] = typed_value(_trim_newlines(raw), properties, key)
    return _make_call("qwen3_coder", name, arguments), reading.end


def _reading(
    text: str, start: int, follow: Callable[[str, int], bool], properties: Mapping[str, Any] | None
) -> _Reading | None:
    """The function body at `start` read as `<parameter=KEY>value</parameter>` pairs up to
    `</function>`, or None when it cannot be read so.

    A `<parameter=KEY>` tag whose KEY the schema lists (any KEY without a schema) always starts a
    parameter: it ends the value before it, closed or not. Otherwise a value ends at a
    `</parameter>` after which the whole rest of the body reads. Whether a value fits its type
    plays no part: one that does not is text. Of the readings, the one with the fewest values
    holding tag text wins, then the fewest keys the schema does not list, then the one that reads
    furthest: text without tag text inside values reads as vLLM reads it, and a file holding a
    tool-call template (`</parameter>` and unlisted `<parameter=…>` lines) is one value, where vLLM
    splits it into spurious keys.
    """
    memo: dict[int, tuple[tuple[int, int, int], _Reading] | None] = {}

    def body(pos: int) -> tuple[tuple[int, int, int], _Reading] | None:
        if pos not in memo:
            memo[pos] = None
            at = _skip_space(text, pos)
            if text.startswith(_FUNCTION_CLOSE, at):
                end = at + len(_FUNCTION_CLOSE)
                memo[pos] = ((0, 0, -end), _Reading((), end)) if follow(text, end) else None
            elif (tag := _PARAMETER.match(text, at)) is not None:
                memo[pos] = value(_key(tag.group(1)), tag.end())
        return memo[pos]

    def value(key: str, start: int) -> tuple[tuple[int, int, int], _Reading] | None:
        stop = _starting_tag(text, start, properties)
        ends = [(close, close + len(_PARAMETER_CLOSE)) for close in _closes(text, start, stop)]
        if stop < len(text):
            ends.append((stop, stop))  # not closed: the next listed key's tag ends it
        unlisted = int(properties is not None and key not in properties)
        best: tuple[tuple[int, int, int], _Reading] | None = None
        for end, resume in ends:
            rest = body(resume)
            if rest is None:
                continue
            raw = text[start:end]
            score = (rest[0][0] + int(_TAG_TEXT.search(raw) is not None), rest[0][1] + unlisted, -rest[1].end)
            if best is None or score < best[0]:
                best = score, _Reading(((key, raw), *rest[1].params), rest[1].end)
        return best

    found = body(start)
    return None if found is None else found[1]


def _closes(text: str, start: int, stop: int) -> Iterator[int]:
    """The `</parameter>` tags between `start` and `stop`, in order."""
    close = text.find(_PARAMETER_CLOSE, start)
    while 0 <= close < stop:
        yield close
        close = text.find(_PARAMETER_CLOSE, close + 1)


def _key(tag: str) -> str:
    """A parameter's key as vLLM reads it from `<parameter=KEY>`: blank space after `=` is layout."""
    return tag.lstrip()


def _starting_tag(text: str, start: int, properties: Mapping[str, Any] | None) -> int:
    """Where the first `<parameter=KEY>` after `start` that always starts a parameter is (a KEY the
    schema lists, any without a schema), or the end of the text."""
    for tag in _PARAMETER.finditer(text, start):
        if properties is None or _key(tag.group(1)) in properties:
            return tag.start()
    return len(text)


def _diagnose(text: str, start: int, name: str) -> str:
    """Why a function body has no reading, found by reading it the simple way."""
    pos = _skip_space(text, start)
    if pos == len(text):
        return f"<function={name}> is not closed (the text ends after its name)"
    if not text.startswith(_FUNCTION_CLOSE, pos) and not _PARAMETER.match(text, pos):
        return f"the body of <function={name}> is not <parameter=…> tags"
    while (tag := _PARAMETER.match(text, pos)) is not None:
        close = text.find(_PARAMETER_CLOSE, tag.end())
        if close < 0:
            return f"<parameter={tag.group(1).strip()}> is not closed"
        pos = _skip_space(text, close + len(_PARAMETER_CLOSE))
    if pos == len(text):
        return f"<function={name}> is not closed"
    if text.startswith(_FUNCTION_CLOSE, pos):
        return "text after </function> does not close the <tool_call> block"
    return f"unexpected text in <function={name}> after a </parameter>"


def _trim_newlines(raw: str) -> str:
    """One leading and one trailing newline are layout, as in Qwen3-Coder's own parser."""
    return raw.removeprefix("\n").removesuffix("\n")


def _properties(schema: Mapping[str, Any] | None) -> Mapping[str, Any]:
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return properties if isinstance(properties, Mapping) else {}

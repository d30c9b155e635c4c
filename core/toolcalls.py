"""The one tool-call parser shared by replay and the serve gateway (DESIGN §3).

A model answer is read in this order:

1. the structured `tool_calls` field of the chat message (what vLLM's tool parser fills);
2. otherwise the text of `content`: Hermes blocks `<tool_call>{"name":..,"arguments":..}</tool_call>`
   (the LAST block may be unclosed: generation often stops on the closing tag) and
   Qwen3-Coder's `<function=NAME><parameter=KEY>value</parameter></function>`, bare or
   wrapped in `<tool_call>`. In Hermes JSON, `parameters` is read when `arguments` is absent
   (Llama-style output), and a call without either has no arguments (`{}`).

Never silently wrong: a reading may be stricter than vLLM's own parsers (a typed
`malformed_call`), but never `ok` with another tool or key set than the text holds.

* Hermes JSON is decoded with a JSON scanner, so `</tool_call>` inside a string is text.
* A Qwen3-Coder function must end with `</function>` (a cut-off call is malformed, not a
  call with fewer keys), and its body must be `<parameter=…>` tags (a JSON body is malformed).
  A parameter ends at a `</parameter>` after which the structure goes on (another
  `<parameter=`, `</function>`, then inside `<tool_call>` only `</tool_call>`, another call or
  the end), so values may hold tag-like text. vLLM also ends an unclosed parameter at the
  next `<parameter=`; when the text allows more than one reading (that one included, unless
  the tool's schema has no property of that name) the call is malformed as ambiguous.
* Qwen3-Coder values are typed by the request's tool schema as vLLM's qwen3_coder parser
  does (`coerce_to_schema_type`): a string property stays text (`null`, `42` included), an
  integer/number/boolean/null property is converted when it can be, an object/array
  property is read as JSON or a Python literal, also from inside a JSON string
  (`"{'a': 1}"`, what a template writing `json.dumps(str(value))` leaves). A key the schema
  does not list stays text.
* Inside a value, a `<parameter=` that starts a line opens a nested level that a later
  `</parameter>` closes, as vLLM tracks their depth: a file being written that holds a
  tool-call template is one value, not cut at the inner close nor split into its keys.
  Without schemas (none passed) a value that parses as JSON is decoded, others kept as text.

Reasoning is not an action: `reasoning_content` is never searched for calls, and in
`content` `<think>…</think>` blocks (and everything before a first `</think>` that no `<think>`
opened: the template opened it) are skipped; think tags inside a call are the call's text.

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
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from core.keyset import ArgumentsError, decode_arguments, sorted_key_set
from core.records import ParsedResponse, ParseOutcome, ToolCall
from core.toolvalues import DECODE_ERRORS, NOT_A_VALUE, coerce, schema_types, typed_value

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
# A `<parameter=` that starts a line opens a nested level inside a value (vLLM's
# "structural" tag); `</parameter>` closes one.
_PARAMETER_OPEN = "<parameter="
_NESTING = re.compile(r"(?<=\n)<parameter=|</parameter>")
_SPACE = re.compile(r"\s*")
_TOP_LEVEL = re.compile(r"</?think>|<tool_call>|<function=")
_JSON = json.JSONDecoder()


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
    if source != "structured" and not _TOOL_NAME.fullmatch(name.strip()):
        # In text, a "name" with tag or JSON characters is a misread (a tag inside a value, a cut
        # rendering), not a call of an unknown tool.
        return _Read(source, error=f"{name.strip()!r} cannot be a tool name")
    try:
        args = decode_arguments(arguments)
    except ArgumentsError as exc:
        return _Read(source, error=f"tool {name!r}: {exc}")
    except RecursionError:
        return _Read(source, error=f"tool {name!r}: arguments are nested too deeply to read")
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
    malformed call: stricter, never silently another call).
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
            if not seen_think:
                reads, kept, keep_from, seen_think = [], [], tag.end(), True
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
    JSON (an object, or a list of objects). Returns the reads and where the text goes on."""
    pos = _skip_space(text, start)
    if pos == len(text) or text.startswith(_TOOL_CALL_CLOSE, pos):
        return [_Read("hermes", error="empty <tool_call> block")], _skip_block(text, pos)
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
    try:
        value, end = _JSON.raw_decode(text, pos)
    except DECODE_ERRORS as exc:
        nxt, close = text.find(_TOOL_CALL_OPEN, pos), text.find(_TOOL_CALL_CLOSE, pos)
        tags = [tag for tag in (nxt, close) if tag >= 0]
        if tags and _inside_json_string(text, pos, min(tags)):
            # The next tag is text inside this block's JSON: where the block ends is unknown, so
            # nothing after it can be read as a call (or as the end of reasoning).
            return [_Read("hermes", error=f"<tool_call> block is not valid JSON: {exc}")], len(text)
        if nxt >= 0 and (close < 0 or nxt < close):
            return [_Read("hermes", error="<tool_call> block is not closed before the next one")], nxt
        return [_Read("hermes", error=f"<tool_call> block is not valid JSON: {exc}")], _skip_block(text, pos)
    after = _skip_space(text, end)
    if text.startswith(_TOOL_CALL_OPEN, after):
        return [_Read("hermes", error="<tool_call> block is not closed before the next one")], after
    if after < len(text) and not text.startswith(_TOOL_CALL_CLOSE, after):
        return [_Read("hermes", error="text after the JSON in a <tool_call> block")], _skip_block(text, after)
    items = value if isinstance(value, list) and value else [value]
    return [_read_hermes_object(item) for item in items], min(len(text), after + len(_TOOL_CALL_CLOSE))


def _inside_json_string(text: str, start: int, at: int) -> bool:
    """Whether position `at` falls inside a JSON string of the JSON text that begins at `start`."""
    in_string = escaped = False
    for char in text[start:at]:
        if escaped:
            escaped = False
        elif char == "\\" and in_string:
            escaped = True
        elif char == '"':
            in_string = not in_string
    return in_string


def _read_hermes_object(item: Any) -> _Read:
    if not isinstance(item, dict):
        return _Read("hermes", error="<tool_call> JSON must be an object with 'name' and 'arguments'")
    arguments = item.get("arguments", item.get("parameters", {}))
    return _make_call("hermes", item.get("name"), arguments)


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
    try:
        readings = _readings(text, match.end(), follow, properties)
    except RecursionError:
        return _Read("qwen3_coder", error=f"tool {name!r}: too many parameters to read"), len(text)
    if not readings:
        close = text.find(_FUNCTION_CLOSE, match.end())
        return _Read("qwen3_coder", error=f"tool {name!r}: {_diagnose(text, match.end(), name)}"), (
            len(text) if close < 0 else close + len(_FUNCTION_CLOSE)
        )
    if len(readings) > 1:
        ways = " or ".join(str([key for key, _ in r.params]) for r in readings)
        return _Read("qwen3_coder", error=(
            f"tool {name!r}: ambiguous <parameter=> tags, the text reads as keys {ways} "
            "(a parameter not closed, or a value holding tag text)"
        )), readings[0].end
    reading = readings[0]
    arguments: dict[str, Any] = {}
    for key, raw in reading.params:
        if key in arguments:
            return _Read("qwen3_coder", error=f"tool {name!r}: parameter {key!r} given twice"), reading.end
        arguments[key] = typed_value(_trim_newlines(raw), properties, key)
    return _make_call("qwen3_coder", name, arguments), reading.end


def _readings(
    text: str, start: int, follow: Callable[[str, int], bool], properties: Mapping[str, Any] | None
) -> list[_Reading]:
    """Up to two readings of the function body at `start` (two means: ambiguous).

    A value ends at the first `</parameter>` after which the body goes on. Preferred, in order:
    with a schema, readings whose keys are all listed, values fit their types, and values are
    nested (every `<parameter=…>` at the start of a line inside a value is closed inside it, as
    vLLM tracks their depth: a file holding a tool-call template is one value); then listed and
    fitting; without a schema, nested; then any. A value may itself hold
    `</parameter><parameter=x>`. The other reading is vLLM's tolerance of an unclosed tag: the
    value ends just before a `<parameter=KEY>` that comes before any `</parameter>`, unless the
    schema lists no KEY; it is never a nested reading, so it stays ambiguous with the closed one.
    """

    def read(fits: Callable[[str, str], bool], nested: bool) -> list[_Reading]:
        memo: dict[int, list[_Reading]] = {}

        def body(pos: int) -> list[_Reading]:
            if pos in memo:
                return memo[pos]
            found: list[_Reading] = []
            at = _skip_space(text, pos)
            if text.startswith(_FUNCTION_CLOSE, at):
                end = at + len(_FUNCTION_CLOSE)
                if follow(text, end):
                    found.append(_Reading((), end))
            elif (tag := _PARAMETER.match(text, at)) is not None:
                key = tag.group(1).strip()
                depth = _Depth(text, tag.end())
                for stop, resume, unclosed in _value_ends(text, tag.end(), properties):
                    if nested and (unclosed or not depth.closed_at(stop)):
                        continue
                    raw = text[tag.end() : stop]
                    rests = body(resume) if fits(key, raw) else []
                    found += [_Reading(((key, raw), *rest.params), rest.end) for rest in rests]
                    if len(found) > 1 or (rests and not unclosed):
                        break
            memo[pos] = found[:2]
            return memo[pos]

        return body(start)

    passes: list[tuple[Callable[[str, str], bool], bool]] = []
    if properties is not None:
        fitting = lambda key, raw: _fits(_trim_newlines(raw), properties, key)  # noqa: E731
        passes += [(fitting, True), (fitting, False)]
    else:
        passes.append((lambda _key, _raw: True, True))
    passes.append((lambda _key, _raw: True, False))
    for fits, nested in passes:
        readings = read(fits, nested)
        if readings:
            return readings
    return []


class _Depth:
    """The nesting of a value that starts at `start`, read once as its candidate ends move on:
    every `<parameter=` that starts a line (or the value) opens a level, `</parameter>` closes
    one (a close with none open is text)."""

    def __init__(self, text: str, start: int) -> None:
        self.text, self.pos, self.level = text, start, 0
        if text.startswith(_PARAMETER_OPEN, start):
            self.pos, self.level = start + len(_PARAMETER_OPEN), 1

    def closed_at(self, stop: int) -> bool:
        """Whether every level opened before `stop` (a later end than the last asked) is closed."""
        for tag in _NESTING.finditer(self.text, self.pos, stop):
            self.level = self.level + 1 if tag.group(0) == _PARAMETER_OPEN else max(0, self.level - 1)
        self.pos = max(self.pos, stop)
        return self.level == 0


def _fits(text: str, properties: Mapping[str, Any], key: str) -> bool:
    """Whether a value is one the schema allows for `key` (a listed key, and a value of its type)."""
    if key not in properties:
        return False
    types = schema_types(properties[key])
    return "string" in types or any(coerce(text, kind) is not NOT_A_VALUE for kind in types)


def _value_ends(text: str, start: int, properties: Mapping[str, Any] | None) -> Iterator[tuple[int, int, bool]]:
    """Candidate ends of a value starting at `start`, in order: (end of the value, where the
    body goes on, whether this reads the parameter as unclosed)."""
    first_close = text.find(_PARAMETER_CLOSE, start)
    tag = _PARAMETER.search(text, start)
    unclosed = tag is not None and (first_close < 0 or tag.start() < first_close)
    if tag is not None and unclosed and (properties is None or tag.group(1).strip() in properties):
        yield tag.start(), tag.start(), True
    close = first_close
    while close >= 0:
        yield close, close + len(_PARAMETER_CLOSE), False
        close = text.find(_PARAMETER_CLOSE, close + 1)


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

"""Property-based round trips of the tool-call parser (issue 14: never silently wrong).

A random call rendered in each form the parser reads (structured `tool_calls`, Hermes
`<tool_call>` JSON, Qwen3-Coder XML as its chat template writes it) parses back to the same
call and key set; every truncation of a rendering parses to an outcome that holds no call, a
typed error, or the same call (a complete prefix) — never to a different complete call.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core.keyset import sorted_key_set
from core.records import ParsedResponse, ParseOutcome
from core.toolcalls import parse_response, parse_text

# Every tag the formats use, whole and cut, in values and keys of the generated calls. The
# XML parameter tag names a key the schema does not list (a listed one is ambiguous by nature:
# see test_listed_parameter_tag_in_a_value_is_ambiguous_not_wrong).
TAGS = ["<tool_call>", "</tool_call>", "<function=f>", "</function>", "<parameter=not_a_key>", "</parameter>",
        "<function=", "<parameter=", "<think>", "</think>", "{", "}", "[", '"', "\\", "\n", " "]
TOOLS = ["search", "send_invoice", "f"]

names = st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True)
texts = st.lists(st.one_of(st.sampled_from(TAGS), st.text(max_size=4)), max_size=6).map("".join)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False), texts)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.one_of(names, texts), inner, max_size=3),
    st.lists(st.dictionaries(names, inner, max_size=3), max_size=3)), max_leaves=12)
arguments = st.dictionaries(names, values, max_size=4)
calls = st.tuples(st.sampled_from(TOOLS), arguments)

_BOUNDARY = re.compile(r"</parameter>\s*(<parameter=[^>\n]*>|</function>)")
# vLLM's nesting inside a value: a `<parameter=` starting a line opens, `</parameter>` closes.
_NESTING = re.compile(r"(?:^|(?<=\n))<parameter=|</parameter>")


def schema_for(args: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The tool schema a request would carry: each parameter typed as its value."""
    kinds = {type(None): "null", bool: "boolean", int: "integer", float: "number", str: "string",
             list: "array", dict: "object"}
    properties = {key: {"type": kinds[type(value)]} for key, value in args.items()}
    return {tool: {"type": "object", "properties": properties} for tool in TOOLS}


def hermes(tool: str, args: dict[str, Any]) -> str:
    return "<tool_call>\n" + json.dumps({"name": tool, "arguments": args}, ensure_ascii=False) + "\n</tool_call>"


def qwen3_xml(tool: str, args: dict[str, Any]) -> str:
    """As Qwen3-Coder's chat template writes a call (strings raw, other values as JSON)."""
    params = "".join(f"<parameter={key}>\n{value if isinstance(value, str) else json.dumps(value)}\n</parameter>\n"
                     for key, value in args.items())
    return f"<tool_call>\n<function={tool}>\n{params}</function>\n</tool_call>"


def assert_same_call(parsed: ParsedResponse, tool: str, args: dict[str, Any]) -> None:
    assert parsed.outcome is ParseOutcome.OK, parsed.error
    assert parsed.first is not None
    assert parsed.first.tool == tool
    assert parsed.first.arguments == args
    assert parsed.first.key_set == sorted_key_set(args)


def unnested(value: str) -> bool:
    """A value, as the template writes it (on its own lines), with a line-start `<parameter=`
    left open: vLLM reads on past its `</parameter>`, so the text is also another call's."""
    depth = 0
    for tag in _NESTING.finditer(f"\n{value}\n"):
        depth = depth + 1 if tag.group(0) != "</parameter>" else max(0, depth - 1)
    return depth > 0


def as_json(text: str) -> Any:
    """How a value is typed without a schema: JSON when it parses as JSON, else the text."""
    try:
        value = json.loads(text)
        json.dumps(value, allow_nan=False)
    except ValueError:
        return text
    return value


def holds_boundary(value: Any) -> bool:
    """An argument whose rendered text (a string as it is, other values as JSON) holds
    `</parameter>` then another tag, or leaves a nested `<parameter=` open: the XML rendering may
    also be the rendering of another call (as vLLM reads it)."""
    if isinstance(value, dict):
        return any(holds_boundary(v if isinstance(v, str) else json.dumps(v)) for v in value.values())
    text = value if isinstance(value, str) else json.dumps(value)
    return _BOUNDARY.search(text) is not None or unnested(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls)
def test_structured_round_trip(call: tuple[str, dict[str, Any]]) -> None:
    tool, args = call
    message = {"content": None, "tool_calls": [{"type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}]}
    assert_same_call(parse_response(message, TOOLS), tool, args)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls)
def test_hermes_round_trip(call: tuple[str, dict[str, Any]]) -> None:
    """Except that a `</tool_call>` inside a JSON string ends the block, as vLLM reads it: then the
    answer is malformed (vLLM reads no call), never another call."""
    tool, args = call
    parsed = parse_text(hermes(tool, args), TOOLS)
    if "</tool_call>" in json.dumps(args, ensure_ascii=False):
        assert parsed.outcome is ParseOutcome.MALFORMED_CALL and parsed.calls == [], parsed
    else:
        assert_same_call(parsed, tool, args)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls)
def test_qwen3_xml_round_trip(call: tuple[str, dict[str, Any]]) -> None:
    tool, args = call
    parsed = parse_text(qwen3_xml(tool, args), TOOLS, schemas=schema_for(args))
    if holds_boundary(args):
        assert parsed.outcome is not ParseOutcome.OK or parsed.first is not None and parsed.first.tool == tool
        return
    assert_same_call(parsed, tool, args)


def assert_truncation_is_honest(parsed: ParsedResponse, tool: str, args: dict[str, Any]) -> None:
    if parsed.outcome in (ParseOutcome.OK, ParseOutcome.MULTIPLE_CALLS, ParseOutcome.UNKNOWN_TOOL):
        assert parsed.first is not None
        assert (parsed.first.tool, parsed.first.arguments) == (tool, args), "a cut text read as another call"
    else:
        assert parsed.outcome in (ParseOutcome.NO_CALL, ParseOutcome.EMPTY_RESPONSE, ParseOutcome.MALFORMED_CALL)
        assert parsed.calls == []


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls)
# Found in CI: a Hermes rendering cut inside a key that holds `</tool_call>` and `<function=<tool_call>`
# once read as a call of a tool named '<tool_call'.
@example(("search", {"_": {"_": None, "</tool_call></think><function=<tool_call></function>": None}}))
# and one cut after a key `</tool_call>`: reading went on after it, a `</think>` there ended
# "reasoning", and `<function=f></function>` read as a complete call of `f`.
@example(("search", {"_": {"a": None, "_": [{"</tool_call>": None}], "</think><function=f></function>": None}}))
# Found in CI: a Qwen3-Coder rendering cut inside an object value holding `</function></tool_call></think>`: the
# unclosed function was skipped to that `</function>`, the `</think>` ended "reasoning", and `<function=f>` read.
@example(("search", {"_": {"</function></tool_call></think><function=f></function>": None}}))
def test_every_truncation_is_a_typed_error_or_the_same_call(call: tuple[str, dict[str, Any]]) -> None:
    tool, args = call
    schemas = schema_for(args)
    for rendered, boundary in ((hermes(tool, args), False), (qwen3_xml(tool, args), holds_boundary(args))):
        for cut in range(len(rendered)):
            parsed = parse_text(rendered[:cut], TOOLS, schemas=schemas)
            if boundary and parsed.first is not None and parsed.first.arguments != args:
                continue  # the cut text is itself the rendering of another call
            assert_truncation_is_honest(parsed, tool, args)
    encoded = json.dumps(args)
    for cut in range(1, len(encoded)):  # "" is how servers send "no arguments"
        message = {"tool_calls": [{"type": "function", "function": {"name": tool, "arguments": encoded[:cut]}}]}
        assert_truncation_is_honest(parse_response(message, TOOLS), tool, args)


@settings(deadline=None)
@given(st.sampled_from(["a", "b"]), texts.filter(lambda t: "parameter" not in t), texts)
def test_a_listed_parameter_tag_in_a_value_starts_that_parameter(key: str, before: str, after: str) -> None:
    """`<parameter=b>` inside a's value, b listed (or no schema), starts b, as vLLM reads it: the
    answer has both keys, or is malformed; never a's value holding the tag."""
    other = "b" if key == "a" else "a"
    value = f"{before}<parameter={other}>{after}"
    text = qwen3_xml("f", {key: value})
    for schemas in (None, {"f": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}}):
        parsed = parse_text(text, TOOLS, schemas=schemas)
        if parsed.outcome is ParseOutcome.OK:
            assert parsed.first is not None and {"a", "b"} <= set(parsed.first.arguments), parsed
        else:
            assert parsed.outcome is ParseOutcome.MALFORMED_CALL and parsed.calls == []


plain = st.text(st.characters(blacklist_characters="<>", blacklist_categories=("Cs",)), max_size=8)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.tuples(st.sampled_from(TOOLS), st.dictionaries(names.filter(lambda n: n not in ("path", "content")), plain,
                                                          max_size=3)), plain, plain, st.booleans())
def test_a_file_holding_a_rendered_call_is_written_whole(inner: tuple[str, dict[str, Any]], head: str, tail: str,
                                                         content_first: bool) -> None:
    """A value holding a whole Qwen3-Coder call of keys the schema does not list (a file with a
    tool-call template) is one value, never cut at the inner close or split into its keys (vLLM
    0.32 splits it; without a schema every `<parameter=` starts a parameter, as in vLLM)."""
    content = f"{head}\n{qwen3_xml(*inner)}\n{tail}"
    args = {"content": content, "path": "t.md"} if content_first else {"path": "t.md", "content": content}
    schemas = {"f": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}
    assert_same_call(parse_text(qwen3_xml("f", args), TOOLS, schemas=schemas), "f", args)

"""The tool-call parser where its outcome is decided: the documented precedence (unknown_tool over
multiple_calls), non-finite numbers and 1/0 booleans typed by the schema, and `arguments` over
`parameters` in Hermes JSON."""

from __future__ import annotations

import json

import pytest

from core.records import ParseOutcome
from core.toolcalls import parse_response, parse_text, request_schemas
from core.toolvalues import NOT_A_VALUE, coerce, schema_types, typed_value


def hermes(*calls: dict[str, object]) -> str:
    return "".join(f"<tool_call>{json.dumps(c)}</tool_call>" for c in calls)


def test_an_unknown_first_tool_followed_by_a_second_call_is_unknown_tool() -> None:
    parsed = parse_text(hermes({"name": "nope", "arguments": {}}, {"name": "search", "arguments": {"q": 1}}),
                        ["search"])
    assert parsed.outcome is ParseOutcome.UNKNOWN_TOOL
    assert [c.tool for c in parsed.calls] == ["nope", "search"]  # all kept, the first scored
    assert parsed.error == "call 1: tool 'nope' was not offered"


def test_a_known_first_tool_with_an_unknown_second_is_multiple_calls_naming_the_second() -> None:
    parsed = parse_text(hermes({"name": "search", "arguments": {}}, {"name": "nope", "arguments": {}}), ["search"])
    assert parsed.outcome is ParseOutcome.MULTIPLE_CALLS
    assert parsed.error == "2 calls in one turn; the first is scored; call 2: tool 'nope' was not offered"


def test_without_offered_tools_no_call_is_unknown() -> None:
    parsed = parse_text(hermes({"name": "nope", "arguments": {}}))
    assert parsed.outcome is ParseOutcome.OK and parsed.error is None
    assert parse_text(hermes({"name": "nope", "arguments": {}}), []).outcome is ParseOutcome.UNKNOWN_TOOL


def test_an_unreadable_first_call_is_malformed_even_before_a_good_one() -> None:
    parsed = parse_text("<tool_call>{oops}</tool_call>" + hermes({"name": "search", "arguments": {}}), ["search"])
    assert parsed.outcome is ParseOutcome.MALFORMED_CALL and parsed.calls == []
    assert parsed.error is not None and parsed.error.endswith("not scored, though readable: search")


def test_one_call_is_ok_and_structured_calls_follow_the_same_precedence() -> None:
    assert parse_text(hermes({"name": "search", "arguments": {}}), ["search"]).outcome is ParseOutcome.OK
    message = {"tool_calls": [{"function": {"name": "nope", "arguments": "{}"}},
                              {"function": {"name": "search", "arguments": "{}"}}]}
    parsed = parse_response(message, ["search"])
    assert parsed.outcome is ParseOutcome.UNKNOWN_TOOL and parsed.source == "structured"


def test_arguments_win_over_parameters_and_a_call_without_them_is_malformed_as_vllm_reads_none() -> None:
    both = parse_text(hermes({"name": "f", "arguments": {"a": 1}, "parameters": {"b": 2}}))
    assert both.outcome is ParseOutcome.OK and both.calls[0].arguments == {"a": 1}
    for without in ({"name": "f", "parameters": {"b": 2}}, {"name": "f"}):
        parsed = parse_text(hermes(without))
        assert parsed.outcome is ParseOutcome.MALFORMED_CALL and parsed.calls == []
        assert parsed.error is not None and "no 'arguments'" in parsed.error
    null_arguments = parse_text(hermes({"name": "f", "arguments": None, "parameters": {"b": 2}}))
    assert null_arguments.outcome is ParseOutcome.MALFORMED_CALL


NUMBER = {"properties": {"x": {"type": "number"}}}
BOOLEAN = {"properties": {"x": {"type": "boolean"}}}
INTEGER = {"properties": {"x": {"type": "integer"}}}


def qwen(value: str) -> str:
    return f"<tool_call>\n<function=f>\n<parameter=x>\n{value}\n</parameter>\n</function>\n</tool_call>"


@pytest.mark.parametrize("text", ["inf", "-inf", "nan", "NaN", "Infinity", "1e400"])
def test_non_finite_numbers_are_not_numbers(text: str) -> None:
    assert coerce(text, "number") is NOT_A_VALUE
    parsed = parse_text(qwen(text), ["f"], schemas={"f": NUMBER})
    assert parsed.outcome is ParseOutcome.OK and parsed.calls[0].arguments == {"x": text}  # kept as text


@pytest.mark.parametrize("text, value", [("1.5", 1.5), ("2.0", 2), ("-0.25", -0.25), ("1e3", 1000), ("7", 7)])
def test_finite_numbers_and_whole_numbers_as_integers(text: str, value: float) -> None:
    got = coerce(text, "number")
    assert got == value and type(got) is type(value)
    assert parse_text(qwen(text), ["f"], schemas={"f": NUMBER}).calls[0].arguments == {"x": value}


@pytest.mark.parametrize("text, value", [("1", True), ("0", False), ("true", True), ("FALSE", False), (" True ", True),
                                         ("2", NOT_A_VALUE), ("yes", NOT_A_VALUE), ("", NOT_A_VALUE)])
def test_booleans_take_one_and_zero(text: str, value: object) -> None:
    assert coerce(text, "boolean") is value


def test_one_and_zero_for_a_boolean_parameter_are_booleans_not_integers() -> None:
    for text, value in (("1", True), ("0", False)):
        parsed = parse_text(qwen(text), ["f"], schemas={"f": BOOLEAN})
        got = parsed.calls[0].arguments["x"]
        assert got is value
    assert parse_text(qwen("1"), ["f"], schemas={"f": INTEGER}).calls[0].arguments["x"] == 1
    assert type(parse_text(qwen("1"), ["f"], schemas={"f": INTEGER}).calls[0].arguments["x"]) is int


def test_integer_null_and_union_types() -> None:
    assert coerce("12", "integer") == 12 and coerce("1.5", "integer") is NOT_A_VALUE
    assert coerce("null", "null") is None and coerce("NULL", "null") is None and coerce("nil", "null") is NOT_A_VALUE
    union = {"x": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}
    assert typed_value("null", union, "x") is None and typed_value("3", union, "x") == 3
    assert typed_value("abc", union, "x") == "abc"
    assert typed_value("3", {"x": {"type": "string"}}, "x") == "3"
    assert typed_value("3", {"y": {"type": "integer"}}, "x") == "3"  # a key the schema does not list
    assert typed_value("[1, 2]", None, "x") == [1, 2] and typed_value("plain", None, "x") == "plain"


def test_schema_types_read_aliases_enums_and_combinators() -> None:
    assert schema_types({"type": "INT"}) == {"integer"}
    assert schema_types({"type": ["float", "null"]}) == {"number", "null"}
    assert schema_types({"enum": [1, "a", None, True, 1.5, [1], {"a": 1}]}) == {
        "integer", "string", "null", "boolean", "number", "array", "object"}
    assert schema_types({"oneOf": [{"type": "bool"}], "allOf": [{"type": "dict"}]}) == {"boolean", "object"}
    assert schema_types({}) == {"string"} and schema_types("x") == {"string"}


def test_request_schemas_keep_each_offered_tools_parameters() -> None:
    tools = [{"type": "function", "function": {"name": "a", "parameters": {"properties": {"q": {}}}}},
             {"type": "function", "function": {"name": "b"}}, {"function": {"name": 3}}, "junk"]
    assert request_schemas(tools) == {"a": {"properties": {"q": {}}}, "b": {}}
    assert request_schemas([]) is None and request_schemas(None) is None


def test_content_parts_are_read_as_their_text_parts_only() -> None:
    call = hermes({"name": "search", "arguments": {}})
    parts = [{"type": "text"}, {"type": "text", "text": call}, {"type": "image_url", "text": "<tool_call>x"}, "junk",
             {"text": "<tool_call>y"}]
    parsed = parse_response({"content": parts}, ["search"])
    assert parsed.outcome is ParseOutcome.OK and [c.tool for c in parsed.calls] == ["search"]
    assert parse_response({"content": [{"type": "text"}]}).outcome is ParseOutcome.EMPTY_RESPONSE
    # content that is neither text nor parts is read as its string
    assert parse_response({"content": (call,)}, ["search"]).outcome is ParseOutcome.OK


G = '<tool_call>{"name": "g", "arguments": {}}</tool_call>'
H = '<tool_call>{"name": "h", "arguments": {}}</tool_call>'
UNREADABLE = "<tool_call><function=f><parameter=x>1</function>"  # x is never closed


@pytest.mark.parametrize("text, readable", [
    (UNREADABLE + "</tool_call>" + G, "g"),  # on after the block's close
    (UNREADABLE + "</tool_call>" + G + H, "g, h"),  # the first close, not the last
    (UNREADABLE + " " + G + H, "g, h"),  # the block is not closed before the next: on at the next, the first of them
    (UNREADABLE + "<think></tool_call>" + G, "g"),  # the block's text is not read again (its `<think>` opens nothing)
    (UNREADABLE + "</tool_call></think>" + G, "g"),  # a template's `</think>` after it does not make it reasoning
    (UNREADABLE + "</tool_call><function=h>\n</function></tool_call>", "h"),  # the first close, so the bare call is read
    ('<tool_call>{"name": "g", "arguments": {"a": "x\\n"}, oops</tool_call>' + H, "h"),  # a string that closed
])
def test_reading_goes_on_after_an_unreadable_block(text: str, readable: str) -> None:
    parsed = parse_text(text, ["f", "g", "h"])
    assert parsed.outcome is ParseOutcome.MALFORMED_CALL and parsed.calls == []
    assert parsed.error is not None and parsed.error.startswith("call 1: ")
    assert parsed.error.endswith(f"; not scored, though readable: {readable}")


@pytest.mark.parametrize("text, why", [
    ("<function=f>", "<function=f> is not closed (the text ends after its name)"),
    ("<function=f>hello</function>", "the body of <function=f> is not <parameter=…> tags"),
    ("<function=f>x<function=></function>", "the body of <function=f> is not <parameter=…> tags"),  # on after its close
    ("</function> <function=f>hello</function>", "the body of <function=f> is not <parameter=…> tags"),
    ("<function=f><parameter=x>1", "<parameter=x> is not closed"),
    ("<function=f><parameter= x >1", "<parameter=x> is not closed"),
    ("<function=f><parameter=x>1</parameter>", "<function=f> is not closed"),
    ("<function=f><parameter=x>1</parameter>  <parameter=y>2</parameter>\n", "<function=f> is not closed"),
    ("<tool_call><function=f><parameter=x>1</parameter></function> junk</tool_call>",
     "text after </function> does not close the <tool_call> block"),
    ("<function=f><parameter=x>1</parameter> junk </function>", "unexpected text in <function=f> after a </parameter>"),
    ("<function=f><parameter=x>1</parameter> junk <parameter=y>2</parameter>",
     "unexpected text in <function=f> after a </parameter>"),  # x ends at its first close, not its last
])
def test_an_unreadable_function_says_why(text: str, why: str) -> None:
    parsed = parse_text(text, ["f"])
    assert parsed.outcome is ParseOutcome.MALFORMED_CALL and parsed.source == "qwen3_coder"
    assert parsed.error == f"call 1: tool 'f': {why}"


@pytest.mark.parametrize("body, why", [
    ("[1]", "<tool_call> JSON must be an object with 'name' and 'arguments'"),
    ('"text"', "<tool_call> JSON must be an object with 'name' and 'arguments'"),
    ('{"name": "g"}', "<tool_call> JSON has no 'arguments'"),
    ('{"name": "g", "arguments": [1]}', "tool 'g': 'arguments' must be a JSON object"),
])
def test_an_unreadable_hermes_block_makes_the_answer_malformed_wherever_it_is(body: str, why: str) -> None:
    """vLLM's `hermes` parser returns no call when any block cannot be read, so a readable first call is not scored."""
    alone = parse_text(f"<tool_call>{body}</tool_call>", ["g"])
    assert (alone.outcome, alone.source, alone.error) == (ParseOutcome.MALFORMED_CALL, "hermes", f"call 1: {why}")
    after = parse_text(G + f"<tool_call>{body}</tool_call>", ["g"])
    assert (after.outcome, after.calls, after.source) == (ParseOutcome.MALFORMED_CALL, [], "hermes")
    assert after.error == f"call 2: {why}; not scored, though readable: g"


@pytest.mark.parametrize("text, why", [
    ("<tool_call>  </tool_call>", "empty <tool_call> block"),
    ("<function=g>" + "".join(f"<parameter=p{i}>1</parameter>" for i in range(3000)) + "</function>",
     "tool 'g': too many parameters to read"),
    ('<tool_call>{"name": "g", "arguments": {</tool_call>', "<tool_call> block is not valid JSON: invalid JSON: "),
    ('<tool_call>{"name": "g", "arguments": {"a": "x</tool_call>', "<tool_call> block is not valid JSON: invalid JSON: "),
    ('<tool_call>{"name": "g", "arguments": {} ' + G, "<tool_call> block is not closed before the next one; "
                                                     "not scored, though readable: g"),
    ("<tool_call>" + G, "<tool_call> block is not closed before the next one; not scored, though readable: g"),
    ("<tool_call>{<tool_call>{" + G, "<tool_call> block is not closed before the next one; call 2: <tool_call> block "
                                     "is not closed before the next one; not scored, though readable: g"),
    ('<tool_call>{"name": 5, "arguments": {}}</tool_call>', "missing or non-string tool name: 5"),
    ('<tool_call>{"name": "  ", "arguments": {}}</tool_call>', "missing or non-string tool name: '  '"),
    ('<tool_call>{"name": "a<b", "arguments": {}}</tool_call>', "'a<b' cannot be a tool name"),
    ("<tool_call><function=g", "<function= tag is cut off before its '>'"),
    ("<function=g><parameter=x>1</parameter><parameter=x>2</parameter></function>", "tool 'g': parameter 'x' given twice"),
])
def test_each_unreadable_text_call_says_why(text: str, why: str) -> None:
    parsed = parse_text(text, ["g"])
    assert parsed.outcome is ParseOutcome.MALFORMED_CALL and parsed.calls == []
    assert parsed.source == ("qwen3_coder" if "<function=" in text else "hermes")
    assert parsed.error is not None and parsed.error.startswith(f"call 1: {why}")
    assert parsed.error == f"call 1: {why}" or why.endswith(": ")


DEEP: dict[str, object] = {}
for _ in range(5000):  # an answer's arguments as an object (not text) have no depth bound of their own
    DEEP = {"a": DEEP}


@pytest.mark.parametrize("message, outcome, why", [
    ({"content": "", "reasoning_content": "hmm"}, ParseOutcome.EMPTY_RESPONSE, "the answer has only reasoning, no content"),
    ({"content": "  "}, ParseOutcome.EMPTY_RESPONSE, "the answer has no content and no tool call"),
    ({"content": "Done."}, ParseOutcome.NO_CALL, None),
    ({"tool_calls": [{"x": 1}]}, ParseOutcome.MALFORMED_CALL, "call 1: tool_calls[0] has no 'function' object"),
    ({"tool_calls": [{"function": {"name": "g", "arguments": "[1]"}}]}, ParseOutcome.MALFORMED_CALL,
     "call 1: tool 'g': arguments must be a JSON object, got array"),
    ({"tool_calls": [{"function": {"name": 7, "arguments": "{}"}}]}, ParseOutcome.MALFORMED_CALL,
     "call 1: missing or non-string tool name: 7"),
    ({"tool_calls": [{"function": {"name": "g", "arguments": DEEP}}]}, ParseOutcome.MALFORMED_CALL,
     "call 1: tool 'g': arguments are nested too deeply to read"),
])
def test_answers_without_a_readable_call_say_why(message: dict[str, object], outcome: ParseOutcome,
                                                 why: str | None) -> None:
    parsed = parse_response(message, ["g"])
    assert (parsed.outcome, parsed.error, parsed.calls) == (outcome, why, [])
    assert parsed.source == ("structured" if "tool_calls" in message else None)


def test_an_unreadable_structured_call_after_a_readable_one_is_named_not_scored() -> None:
    """Only an unreadable Hermes block spoils the whole answer (vLLM's text parser); a structured one is one call of several."""
    parsed = parse_response({"tool_calls": [{"function": {"name": "g", "arguments": "{}"}}, "junk"]}, ["g"])
    assert parsed.outcome is ParseOutcome.MULTIPLE_CALLS and [c.tool for c in parsed.calls] == ["g"]
    assert parsed.error == "2 calls in one turn; the first is scored; call 2: tool_calls[1] has no 'function' object"


def test_a_structured_call_without_arguments_has_none() -> None:
    parsed = parse_response({"tool_calls": [{"id": "c1", "function": {"name": "g"}}]}, ["g"])
    assert parsed.outcome is ParseOutcome.OK and parsed.calls[0].arguments == {}


def test_content_calls_are_checked_and_typed_against_the_offered_tools() -> None:
    """A call in `content` (no structured `tool_calls`) gets the same unknown-tool check and schema typing."""
    unknown = parse_response({"content": hermes({"name": "nope", "arguments": {}})}, ["g"])
    assert unknown.outcome is ParseOutcome.UNKNOWN_TOOL
    typed = parse_response({"content": qwen("5")}, ["f"], schemas={"f": {"properties": {"x": {"type": "string"}}}})
    assert typed.calls[0].arguments == {"x": "5"}


@pytest.mark.parametrize("schemas, value", [
    ({"f": {}}, "5"),  # a tool whose schema lists no properties: its values stay text
    ({"f": {"properties": "junk"}}, "5"),
    ({"other": {"properties": {"x": {"type": "integer"}}}}, "5"),  # a tool the schemas do not know
    (None, 5),  # no schemas at all: a value that parses as JSON is decoded
])
def test_values_are_typed_only_by_the_tools_own_listed_properties(schemas: dict[str, object] | None,
                                                                  value: object) -> None:
    parsed = parse_text(qwen("5"), None, schemas=schemas)  # type: ignore[arg-type]
    assert parsed.outcome is ParseOutcome.OK and parsed.calls[0].arguments == {"x": value}
    assert type(parsed.calls[0].arguments["x"]) is type(value)


def test_a_structured_call_keeps_its_name_as_given_and_any_name_it_has() -> None:
    """Structured names are trimmed and not held to the text grammar (the server's parser already read them)."""
    parsed = parse_response({"tool_calls": [{"function": {"name": " a<b ", "arguments": "{}"}}]}, ["a<b"])
    assert parsed.outcome is ParseOutcome.OK and parsed.calls[0].tool == "a<b"
    spaced = parse_text('<tool_call>{"name": " g ", "arguments": {}}</tool_call>', [" g "])
    assert spaced.outcome is ParseOutcome.OK and spaced.calls[0].tool == " g "  # Hermes: kept as written, as vLLM
    qwen_named = parse_text("<function= g >\n</function>", ["g"])
    assert qwen_named.outcome is ParseOutcome.OK and qwen_named.calls[0].tool == "g"


def test_blank_space_after_a_parameter_tags_equals_sign_is_layout() -> None:
    parsed = parse_text("<function=f><parameter= x>1</parameter></function>", ["f"])
    assert parsed.outcome is ParseOutcome.OK and parsed.calls[0].arguments == {"x": 1}


@pytest.mark.parametrize("text, outcome, tools", [
    ("<think>a</think>" + G + " </think>", ParseOutcome.OK, ["g"]),  # a </think> after an opened one closes nothing
    ("a</think>" + G + "</think>" + H, ParseOutcome.MULTIPLE_CALLS, ["g", "h"]),  # only the first can be template-opened
    ("<think>hmm</think>", ParseOutcome.EMPTY_RESPONSE, []),
    ("<think>a</think>  <think>b", ParseOutcome.EMPTY_RESPONSE, []),
    ("<function=f>\n</function> done", ParseOutcome.OK, ["f"]),  # a bare function may be followed by prose
    ("see <function=x\n" + G, ParseOutcome.OK, ["g"]),  # prose `<function=` is no call, and reading goes on
    ("<tool_call><function=f></function>" + G, ParseOutcome.MULTIPLE_CALLS, ["f", "g"]),  # a block left open
])
def test_reasoning_prose_and_open_blocks_between_calls(text: str, outcome: ParseOutcome, tools: list[str]) -> None:
    parsed = parse_text(text, ["f", "g", "h"])
    assert parsed.outcome is outcome and [c.tool for c in parsed.calls] == tools


def test_a_second_function_in_a_block_is_read_as_wrapped() -> None:
    text = "<tool_call><function=f></function><function=g><parameter=x>1</parameter></function> junk</tool_call>"
    parsed = parse_text(text, ["f", "g"])
    assert parsed.outcome is ParseOutcome.MULTIPLE_CALLS and [c.tool for c in parsed.calls] == ["f"]
    assert parsed.error == ("2 calls in one turn; the first is scored; "
                            "call 2: tool 'g': text after </function> does not close the <tool_call> block")


A_ONLY = {"f": {"type": "object", "properties": {"a": {"type": "string"}}}}


@pytest.mark.parametrize("body, arguments", [
    # fewest values holding tag text first: a spurious unlisted key beats a value holding `</parameter>`
    ("<parameter=a>v</parameter><parameter=x>w</parameter>", {"a": "v", "x": "w"}),
    # a value that holds tag text either way: then fewest unlisted keys, one value rather than a spurious key
    ("<parameter=a>v </function> v</parameter><parameter=x>w</parameter>",
     {"a": "v </function> v</parameter><parameter=x>w"}),
    ("<parameter=a>\nsee <parameter=\n</parameter>\n<parameter=x>\nw\n</parameter>\n",
     {"a": "see <parameter=\n</parameter>\n<parameter=x>\nw"}),
])
def test_a_body_read_two_ways_takes_fewest_tag_text_values_then_fewest_unlisted_keys(
        body: str, arguments: dict[str, str]) -> None:
    parsed = parse_text(f"<tool_call>\n<function=f>\n{body}</function>\n</tool_call>", ["f"], schemas=A_ONLY)
    assert parsed.outcome is ParseOutcome.OK and parsed.calls[0].arguments == arguments


@pytest.mark.parametrize("schemas", [None, A_ONLY])
def test_a_call_after_another_reads_its_own_body_only(schemas: dict[str, object] | None) -> None:
    """The second value's `</function>` makes every reading of it hold tag text; the first call's
    `</parameter>` and `</function>` before it must not offer a cheaper one."""
    first = "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>\n"
    second = "<tool_call>\n<function=f>\n<parameter=a>\nx </function> y\n</parameter>\n</function>\n</tool_call>"
    parsed = parse_text(first + second, ["f"], schemas=schemas)
    assert parsed.outcome is ParseOutcome.MULTIPLE_CALLS
    assert [c.arguments for c in parsed.calls] == [{"a": 1 if schemas is None else "1"}, {"a": "x </function> y"}]

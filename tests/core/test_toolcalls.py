"""The shared tool-call parser: structured calls, Hermes blocks, Qwen3-Coder functions."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.records import ParseOutcome
from core.toolcalls import parse_response, parse_text, transport_error

TOOLS = ("list_invoices", "send_invoice", "finalize_invoice")


def structured(*calls: tuple[str, Any], content: str | None = None) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}
            for i, (name, args) in enumerate(calls)
        ],
    }


def text(content: Any, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content, **extra}


# --- structured -------------------------------------------------------------------------


def test_structured_call_with_string_arguments() -> None:
    parsed = parse_response(structured(("list_invoices", '{"filter": {"customer_id": "c1"}}')), TOOLS)
    assert parsed.outcome is ParseOutcome.OK
    assert parsed.source == "structured"
    assert parsed.first is not None
    assert parsed.first.tool == "list_invoices"
    assert parsed.first.arguments == {"filter": {"customer_id": "c1"}}
    assert parsed.first.key_set == ["filter", "filter.customer_id"]
    assert parsed.error is None


def test_structured_call_with_object_arguments() -> None:
    parsed = parse_response(structured(("finalize_invoice", {"invoice_id": "INV-1"})), TOOLS)
    assert parsed.outcome is ParseOutcome.OK
    assert parsed.first is not None and parsed.first.key_set == ["invoice_id"]


def test_structured_calls_win_over_text() -> None:
    message = structured(("finalize_invoice", "{}"), content='<tool_call>{"name": "send_invoice"}</tool_call>')
    parsed = parse_response(message, TOOLS)
    assert parsed.outcome is ParseOutcome.OK
    assert [c.tool for c in parsed.calls] == ["finalize_invoice"]


def test_structured_broken_arguments_are_malformed() -> None:
    parsed = parse_response(structured(("list_invoices", '{"filter": ')), TOOLS)
    assert parsed.outcome is ParseOutcome.MALFORMED_CALL
    assert parsed.calls == []
    assert "not valid JSON" in (parsed.error or "")


def test_structured_non_object_arguments_are_malformed() -> None:
    parsed = parse_response(structured(("list_invoices", "[1, 2]")), TOOLS)
    assert parsed.outcome is ParseOutcome.MALFORMED_CALL
    assert "must be a JSON object" in (parsed.error or "")


def test_structured_without_function_is_malformed() -> None:
    parsed = parse_response({"content": None, "tool_calls": [{"id": "x", "type": "function"}]}, TOOLS)
    assert parsed.outcome is ParseOutcome.MALFORMED_CALL
    assert "no 'function'" in (parsed.error or "")


def test_structured_several_calls_score_the_first_and_keep_all() -> None:
    parsed = parse_response(structured(("finalize_invoice", '{"invoice_id": "a"}'),
                                       ("send_invoice", '{"invoice_id": "a"}')), TOOLS)
    assert parsed.outcome is ParseOutcome.MULTIPLE_CALLS
    assert [c.tool for c in parsed.calls] == ["finalize_invoice", "send_invoice"]
    assert "2 calls" in (parsed.error or "")


def test_structured_unknown_tool() -> None:
    parsed = parse_response(structured(("delete_everything", "{}")), TOOLS)
    assert parsed.outcome is ParseOutcome.UNKNOWN_TOOL
    assert parsed.first is not None and parsed.first.tool == "delete_everything"
    assert "not offered" in (parsed.error or "")


def test_unknown_tool_check_is_skipped_without_tool_names() -> None:
    assert parse_response(structured(("anything", "{}")), None).outcome is ParseOutcome.OK


# --- Hermes text ------------------------------------------------------------------------


def test_hermes_block() -> None:
    body = json.dumps({"name": "send_invoice", "arguments": {"invoice_id": "a", "recipients": [{"email": "x@y"}]}})
    parsed = parse_response(text(f"Sure.\n<tool_call>\n{body}\n</tool_call>"), TOOLS)
    assert parsed.outcome is ParseOutcome.OK
    assert parsed.source == "hermes"
    assert parsed.first is not None
    assert parsed.first.key_set == ["invoice_id", "recipients", "recipients[].email"]


def test_hermes_arguments_as_json_string() -> None:
    body = json.dumps({"name": "finalize_invoice", "arguments": json.dumps({"invoice_id": "a"})})
    parsed = parse_text(f"<tool_call>{body}</tool_call>", TOOLS)
    # vLLM passes the string on as the arguments text (a JSON string, which no client reads as arguments)
    assert parsed.outcome is ParseOutcome.MALFORMED_CALL and "must be a JSON object" in (parsed.error or "")


def test_hermes_unclosed_last_block() -> None:
    parsed = parse_text('<tool_call>{"name": "finalize_invoice", "arguments": {"invoice_id": "a"}}', TOOLS)
    assert parsed.outcome is ParseOutcome.OK
    assert parsed.first is not None and parsed.first.tool == "finalize_invoice"


def test_hermes_truncated_unclosed_block_is_malformed() -> None:
    parsed = parse_text('<tool_call>{"name": "finalize_invoice", "argum', TOOLS)
    assert parsed.outcome is ParseOutcome.MALFORMED_CALL
    assert "not valid JSON" in (parsed.error or "")


def test_hermes_broken_json() -> None:
    parsed = parse_text("<tool_call>{name: finalize_invoice}</tool_call>", TOOLS)
    assert parsed.outcome is ParseOutcome.MALFORMED_CALL
    assert parsed.error


def test_hermes_non_object_arguments() -> None:
    parsed = parse_text('<tool_call>{"name": "finalize_invoice", "arguments": [1]}</tool_call>', TOOLS)
    assert parsed.outcome is ParseOutcome.MALFORMED_CALL
    assert "must be a JSON object" in (parsed.error or "")


def test_hermes_missing_name() -> None:
    parsed = parse_text('<tool_call>{"arguments": {}}</tool_call>', TOOLS)
    assert parsed.outcome is ParseOutcome.MALFORMED_CALL
    assert "tool name" in (parsed.error or "")


def test_hermes_without_arguments_is_malformed_as_vllm_reads_no_call() -> None:
    parsed = parse_text('<tool_call>{"name": "finalize_invoice"}</tool_call>', TOOLS)
    assert parsed.outcome is ParseOutcome.MALFORMED_CALL and "no 'arguments'" in (parsed.error or "")


def test_hermes_empty_block_is_malformed() -> None:
    assert parse_text("<tool_call>  </tool_call>", TOOLS).outcome is ParseOutcome.MALFORMED_CALL


def test_hermes_several_blocks() -> None:
    content = ('<tool_call>{"name": "finalize_invoice", "arguments": {"invoice_id": "a"}}</tool_call>\n'
               '<tool_call>{"name": "send_invoice", "arguments": {"invoice_id": "a"}}</tool_call>')
    parsed = parse_text(content, TOOLS)
    assert parsed.outcome is ParseOutcome.MULTIPLE_CALLS
    assert [c.tool for c in parsed.calls] == ["finalize_invoice", "send_invoice"]


def test_hermes_list_in_one_block_is_malformed_as_vllm_reads_no_call() -> None:
    body = json.dumps([{"name": "finalize_invoice", "arguments": {}}, {"name": "send_invoice", "arguments": {}}])
    assert parse_text(f"<tool_call>{body}</tool_call>", TOOLS).outcome is ParseOutcome.MALFORMED_CALL


def test_first_block_broken_second_fine_is_malformed_and_names_the_readable_one() -> None:
    content = ('<tool_call>{"name": "finalize_invoice", </tool_call>'
               '<tool_call>{"name": "send_invoice", "arguments": {}}</tool_call>')
    parsed = parse_text(content, TOOLS)
    assert parsed.outcome is ParseOutcome.MALFORMED_CALL
    assert parsed.calls == []
    assert "call 1" in (parsed.error or "") and "send_invoice" in (parsed.error or "")


def test_later_broken_block_makes_the_answer_malformed_and_is_named() -> None:
    """vLLM's Hermes parser reads no call at all when any block is broken."""
    content = ('<tool_call>{"name": "finalize_invoice", "arguments": {}}</tool_call>'
               '<tool_call>{"name": </tool_call>')
    parsed = parse_text(content, TOOLS)
    assert parsed.outcome is ParseOutcome.MALFORMED_CALL and parsed.calls == []
    assert "call 2" in (parsed.error or "") and "finalize_invoice" in (parsed.error or "")


def test_block_left_open_before_next_block() -> None:
    content = ('<tool_call>{"name": "finalize_invoice", "arguments": {}}'
               '<tool_call>{"name": "send_invoice", "arguments": {}}</tool_call>')
    parsed = parse_text(content, TOOLS)
    assert parsed.outcome is ParseOutcome.MALFORMED_CALL
    assert "not closed" in (parsed.error or "")


def test_hermes_unknown_tool() -> None:
    parsed = parse_text('<tool_call>{"name": "search_web", "arguments": {"q": "x"}}</tool_call>', TOOLS)
    assert parsed.outcome is ParseOutcome.UNKNOWN_TOOL
    assert parsed.first is not None and parsed.first.key_set == ["q"]


def test_second_call_unknown_is_noted() -> None:
    content = ('<tool_call>{"name": "finalize_invoice", "arguments": {}}</tool_call>'
               '<tool_call>{"name": "search_web", "arguments": {}}</tool_call>')
    parsed = parse_text(content, TOOLS)
    assert parsed.outcome is ParseOutcome.MULTIPLE_CALLS
    assert "search_web" in (parsed.error or "")


# --- Qwen3-Coder text -------------------------------------------------------------------

QWEN = """<tool_call>
<function=send_invoice>
<parameter=invoice_id>
INV-7
</parameter>
<parameter=recipients>
[{"email": "a@b.c", "name": "A"}]
</parameter>
<parameter=message>
Thanks!
</parameter>
</function>
</tool_call>"""


def test_qwen3_coder_wrapped() -> None:
    parsed = parse_text(QWEN, TOOLS)
    assert parsed.outcome is ParseOutcome.OK
    assert parsed.source == "qwen3_coder"
    assert parsed.first is not None
    assert parsed.first.arguments == {"invoice_id": "INV-7", "recipients": [{"email": "a@b.c", "name": "A"}],
                                      "message": "Thanks!"}
    assert parsed.first.key_set == ["invoice_id", "message", "recipients", "recipients[].email", "recipients[].name"]


def test_qwen3_coder_bare_and_json_values() -> None:
    content = ("<function=list_invoices><parameter=filter>{\"customer_id\": \"c1\", \"date\": {\"from\": \"2026-01-01\"}}"
               "</parameter><parameter=page>{\"size\": 5}</parameter></function>")
    parsed = parse_text(content, TOOLS)
    assert parsed.outcome is ParseOutcome.OK
    assert parsed.first is not None
    assert parsed.first.key_set == ["filter", "filter.customer_id", "filter.date", "filter.date.from", "page",
                                    "page.size"]


def test_qwen3_coder_scalar_values_decode_as_json() -> None:
    parsed = parse_text("<function=finalize_invoice><parameter=n>12</parameter><parameter=s>twelve</parameter>"
                        "</function>", None)
    assert parsed.first is not None and parsed.first.arguments == {"n": 12, "s": "twelve"}


def test_qwen3_coder_unclosed_function_at_end_is_malformed() -> None:
    # Cut off before </function>, more parameters may have followed: not a call with fewer keys.
    parsed = parse_text("<function=finalize_invoice>\n<parameter=invoice_id>\nA\n</parameter>\n", TOOLS)
    assert parsed.outcome is ParseOutcome.MALFORMED_CALL
    assert "not closed" in (parsed.error or "")


def test_qwen3_coder_unclosed_parameter_is_malformed() -> None:
    parsed = parse_text("<function=finalize_invoice><parameter=invoice_id>A", TOOLS)
    assert parsed.outcome is ParseOutcome.MALFORMED_CALL
    assert "not closed" in (parsed.error or "")


def test_qwen3_coder_duplicate_parameter_is_malformed() -> None:
    content = "<function=finalize_invoice><parameter=a>1</parameter><parameter=a>2</parameter></function>"
    assert parse_text(content, TOOLS).outcome is ParseOutcome.MALFORMED_CALL


def test_qwen3_coder_several_functions() -> None:
    content = ("<function=finalize_invoice><parameter=invoice_id>A</parameter></function>"
               "<function=send_invoice><parameter=invoice_id>A</parameter></function>")
    parsed = parse_text(content, TOOLS)
    assert parsed.outcome is ParseOutcome.MULTIPLE_CALLS
    assert [c.tool for c in parsed.calls] == ["finalize_invoice", "send_invoice"]


def test_mixed_forms_in_order() -> None:
    content = ("<function=finalize_invoice><parameter=invoice_id>A</parameter></function>\n"
               '<tool_call>{"name": "send_invoice", "arguments": {"invoice_id": "A"}}</tool_call>')
    parsed = parse_text(content, TOOLS)
    assert parsed.outcome is ParseOutcome.MULTIPLE_CALLS
    assert parsed.source == "qwen3_coder"
    assert [c.tool for c in parsed.calls] == ["finalize_invoice", "send_invoice"]


# --- no call, empty, thinking -----------------------------------------------------------


def test_plain_text_is_no_call() -> None:
    parsed = parse_response(text("All done, anything else?"), TOOLS)
    assert parsed.outcome is ParseOutcome.NO_CALL
    assert parsed.calls == [] and parsed.error is None


@pytest.mark.parametrize("message", [text(None), text(""), text("  \n"), {"content": None, "tool_calls": []}])
def test_nothing_is_an_empty_response(message: dict[str, Any]) -> None:
    parsed = parse_response(message, TOOLS)
    assert parsed.outcome is ParseOutcome.EMPTY_RESPONSE
    assert parsed.error


def test_reasoning_only_is_an_empty_response() -> None:
    parsed = parse_response(text(None, reasoning_content="I should call finalize_invoice."), TOOLS)
    assert parsed.outcome is ParseOutcome.EMPTY_RESPONSE
    assert "reasoning" in (parsed.error or "")


def test_calls_in_reasoning_content_are_not_actions() -> None:
    message = text("I'll wait for your answer.",
                   reasoning_content='<tool_call>{"name": "finalize_invoice", "arguments": {}}</tool_call>')
    assert parse_response(message, TOOLS).outcome is ParseOutcome.NO_CALL


def test_thinking_around_a_call() -> None:
    content = ('<think>Maybe <tool_call>{"name": "send_invoice", "arguments": {}}</tool_call>? No.</think>\n'
               'Finalizing first.\n<tool_call>{"name": "finalize_invoice", "arguments": {"invoice_id": "A"}}'
               "</tool_call>")
    parsed = parse_text(content, TOOLS)
    assert parsed.outcome is ParseOutcome.OK
    assert [c.tool for c in parsed.calls] == ["finalize_invoice"]


def test_template_opened_thinking_is_skipped() -> None:
    content = ('considering <function=send_invoice></function> </think>\n'
               '<tool_call>{"name": "finalize_invoice", "arguments": {}}</tool_call>')
    parsed = parse_text(content, TOOLS)
    assert [c.tool for c in parsed.calls] == ["finalize_invoice"]


def test_unclosed_thinking_hides_everything_after_it() -> None:
    parsed = parse_text('<think>I could <tool_call>{"name": "finalize_invoice"}</tool_call>', TOOLS)
    assert parsed.outcome is ParseOutcome.EMPTY_RESPONSE


def test_content_parts_are_read() -> None:
    message = text([{"type": "text", "text": '<tool_call>{"name": "finalize_invoice", '},
                    {"type": "text", "text": '"arguments": {}}</tool_call>'}])
    assert parse_response(message, TOOLS).outcome is ParseOutcome.OK


def test_transport_error_helper() -> None:
    parsed = transport_error("connection refused")
    assert parsed.outcome is ParseOutcome.TRANSPORT_ERROR
    assert parsed.error == "connection refused"
    assert parsed.calls == []


def test_hermes_parameters_instead_of_arguments_is_malformed_as_vllm_reads_no_call() -> None:
    parsed = parse_text('<tool_call>{"name": "finalize_invoice", "parameters": {"invoice_id": "A"}}</tool_call>', TOOLS)
    assert parsed.outcome is ParseOutcome.MALFORMED_CALL and parsed.calls == []


# --- never silently wrong (issue 14) ----------------------------------------------------

SCHEMAS: dict[str, dict[str, Any]] = {
    "send_invoice": {"type": "object", "properties": {
        "invoice_id": {"type": "string"}, "note": {"type": "string"}, "count": {"type": "integer"},
        "ratio": {"type": "number"}, "urgent": {"type": "boolean"}, "meta": {"type": "object"},
        "lines": {"type": "array"}, "maybe": {"type": ["string", "null"]}}},
    "finalize_invoice": {"type": "object", "properties": {"invoice_id": {"type": "string"}}},
    "list_invoices": {"type": "object", "properties": {}},
}


def test_a_listed_key_always_starts_a_parameter_closed_before_it_or_not() -> None:
    content = ("<tool_call>\n<function=send_invoice>\n<parameter=invoice_id>\nINV-7\n"
               "<parameter=note>\nhi\n</parameter>\n</function>\n</tool_call>")
    for schemas in (None, SCHEMAS):
        parsed = parse_text(content, TOOLS, schemas=schemas)
        assert parsed.outcome is ParseOutcome.OK, schemas
        assert parsed.first is not None and parsed.first.arguments == {"invoice_id": "INV-7", "note": "hi"}


@pytest.mark.parametrize("value", ["a </parameter> b", "see </function> and </tool_call> here",
                                   "<tool_call>{\"name\": \"x\"}</tool_call>", "<parameter=other>x",
                                   "x\n</parameter>\ny", "<function=finalize_invoice>"])
def test_values_with_tag_like_text_are_read_whole(value: str) -> None:
    content = (f"<tool_call>\n<function=send_invoice>\n<parameter=note>\n{value}\n</parameter>\n"
               "<parameter=invoice_id>\nINV-7\n</parameter>\n</function>\n</tool_call>")
    parsed = parse_text(content, TOOLS, schemas=SCHEMAS)
    assert parsed.outcome is ParseOutcome.OK, parsed.error
    assert parsed.first is not None and parsed.first.arguments == {"note": value, "invoice_id": "INV-7"}


def test_json_body_inside_function_tags_is_malformed_not_empty() -> None:
    parsed = parse_text('<function=finalize_invoice>{"invoice_id": "A"}</function>', TOOLS)
    assert parsed.outcome is ParseOutcome.MALFORMED_CALL
    assert "<parameter=" in (parsed.error or "")


@pytest.mark.parametrize("content", ["<tool_call><function=finalize_invoice>", "<tool_call>\n<function=finalize_invoice>\n",
                                     "<function=finalize_invoice>", "<tool_call><function=finalize_inv",
                                     "<tool_call>\n<function=finalize_invoice>\n<parameter=invoice_id>\nA\n</parameter>\n"])
def test_call_truncated_before_its_end_is_malformed(content: str) -> None:
    parsed = parse_text(content, TOOLS)
    assert parsed.outcome is ParseOutcome.MALFORMED_CALL, parsed
    assert parsed.error


@pytest.mark.parametrize(("raw", "key", "expected"), [
    ("null", "note", "null"), ("42", "note", "42"), ("true", "note", "true"), ('{"a": 1}', "note", '{"a": 1}'),
    ("42", "count", 42), ("0.5", "ratio", 0.5), ("true", "urgent", True), ("False", "urgent", False),
    ('{"a": {"b": 1}}', "meta", {"a": {"b": 1}}), ("{'a': {'b': 1}}", "meta", "{'a': {'b': 1}}"),
    ('[{"q": 1}]', "lines", [{"q": 1}]), ("[{'q': 1}]", "lines", "[{'q': 1}]"),
    ("null", "maybe", None), ("x", "maybe", "x"), ("not json", "meta", "not json"), ("12", "unknown", "12"),
])
def test_xml_values_are_typed_by_the_tool_schema(raw: str, key: str, expected: Any) -> None:
    content = f"<tool_call>\n<function=send_invoice>\n<parameter={key}>\n{raw}\n</parameter>\n</function>\n</tool_call>"
    parsed = parse_text(content, TOOLS, schemas=SCHEMAS)
    assert parsed.outcome is ParseOutcome.OK, parsed.error
    assert parsed.first is not None
    value = parsed.first.arguments[key]
    assert value == expected and type(value) is type(expected)


def test_schema_typing_changes_the_key_set() -> None:
    content = "<function=send_invoice><parameter=meta>{\"a\": 1}</parameter><parameter=note>{\"b\": 2}</parameter></function>"
    parsed = parse_text(content, TOOLS, schemas=SCHEMAS)
    assert parsed.first is not None and parsed.first.key_set == ["meta", "meta.a", "note"]


def test_deeply_nested_arguments_are_malformed_not_a_crash() -> None:
    deep = "[" * 100_000
    assert parse_response(structured(("finalize_invoice", deep)), TOOLS).outcome is ParseOutcome.MALFORMED_CALL
    parsed = parse_text("<tool_call>" + deep, TOOLS)
    assert parsed.outcome is ParseOutcome.MALFORMED_CALL
    xml = f"<function=send_invoice><parameter=meta>{deep}</parameter></function>"
    assert parse_text(xml, TOOLS, schemas=SCHEMAS).outcome is ParseOutcome.OK


@pytest.mark.parametrize("value", ["see </think> here", "x <think> y", "<think>a</think>", "</think><think>"])
def test_think_tags_inside_a_call_are_text_not_reasoning(value: str) -> None:
    """Sibling of the tag-in-a-value class: reasoning tags inside a call do not end or start reasoning."""
    schemas = {"send_invoice": {"properties": {"note": {"type": "string"}}}}
    xml = f"<tool_call>\n<function=send_invoice>\n<parameter=note>\n{value}\n</parameter>\n</function>\n</tool_call>"
    hermes = "<tool_call>\n" + json.dumps({"name": "send_invoice", "arguments": {"note": value}}) + "\n</tool_call>"
    for content in (xml, hermes, "<think>plan</think>\n" + xml, "plan</think>\n" + hermes):
        parsed = parse_text(content, TOOLS, schemas=schemas)
        assert parsed.outcome is ParseOutcome.OK, (content, parsed.error)
        assert parsed.first is not None and parsed.first.arguments == {"note": value}


def test_calls_between_thinking_blocks_are_kept() -> None:
    content = ('<think>first</think>\n<tool_call>{"name": "finalize_invoice", "arguments": {}}</tool_call>\n'
               '<think>second <tool_call>{"name": "send_invoice", "arguments": {}}</tool_call></think>')
    parsed = parse_text(content, TOOLS)
    assert parsed.outcome is ParseOutcome.OK and [c.tool for c in parsed.calls] == ["finalize_invoice"]


@pytest.mark.parametrize("text", ["<function=<tool_call></function>", "<function=a b>\n</function>",
                                  '<tool_call>{"name": "x\\"y", "arguments": {}}</tool_call>'])
def test_a_name_that_cannot_be_a_tool_name_is_a_malformed_call_not_an_unknown_tool(text: str) -> None:
    parsed = parse_text(text, ["search"])
    assert parsed.outcome == ParseOutcome.MALFORMED_CALL and parsed.calls == [], parsed


def test_a_close_tag_inside_the_json_of_an_unreadable_block_ends_nothing() -> None:
    """Cut output whose JSON holds `</tool_call>`, `</think>` and a function tag: nothing after the
    block's start can be told from its own text, so no call of `f` is read from it."""
    text = '<tool_call>\n{"name": "search", "arguments": {"k": ["</tool_call>", "</think><function=f></function>'
    parsed = parse_text(text, ["search", "f"])
    assert parsed.outcome == ParseOutcome.MALFORMED_CALL and parsed.calls == [], parsed


# --- values as vLLM 0.32 reads them: JSON only, so a Python literal or an object inside a string stays text

@pytest.mark.parametrize(("raw", "key", "expected"), [
    ('"{\'key\': \'value\', \'n\': 1}"', "meta", "{'key': 'value', 'n': 1}"),  # JSON: a string
    ("{'a': 1}", "meta", "{'a': 1}"), ("[{'q': 1}]", "lines", "[{'q': 1}]"), ("not json", "meta", "not json"),
])
def test_an_object_that_is_not_json_stays_text(raw: str, key: str, expected: str) -> None:
    content = f"<tool_call>\n<function=send_invoice>\n<parameter={key}>\n{raw}\n</parameter>\n</function>\n</tool_call>"
    parsed = parse_text(content, TOOLS, schemas=SCHEMAS)
    assert parsed.outcome is ParseOutcome.OK, parsed.error
    assert parsed.first is not None and parsed.first.arguments == {key: expected}


WRITE = {"write_file": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}
TEMPLATES = [
    "Example:\n<tool_call>\n<function=other>\n<parameter=x>\nv\n</parameter>\n</function>\n</tool_call>\nend",
    "<tool_call>\n<function=other>\n<parameter=x>\n1\n</parameter>\n<parameter=y>\n2\n</parameter>\n</function>\n"
    "</tool_call>",
    "<parameter=x>\nv\n</parameter>", "a\n<parameter=x>\nb\n</parameter>\nc",
]


@pytest.mark.parametrize("value", TEMPLATES)
@pytest.mark.parametrize("schemas", [WRITE], ids=["schema"])
@pytest.mark.parametrize("first", ["content", "path"])
def test_a_file_holding_a_tool_call_template_is_one_value(value: str, schemas: Any, first: str) -> None:
    """Unlisted `<parameter=…>` … `</parameter>` inside a value are its text: the value is read
    whole, not cut at the inner close nor split into the inner keys (without a schema every
    `<parameter=` starts a parameter, as in vLLM)."""
    args = {"content": value, "path": "notes.md"}
    params = "".join(f"<parameter={k}>\n{args[k]}\n</parameter>\n" for k in (first, *(set(args) - {first})))
    parsed = parse_text(f"<tool_call>\n<function=write_file>\n{params}</function>\n</tool_call>", ["write_file"],
                        schemas=schemas)
    assert parsed.outcome is ParseOutcome.OK, parsed.error
    assert parsed.first is not None and parsed.first.arguments == args

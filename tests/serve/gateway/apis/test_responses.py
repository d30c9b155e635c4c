"""The Responses API's readings: output items and the final stream event to the neutral answer, the
turn's `function_call_output` items for the guard, and `previous_response_id` refused."""

from __future__ import annotations

import json

import pytest

from core.records import ParseOutcome
from serve.gateway.apis import APIS
from serve.gateway.errors import GatewayError
from tests.serve.gateway.apis.streams import StreamReading

RESPONSES = APIS["responses"]
TOOLS = [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}, {"type": "web_search"}]
OUTPUT = [{"type": "reasoning", "summary": []},
          {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "On it."}]},
          {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"id": "7"}'}]


def test_output_items_and_the_completed_event_read_as_one_answer():
    whole = RESPONSES.answer({"output": OUTPUT})
    reading = StreamReading(RESPONSES)
    assert not reading.ends(reading.feed(b'event: response.created\ndata: {"type": "response.created"}\n\n'))
    final = {"type": "response.completed", "response": {"output": OUTPUT}}
    assert reading.ends(reading.feed(f"event: response.completed\ndata: {json.dumps(final)}\n\n".encode()))
    assert reading.accumulator.answer() == whole
    parsed = RESPONSES.conversation({"tools": TOOLS}).parse(whole)
    assert parsed.outcome is ParseOutcome.OK and parsed.calls[0].key_set == ["id"] and whole["content"] == "On it."


def test_the_turn_reads_items_and_trailing_function_call_outputs():
    items = [{"role": "user", "content": "find 7"},
             {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c1", "output": '{"error": "gone"}'}]
    turn = RESPONSES.conversation({"input": items, "tools": TOOLS, "tool_choice": {"type": "function",
                                                                                   "name": "lookup"}})
    assert turn.roles == ["user", "function_call", "function_call_output"] and turn.tool_names() == {"lookup"}
    assert [(r.call_id, r.tool, r.content) for r in turn.replies] == [("c1", "lookup", '{"error": "gone"}')]
    assert turn.tool_choice == "function:lookup"
    assert RESPONSES.conversation({"input": "hi"}).messages == [{"role": "user", "content": "hi"}]


def test_previous_response_id_is_refused_and_store_is_left_alone():
    with pytest.raises(GatewayError, match="stateless"):
        RESPONSES.check({"previous_response_id": "resp_1"})
    RESPONSES.check({"store": True, "input": "x"})
    assert RESPONSES.shadow_body({"model": "a", "stream": True, "store": False}, "b") == {
        "model": "b", "stream": False, "store": False}

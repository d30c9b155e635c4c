"""The Messages API's readings: answers and streams to the neutral answer, tool results for the guard,
tool choices and sessions as the runtime sends them, errors in Anthropic's shape."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from core.records import ParseOutcome
from serve.gateway.apis import APIS
from tests.serve.gateway.apis.streams import StreamReading

MESSAGES = APIS["messages"]
TOOLS = [{"name": "lookup", "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}}},
         {"type": "web_search_20250305", "name": "web_search"}, {"description": "no name"}]


def sse(name: str, data: dict) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def stream_of(text: str, call_json: str) -> bytes:
    return b"".join([
        sse("message_start", {"type": "message_start", "message": {"content": []}}),
        sse("content_block_start", {"type": "content_block_start", "index": 0,
                                    "content_block": {"type": "text", "text": ""}}),
        *[sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                      "delta": {"type": "text_delta", "text": part}}) for part in (text[:3], text[3:])],
        sse("content_block_start", {"type": "content_block_start", "index": 1, "content_block": {
            "type": "tool_use", "id": "toolu_9", "name": "lookup", "input": {}}}),
        *[sse("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": {
            "type": "input_json_delta", "partial_json": part}}) for part in (call_json[:5], call_json[5:])],
        sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"}}),
        sse("message_stop", {"type": "message_stop"})])


@given(step=st.integers(1, 40))
def test_a_stream_rebuilds_the_same_answer_as_the_json_message_wherever_chunks_break(step):
    stream = stream_of("Checking it.", '{"id": "INV-7"}')
    head, tail = stream[:-3], stream[-3:]  # the end event's line is whole only with the last bytes
    reading = StreamReading(MESSAGES)
    assert not reading.ends(reading.feed(*(head[i:i + step] for i in range(0, len(head), step))))
    assert reading.ends(reading.feed(tail))
    accumulator = reading.accumulator
    json_answer = MESSAGES.answer({"content": [{"type": "text", "text": "Checking it."}, {
        "type": "tool_use", "id": "toolu_9", "name": "lookup", "input": {"id": "INV-7"}}]})
    conversation = MESSAGES.conversation({"messages": [], "tools": TOOLS})
    streamed, whole = conversation.parse(accumulator.answer()), conversation.parse(json_answer)
    assert streamed == whole and whole.outcome is ParseOutcome.OK
    assert whole.calls[0].tool == "lookup" and whole.calls[0].key_set == ["id"]
    assert accumulator.answer()["tool_calls"][0]["id"] == "toolu_9"


def test_a_cut_tool_input_is_a_malformed_call_never_a_smaller_key_set():
    reading = StreamReading(MESSAGES)
    events = reading.feed(stream_of("", '{"id": "INV-7", "fil').split(b"event: message_delta")[0])
    parsed = MESSAGES.conversation({"tools": TOOLS}).parse(reading.accumulator.answer())
    assert parsed.outcome is ParseOutcome.MALFORMED_CALL and not reading.ends(events)


def test_tools_choices_and_the_turns_tool_results_read_as_the_runtime_sends_them():
    messages = [
        {"role": "user", "content": "find INV-7"},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"},
                                          {"type": "tool_use", "id": "t1", "name": "lookup", "input": {"id": "7"}},
                                          {"type": "tool_use", "id": "t2", "name": "web_search", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": True,
                                      "content": [{"type": "text", "text": "timeout"}]},
                                     {"type": "tool_result", "tool_use_id": "t2", "content": ""},
                                     {"type": "text", "text": "go on"}]}]
    body = {"system": [{"type": "text", "text": "be brief"}], "messages": messages, "tools": TOOLS,
            "tool_choice": {"type": "tool", "name": "lookup"}, "max_tokens": 9, "metadata": {"user_id": "u"}}
    turn = MESSAGES.conversation(body)
    assert turn.messages is messages and turn.roles == ["user", "assistant", "user"]
    assert turn.tool_names() == {"lookup", "web_search"} and turn.tool_choice == "function:lookup"
    assert [(r.call_id, r.tool, r.is_error) for r in turn.replies] == [("t1", "lookup", True), ("t2", "web_search", False)]
    assert set(turn.request) == {"system", "messages", "tools", "tool_choice"}
    labels = {json.dumps(c): MESSAGES.conversation({"tool_choice": c}).tool_choice
              for c in ({"type": "auto"}, {"type": "any"}, {"type": "none"}, None, "junk")}
    assert list(labels.values()) == ["auto", "required", "none", "auto", "auto"]
    assert MESSAGES.conversation({"messages": [{"role": "user", "content": "hi"}]}).replies == []
    assert MESSAGES.conversation({"messages": "not a list", "tools": {"x": 1}}).messages == []


def test_errors_take_anthropics_shape_and_overloaded_is_529():
    assert MESSAGES.error_body("no", "model_not_found", 404) == {
        "type": "error", "error": {"type": "not_found_error", "message": "no"}}
    assert MESSAGES.error_status(503, "engine_unavailable") == 529
    assert MESSAGES.error_body("down", "engine_unavailable", 529)["error"]["type"] == "overloaded_error"
    assert MESSAGES.error_headers(529) == {"x-should-retry": "true"} and MESSAGES.error_headers(400) == {}
    event = MESSAGES.sse_error("x" * 5000, "stream_interrupted", 502).decode()
    assert event.startswith("event: error\ndata: ") and event.endswith("\n\n")
    assert json.loads(event.split("data: ", 1)[1])["error"]["type"] == "api_error"


def test_count_tokens_neither_streams_nor_captures():
    count = APIS["count_tokens"]
    assert not count.generates and not count.captures and count.output_limit({"max_tokens": 5}) is None

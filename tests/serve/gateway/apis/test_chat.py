"""The chat and completions APIs' readings: streams rebuilt, answers typed by the offered schemas, shadow copies."""

from __future__ import annotations

import json

from core.records import ParseOutcome
from serve.gateway.apis import APIS
from tests.serve.gateway.apis.streams import StreamReading

CHAT = APIS["chat"]


def test_stream_accumulator_rebuilds_content_and_split_tool_calls():
    events = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [
            {"index": 0, "id": "c1", "type": "function", "function": {"name": "lookup", "arguments": ""}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"id": '}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '"7"}'}}]}}]},
    ]
    stream = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    reading = StreamReading(CHAT)
    assert reading.ends(reading.feed(*(stream[i:i + 7] for i in range(0, len(stream), 7))))  # borders in lines
    message = reading.accumulator.answer()
    assert message["tool_calls"][0]["function"] == {"name": "lookup", "arguments": '{"id": "7"}'}
    parsed = CHAT.conversation({"tools": [{"type": "function", "function": {"name": "lookup"}}]}).parse(message)
    assert parsed.outcome is ParseOutcome.OK and parsed.calls[0].arguments == {"id": "7"}


def test_stream_accumulator_reads_completion_text_and_ignores_other_choices():
    reading = StreamReading(APIS["completions"])
    reading.feed(b'data: {"choices": [{"index": 0, "text": "<tool_call>{\\"name\\": \\"f\\", "}]}\n\n',
                 b'data: {"choices": [{"index": 1, "text": "ignored"}]}\n\n',
                 b'data: {"choices": [{"index": 0, "text": "\\"arguments\\": {}}"}]}\n\ndata: [DONE]\n\n')
    accumulator = reading.accumulator
    assert accumulator.answer() == '<tool_call>{"name": "f", "arguments": {}}'
    assert CHAT.conversation({}).parse(accumulator.answer()).calls[0].tool == "f"


def test_shadow_body_is_a_plain_request_to_the_candidate():
    body = {"model": "prod-v1", "stream": True, "stream_options": {"include_usage": True}, "messages": [],
            "tools": [{"type": "function", "function": {"name": "lookup"}}]}
    assert CHAT.shadow_body(body, "cand-v1") == {"model": "cand-v1", "stream": False, "messages": [],
                                             "tools": body["tools"]}
    assert CHAT.conversation(body).tool_names() == {"lookup"} and CHAT.conversation({"messages": []}).tool_names() is None


def test_text_answers_are_typed_by_the_requests_tool_schema():
    body = {"messages": [], "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"id": {"type": "string"}, "filter": {"type": "object"}}}}}]}
    text = "<function=lookup><parameter=id>42</parameter><parameter=filter>{\"s\": 1}</parameter></function>"
    parsed = CHAT.conversation(body).parse({"role": "assistant", "content": text})
    assert parsed.first is not None and parsed.first.arguments == {"id": "42", "filter": {"s": 1}}
    assert CHAT.conversation(body).parse(text).first == parsed.first


"""Reading SSE streams as the relay does: whole events wherever chunks break, relayed byte for byte;
data that cannot be read reported (never skipped); and, per API, which event ends a whole answer and
which says the engine failed (issue 62: an engine failure must never pass for the model's answer)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from serve.gateway.apis import APIS
from serve.gateway.apis import base as base_module
from serve.gateway.apis.base import SseEvent, SseEvents

STREAM = (b'data: {"choices": [{"index": 0, "delta": {"content": "Hi"}}]}\n\n'
          b": a comment\n\n"
          b'event: message_start\r\ndata: {"type": "message_start",\r\ndata:  "n": 1}\r\n\r\n'
          b"data: [DONE]\n\n")


def events(*chunks: bytes) -> list[SseEvent]:
    reader = SseEvents()
    return [e for chunk in chunks for e in reader.feed(chunk)] + reader.flush()


@given(cuts=st.lists(st.integers(0, len(STREAM)), max_size=8))
def test_events_come_out_whole_and_as_sent_wherever_chunks_break(cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(STREAM)]
    read = events(*(STREAM[a:b] for a, b in zip(bounds, bounds[1:], strict=False)))
    assert b"".join(e.raw for e in read) == STREAM
    assert [(e.name, e.data, e.done, e.problem) for e in read] == [
        ("", {"choices": [{"index": 0, "delta": {"content": "Hi"}}]}, False, None),
        ("", None, False, None),  # a comment: nothing to read
        ("message_start", {"type": "message_start", "n": 1}, False, None),  # data lines joined, CRLF ends
        ("", None, True, None)]


@pytest.mark.parametrize(("data", "problem"), [
    (b'{"choices": [{"delta": {"content": "\xff"}}]}', "not UTF-8"),
    (b"[" * 100_000, "nested deeper"),
    (b"7" * 50, "no object"),
    (b'{"type": \x00 not json', "Expecting value"),
    (b'{"choices": [', "Expecting value"),
])
def test_data_that_cannot_be_read_is_reported_never_skipped(data: bytes, problem: str) -> None:
    (event,) = events(b"data: " + data + b"\n\n")
    assert event.problem is not None and problem in event.problem and event.data is None and not event.done


def test_an_event_whose_blank_line_never_came_is_read_at_the_end() -> None:
    (event,) = events(b"data: [DO", b"NE]")
    assert event.done and event.raw == b"data: [DONE]\n"


def test_a_line_that_never_ends_is_refused_at_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base_module, "MAX_EVENT_BYTES", 1000)
    reader = SseEvents()
    assert reader.feed(b"data: " + b"x" * 900) == []
    (event,) = reader.feed(b"x" * 200)
    assert event.raw == b"" and event.problem == "an event longer than 1000 bytes"
    assert reader.feed(b"data: [DONE]\n\n")[0].done  # what follows is read afresh


ERROR = {"message": "Internal server error", "type": "InternalServerError", "param": None, "code": 500}


def sse(data: object, name: str | None = None) -> bytes:
    return (f"event: {name}\n" if name else "").encode() + b"data: " + json.dumps(data).encode() + b"\n\n"


@pytest.mark.parametrize(("api", "failures", "last", "others"), [
    ("chat", [sse({"error": ERROR})], b"data: [DONE]\n\n", [sse({"choices": [{"index": 0, "delta": {}}]})]),
    ("completions", [sse({"error": ERROR})], b"data: [DONE]\n\n", [sse({"choices": [{"index": 0, "text": "x"}]})]),
    ("messages", [sse({"type": "error", "error": {"type": "internal_error", "message": ERROR["message"]}}, "error")],
     sse({"type": "message_stop"}, "message_stop"), [sse({"type": "ping"}, "ping"), b"data: [DONE]\n\n"]),
    ("responses", [sse({"type": "error", "code": "server_error", "message": ERROR["message"]}, "error"),
                   sse({"type": "response.failed", "response": {"status": "failed", "error": {
                       "code": "server_error", "message": ERROR["message"]}}}, "response.failed")],
     sse({"type": "response.completed", "response": {"output": []}}, "response.completed"),
     [sse({"type": "response.created", "response": {}}, "response.created")]),
])
def test_each_api_tells_its_error_events_and_its_last_event(api: str, failures: list[bytes], last: bytes,
                                                            others: list[bytes]) -> None:
    reading = APIS[api]
    for failure in failures:
        (event,) = events(failure)
        assert reading.stream_failure(event) == ERROR["message"] and not reading.stream_end(event)
    (end,) = events(last)
    assert reading.stream_end(end) and reading.stream_failure(end) is None
    for other in others:
        (event,) = events(other)
        assert not reading.stream_end(event) and reading.stream_failure(event) is None


def test_an_error_event_without_a_message_says_what_it_held() -> None:
    (event,) = events(sse({"error": {"code": 500}}))
    assert APIS["chat"].stream_failure(event) == '{"code": 500}'

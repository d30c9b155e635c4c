"""An upstream's error body is read through the bounded reader: any text gives one message."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from serve.gateway.upstreams import _error_message


def test_the_message_of_an_openai_error_body_or_the_text() -> None:
    assert _error_message(400, '{"error": {"message": "bad lora"}}') == "HTTP 400: bad lora"
    assert _error_message(500, '{"message": "boom"}') == "HTTP 500: boom"
    assert _error_message(500, '{"error": "flat"}') == 'HTTP 500: {"error": "flat"}'
    assert _error_message(502, "1" * 5000).startswith("HTTP 502: 111")  # int() would refuse 5000 digits
    assert _error_message(502, "[" * 100_000).startswith("HTTP 502: [[[")


@given(st.text(max_size=300))
def test_any_body_text_gives_a_message(text: str) -> None:
    assert _error_message(500, text).startswith("HTTP 500: ")

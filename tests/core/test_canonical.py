"""The canonical form descriptors are hashed over: spellings that mean the same prompt hash alike,
anything that changes the prompt does not, and the gateway's `describe` uses exactly these functions."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from core.canonical import NOT_PROMPT, canonical_request, message_digest, request_digest
from serve.gateway.capture import CaptureJob, describe

text = st.text(max_size=20)
numbers = st.integers(-10**6, 10**6)
BILLING = {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332.af2; cc_entrypoint=sdk-py;"}


@given(text)
def test_a_string_content_is_one_text_block(value):
    assert message_digest("messages", {"role": "user", "content": value}) == message_digest(
        "messages", {"role": "user", "content": [{"type": "text", "text": value}]})
    assert message_digest("chat", {"role": "user", "content": value}) == message_digest(
        "chat", {"role": "user", "content": [{"type": "text", "text": value}]})
    assert message_digest("responses", {"role": "user", "content": value}) == message_digest(
        "responses", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": value}]})


@given(text, numbers)
def test_null_keys_cache_control_and_whole_floats_are_spellings(value, number):
    plain = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": value}],
             "n": number}
    respelled = {"role": "user", "name": None, "n": float(number),
                 "content": [{"type": "tool_result", "tool_use_id": "t1", "content": value,
                              "cache_control": {"type": "ephemeral"}}]}
    assert message_digest("messages", plain) == message_digest("messages", respelled)


@given(text, text)
def test_what_changes_the_prompt_changes_the_hash(first, second):
    one = {"role": "user", "content": first}
    other = {"role": "user", "content": second}
    assert (message_digest("messages", one) == message_digest("messages", other)) == (first == second)
    assert message_digest("messages", one) != message_digest("messages", {**one, "role": "assistant"})
    assert message_digest("chat", {"role": "user", "content": "1"}) != message_digest(
        "chat", {"role": "user", "content": 1})


def body(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"model": "worker", "max_tokens": 64, "stream": True, "temperature": 0,
                            "metadata": {"user_id": "{\"session_id\": \"s\"}"},
                            "system": [BILLING, {"type": "text", "text": "You keep the ledger.",
                                                 "cache_control": {"type": "ephemeral"}}],
                            "messages": [{"role": "user", "content": "Is INV-7 paid?"}],
                            "tools": [{"name": "lookup", "input_schema": {"type": "object"}}]}
    return {**base, **changes}


def test_the_request_hash_leaves_out_what_the_gateway_sets_and_what_only_carries_the_answer():
    reference = request_digest("messages", body())
    for field, value in (("model", "worker-base"), ("max_tokens", 8), ("stream", False), ("metadata", None),
                         ("tool_choice", {"type": "any"})):
        assert request_digest("messages", body(**{field: value})) == reference, field
    strict = body(tools=[{"name": "lookup", "input_schema": {"type": "object"}, "strict": True}])
    assert request_digest("messages", strict) == reference  # a forced route makes tools strict
    no_billing = body(system=[{"type": "text", "text": "You keep the ledger."}])
    assert request_digest("messages", no_billing) == reference
    assert request_digest("messages", body(system="You keep the ledger.")) == reference
    assert {"model", "tool_choice", "stream", "metadata"} <= NOT_PROMPT


def test_the_request_hash_covers_the_prompt_and_the_sampling():
    reference = request_digest("messages", body())
    for field, value in (("temperature", 0.7), ("system", "You are someone else."),
                         ("tools", [{"name": "lookup", "input_schema": {"type": "object", "x": 1}}]),
                         ("messages", [{"role": "user", "content": "Is INV-8 paid?"}]),
                         ("thinking", {"type": "adaptive"})):
        assert request_digest("messages", body(**{field: value})) != reference, field


def test_the_gateway_describes_a_request_with_these_functions():
    request = body()
    job = CaptureJob(key="k", request_id="k", workspace="ws-a", session="s-1", route="worker", adapter="worker-base",
                     kind="production", body=request, answer={"role": "assistant", "content": "Paid."},
                     duration_s=0.1, captured_at="2026-12-03T10:00:00Z", api="messages", forced=True)
    row = describe(job, "descriptor")
    assert row.hashing == "canonical" and row.forced
    assert row.request_sha256 == request_digest("messages", request)
    assert row.message_hashes == [message_digest("messages", m) for m in request["messages"]]
    assert row.thread == row.message_hashes[0][:16]
    assert json.dumps(canonical_request("messages", request)).count("cache_control") == 0

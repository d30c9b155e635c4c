"""Resolving descriptors: the gateway's own `describe` makes each capture, the transcript corpus
must reproduce its hashes, and every refusal names its reason."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.canonical import message_digest
from core.capture_store import RAW, CapturedDecision, message_hash, request_sha256
from replay.corpus.resolve import (
    CaptureRefusal,
    KeysError,
    RefusalReason,
    Resolved,
    load_keys,
    resolve,
)
from replay.corpus.transcripts import TranscriptDir
from serve.gateway.apis import APIS
from tests.support.deferred import answer as support_answer
from tests.support.deferred import call, descriptor, messages_answer, tool_use, write_session
from tests.support.hostile import hostile_bytes

TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in ("lookup", "search")]
PARAMS = {"max_tokens": 48, "temperature": 0}


def answer(tool: str = "lookup", arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return support_answer(tool, arguments or {"id": "INV-7"})


def captured(messages: list[dict[str, Any]], reply: dict[str, Any], *, tools: list | None = TOOLS,
             tool_choice: Any = None, params: dict[str, Any] = PARAMS, session: str = "s-1") -> CapturedDecision:
    return descriptor(messages, reply, session=session, tools=tools, tool_choice=tool_choice, params=params)


def corpus(root: Path, messages: list[dict[str, Any]], *, tools: list | None = TOOLS, tool_choice: Any = None,
           params: dict[str, Any] = PARAMS, session: str = "s-1") -> TranscriptDir:
    write_session(root, messages, session=session, tools=tools, tool_choice=tool_choice, params=params)
    return TranscriptDir(root)


# --- every message shape: the transcript's hashes are the gateway's ---------------------------

text = st.text(min_size=0, max_size=30)  # any unicode, quotes, escapes, surrogate-free
values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text,
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
                      max_leaves=8)
parts = st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": text}), min_size=1, max_size=3)
user = st.fixed_dictionaries({"role": st.sampled_from(["user", "system"]), "content": text | parts},
                             optional={"name": text})
assistant = st.fixed_dictionaries(
    {"role": st.just("assistant"),
     "tool_calls": st.lists(st.builds(call, st.sampled_from(["lookup", "search"]), st.dictionaries(text, values),
                                      text), min_size=1, max_size=2)},
    optional={"content": st.none() | text})
tool_result = st.fixed_dictionaries({"role": st.just("tool"), "tool_call_id": text, "content": text | parts})
history = st.lists(st.one_of(user, assistant, tool_result), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=history, reply=st.sampled_from([answer(), answer("search", {"q": "ä"}),
                                                {"role": "assistant", "content": "Done."}]),
       tool_choice=st.sampled_from([None, "auto", "required", {"type": "function", "function": {"name": "lookup"}}]))
def test_the_transcript_reproduces_every_hash_the_gateway_took(tmp_path_factory, messages, reply, tool_choice):
    root = tmp_path_factory.mktemp("corpus")
    decision = captured(messages, reply, tool_choice=tool_choice)
    resolved = resolve(decision, corpus(root, [*messages, reply], tool_choice=tool_choice))
    assert isinstance(resolved, Resolved), resolved
    assert resolved.request_verified and resolved.request["messages"] == messages
    assert resolved.request["tools"] == TOOLS
    assert resolved.arguments == (json.loads(reply["tool_calls"][0]["function"]["arguments"])
                                  if "tool_calls" in reply else None)


def test_a_null_key_or_a_text_block_is_the_same_message(tmp_path):
    """The hashes are over the canonical form: a key written as null, a string written as one text block
    and a whole float written as an integer are the message the gateway saw."""
    messages = [{"role": "user", "content": "Is INV-7 paid?"}]
    decision = captured(messages, answer())
    respelled = [{"role": "user", "content": [{"type": "text", "text": "Is INV-7 paid?"}], "tool_calls": None,
                  "tool_call_id": None}]
    resolved = resolve(decision, corpus(tmp_path, [*respelled, answer()], params={**PARAMS, "temperature": 0.0}))
    assert isinstance(resolved, Resolved) and resolved.request_verified, resolved


def test_a_store_written_before_the_canonical_form_still_resolves_verbatim(tmp_path):
    """A `raw` row (hashed over the body as sent, before the canonical form) is checked by its own hashes:
    the verbatim transcript proves it, a respelled one does not."""
    messages = [{"role": "user", "content": "Is INV-7 paid?"}]
    decision = legacy(captured(messages, answer()), messages, TOOLS, PARAMS)
    assert isinstance(resolve(decision, corpus(tmp_path / "a", [*messages, answer()])), Resolved)
    padded = [{"role": "user", "content": "Is INV-7 paid?", "tool_calls": None, "tool_call_id": None}]
    refused = resolve(decision, corpus(tmp_path / "b", [*padded, answer()]))
    assert isinstance(refused, CaptureRefusal) and refused.reason == RefusalReason.HASH_MISMATCH and "message 0 (user)" in refused.detail


def legacy(decision: CapturedDecision, messages: list[dict[str, Any]], tools: list[Any],
           params: dict[str, Any]) -> CapturedDecision:
    """The row a gateway wrote before the canonical form: hashes over the body as sent."""
    body = {**params, "model": decision.adapter, "messages": messages, "tools": tools}
    return replace(decision, hashing=RAW, message_hashes=[message_hash(m) for m in messages],
                   request_sha256=request_sha256(body))


HISTORY = [{"role": "system", "content": "You keep the ledger."}, {"role": "user", "content": "Is INV-7 paid?"},
           answer("search", {"customer": "ACME"}), {"role": "tool", "tool_call_id": "c1", "content": "[]"}]


def test_an_edited_transcript_is_refused(tmp_path):
    decision = captured(HISTORY, answer())
    edited = [*HISTORY[:1], {"role": "user", "content": "Is INV-8 paid?"}, *HISTORY[2:], answer()]
    refused = resolve(decision, corpus(tmp_path, edited))
    assert refused == CaptureRefusal(RefusalReason.HASH_MISMATCH, "ws-a/s-1: message 1 (user) is not the one captured "
                                                    "(the transcript changed)")


@pytest.mark.parametrize("kept", [2, 4])
def test_a_session_cut_short_is_refused(tmp_path, kept):
    refused = resolve(captured(HISTORY, answer()), corpus(tmp_path, HISTORY[:kept]))
    assert isinstance(refused, CaptureRefusal) and refused.reason == RefusalReason.TURN_MISSING
    assert f"needs 4 message(s) and the answer after them; the transcript has {kept}" in refused.detail


def test_a_missing_or_unreadable_session_is_refused(tmp_path):
    source = corpus(tmp_path, [*HISTORY, answer()], session="other")
    assert resolve(captured(HISTORY, answer()), source).reason == RefusalReason.SESSION_MISSING  # type: ignore[union-attr]
    (tmp_path / "ws-a" / "s-1.jsonl").write_text("{oops\n")
    refused = resolve(captured(HISTORY, answer()), source)
    assert isinstance(refused, CaptureRefusal) and refused.reason == RefusalReason.TRANSCRIPT_UNREADABLE and "s-1.jsonl:1:" in refused.detail


def test_the_answer_must_be_the_recorded_call(tmp_path):
    decision = captured(HISTORY, answer("lookup", {"id": "INV-7"}))
    for other in (answer("search", {"id": "INV-7"}), answer("lookup", {"invoice": "INV-7"}),
                  {"role": "assistant", "content": "No call."}):
        refused = resolve(decision, corpus(tmp_path, [*HISTORY, other]))
        assert isinstance(refused, CaptureRefusal) and refused.reason == RefusalReason.ANSWER_MISMATCH, other
    refused = resolve(decision, corpus(tmp_path, [*HISTORY, {"role": "user", "content": "hello?"}]))
    assert isinstance(refused, CaptureRefusal) and refused.reason == RefusalReason.TURN_MISSING and "not the assistant's" in refused.detail


def test_what_the_request_hash_proves_and_what_messages_mode_accepts(tmp_path):
    """The request hash covers the whole body (params, tool schemas, tool choice); a transcript that
    does not record the params is refused by default and accepted, unverified, on its messages."""
    decision = captured(HISTORY, answer())
    unrecorded = corpus(tmp_path, [*HISTORY, answer()], params={})
    refused = resolve(decision, unrecorded)
    assert isinstance(refused, CaptureRefusal) and refused.reason == RefusalReason.HASH_MISMATCH and "request hash" in refused.detail
    accepted = resolve(decision, unrecorded, verify="messages")
    assert isinstance(accepted, Resolved) and not accepted.request_verified
    # messages mode still refuses another offer: other tools, or another tool choice
    for tools, choice in (([TOOLS[0]], None), (TOOLS, "required")):
        other = corpus(tmp_path, [*HISTORY, answer()], tools=tools, tool_choice=choice)
        refused = resolve(decision, other, verify="messages")
        assert isinstance(refused, CaptureRefusal) and refused.reason == RefusalReason.OFFER_MISMATCH
    # a changed tool schema with the same names: only the request hash sees it
    schema = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "x": 1}}}, TOOLS[1]]
    assert resolve(decision, corpus(tmp_path, [*HISTORY, answer()], tools=schema)).reason == RefusalReason.HASH_MISMATCH  # type: ignore[union-attr]


def test_the_corpus_is_only_read(tmp_path):
    source = corpus(tmp_path, [*HISTORY, answer()])
    path = tmp_path / "ws-a" / "s-1.jsonl"
    before = (path.read_bytes(), os.stat(path).st_mtime_ns, sorted(p.name for p in tmp_path.rglob("*")))
    path.chmod(0o444)
    assert isinstance(resolve(captured(HISTORY, answer()), source), Resolved)
    assert (path.read_bytes(), os.stat(path).st_mtime_ns, sorted(p.name for p in tmp_path.rglob("*"))) == before


def test_workspace_keys_file(tmp_path, monkeypatch):
    keys = tmp_path / "keys.toml"
    keys.write_text('[keys]\n"ws-a" = "' + "ab" * 16 + '"\n')
    keys.chmod(0o600)
    assert load_keys(keys) == {"ws-a": bytes.fromhex("ab" * 16)}
    monkeypatch.setenv("WORKER_REPLAY_PSEUDONYM_KEYS", str(keys))
    assert load_keys(None) == {"ws-a": bytes.fromhex("ab" * 16)}
    keys.write_text('[keys]\n"ws-a" = "abc"\n')
    with pytest.raises(KeysError, match=r"keys.toml:2: the key of workspace 'ws-a' must be at least 32 hex digits"):
        load_keys(keys)
    monkeypatch.delenv("WORKER_REPLAY_PSEUDONYM_KEYS")
    with pytest.raises(KeysError, match="--keys FILE"):
        load_keys(None)


@pytest.mark.parametrize("mode", [0o644, 0o604, 0o640, 0o660])
def test_a_keys_file_others_can_read_is_refused_with_the_chmod_to_run(tmp_path, mode):
    """docs/production.md: the keys file is readable by the replay user only (mode 600)."""
    keys = tmp_path / "keys.toml"
    keys.write_text('[keys]\n"ws-a" = "' + "ab" * 16 + '"\n')
    keys.chmod(mode)
    with pytest.raises(KeysError, match=rf"other users can access the workspace keys file \(mode {mode:o}\).*chmod 600 {keys}"):
        load_keys(keys)
    keys.chmod(0o400)
    assert load_keys(keys) == {"ws-a": bytes.fromhex("ab" * 16)}


def test_keys_are_per_workspace_name(tmp_path):
    keys = tmp_path / "keys.toml"
    keys.write_text('[keys]\n"../ws-a" = "' + "ab" * 16 + '"\n')
    keys.chmod(0o600)
    with pytest.raises(KeysError, match="keys"):
        load_keys(keys)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=hostile_bytes([b"[keys]", b'"ws-a" = "' + b"ab" * 16 + b'"', b'"ws-b" = 3']))
def test_any_keys_file_bytes_are_keys_or_one_error_naming_the_file(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "keys.toml"
    path.write_bytes(data)
    try:
        assert all(isinstance(k, bytes) for k in load_keys(path).values())
    except KeysError as exc:
        assert str(exc).startswith(str(path))


def test_keys_file_errors_name_the_workspace_and_the_rule_in_words(tmp_path):
    keys = tmp_path / "keys.toml"
    keys.write_text('[keys]\n"ws-a" = "' + "ab" * 16 + '"\n"bad name" = "' + "cd" * 16 + '"\n'
                    "ws-short = \"abcd\"\n'ws-x' = \"" + "zz" * 16 + '"\n"ws-n" = 5\n')
    keys.chmod(0o600)
    with pytest.raises(KeysError) as caught:
        load_keys(keys)
    message = str(caught.value)
    assert f"{keys}:3: 'bad name' is not a workspace name (1–128 characters of A–Z" in message
    assert f"{keys}:4: the key of workspace 'ws-short' must be at least 32 hex digits" in message
    assert "it has 4 hex digits" in message
    assert f"{keys}:5: the key of workspace 'ws-x' must be" in message and "not hex digits" in message
    assert f"{keys}:6: the key of workspace 'ws-n' must be a string of hex digits, not a TOML int" in message
    assert "ws-a" not in message  # a good entry is not a problem
    for pydantic_words in ("[key]", "keys.bad", "keys.ws", "String should match pattern", "Input should be"):
        assert pydantic_words not in message
    keys.write_text('keys = 1\nother = "x"\n')
    with pytest.raises(KeysError, match=r"'other' is not part of a workspace keys file[\s\S]*`keys` must be a table"):
        load_keys(keys)


# --- sessions on the Anthropic Messages and OpenAI Responses APIs ---------------------------------

MSG_TOOLS = [{"name": "lookup", "description": "One invoice.", "input_schema": {
    "type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}},
    {"name": "search", "input_schema": {"type": "object"}}]
SYSTEM = [{"type": "text", "text": "You keep the ledger.", "cache_control": {"type": "ephemeral"}}]
MSG_HISTORY = [{"role": "user", "content": "Is INV-7 paid?"},
               tool_use("search", {"customer": "ACME"}, "toolu_1"),
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True,
                                             "content": "the search service timed out"}]}]
MSG_ANSWER = tool_use("lookup", {"id": "INV-7"}, "toolu_2")


def messages_captured(history: list[dict[str, Any]], reply: dict[str, Any], **kw: Any) -> CapturedDecision:
    return descriptor(history, messages_answer(reply), tools=MSG_TOOLS, tool_choice={"type": "any"}, params=PARAMS,
                      api="messages", system=SYSTEM, **kw)


def messages_corpus(root: Path, messages: list[dict[str, Any]], *, system: Any = SYSTEM, api: Any = "messages",
                    params: dict[str, Any] = PARAMS) -> TranscriptDir:
    write_session(root, messages, tools=MSG_TOOLS, tool_choice={"type": "any"}, params=params, api=api,
                  system=system)
    return TranscriptDir(root)


def test_a_messages_session_reproduces_the_gateways_hashes_in_its_own_shape(tmp_path):
    """The descriptor's message hashes are over the Anthropic messages in their canonical form (not a chat
    rendering of them), the request hash over the body with `system`; the answer is read from its `tool_use` block."""
    decision = messages_captured(MSG_HISTORY, MSG_ANSWER)
    assert decision.api == "messages"
    assert decision.message_hashes == [message_digest("messages", m) for m in MSG_HISTORY]
    assert (decision.tools_offered, decision.tool_choice, decision.chosen_keys) == (["lookup", "search"], "required",
                                                                                     ["id"])
    resolved = resolve(decision, messages_corpus(tmp_path, [*MSG_HISTORY, MSG_ANSWER]))
    assert isinstance(resolved, Resolved) and resolved.request_verified and resolved.api == "messages"
    assert resolved.request == {"system": SYSTEM, "messages": MSG_HISTORY, "tools": MSG_TOOLS,
                                "tool_choice": {"type": "any"}}
    assert resolved.arguments == {"id": "INV-7"}


def test_a_messages_system_prompt_is_proven_by_the_request_hash_only(tmp_path):
    """`system` is not one of the hashed messages: another system prompt passes the message hashes and
    fails the request hash, so only `--verify messages` accepts it (unverified)."""
    decision = messages_captured(MSG_HISTORY, MSG_ANSWER)
    other = messages_corpus(tmp_path, [*MSG_HISTORY, MSG_ANSWER], system="You are someone else.")
    refused = resolve(decision, other)
    assert isinstance(refused, CaptureRefusal) and refused.reason == RefusalReason.HASH_MISMATCH and "request hash" in refused.detail
    accepted = resolve(decision, other, verify="messages")
    assert isinstance(accepted, Resolved) and not accepted.request_verified


def test_a_messages_transcript_refuses_what_differs(tmp_path):
    decision = messages_captured(MSG_HISTORY, MSG_ANSWER)
    other_call = tool_use("lookup", {"invoice": "INV-7"}, "toolu_2")
    assert resolve(decision, messages_corpus(tmp_path / "a", [*MSG_HISTORY, other_call])).reason == RefusalReason.ANSWER_MISMATCH  # type: ignore[union-attr]
    edited = [{**MSG_HISTORY[0], "content": [{"type": "text", "text": "Is INV-8 paid?"}]}, *MSG_HISTORY[1:]]
    assert resolve(decision, messages_corpus(tmp_path / "b", [*edited, MSG_ANSWER])).reason == RefusalReason.HASH_MISMATCH  # type: ignore[union-attr]
    chat = messages_corpus(tmp_path / "c", [*MSG_HISTORY, MSG_ANSWER], system=None, api="chat")
    refused = resolve(decision, chat)
    assert isinstance(refused, CaptureRefusal) and refused.reason == RefusalReason.API_MISMATCH and "messages API" in refused.detail
    user_next = messages_corpus(tmp_path / "d", [*MSG_HISTORY, {"role": "user", "content": "hello?"}])
    assert resolve(decision, user_next).reason == RefusalReason.TURN_MISSING  # type: ignore[union-attr]


def test_a_responses_session_resolves_from_its_input_items(tmp_path):
    tools = [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]
    items = [{"role": "user", "content": "Is INV-7 paid?"},
             {"type": "function_call", "call_id": "fc_1", "name": "lookup", "arguments": '{"id": "INV-7"}'},
             {"type": "function_call_output", "call_id": "fc_1", "output": '{"error": "timed out"}'}]
    output = {"type": "function_call", "call_id": "fc_2", "name": "lookup", "arguments": '{"id": "INV-7"}'}
    decision = descriptor(items, APIS["responses"].answer({"output": [output]}), tools=tools, params=PARAMS,  # type: ignore[arg-type]
                          api="responses", system="You keep the ledger.")
    write_session(tmp_path, [*items, output], tools=tools, params=PARAMS, api="responses",
                  system="You keep the ledger.")
    resolved = resolve(decision, TranscriptDir(tmp_path))
    assert isinstance(resolved, Resolved) and resolved.request_verified, resolved
    assert resolved.request == {"instructions": "You keep the ledger.", "input": items, "tools": tools}
    assert resolved.arguments == {"id": "INV-7"}

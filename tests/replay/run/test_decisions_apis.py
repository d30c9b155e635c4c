"""Decisions captured on the Anthropic Messages and OpenAI Responses APIs, sent back through them:
the body each API takes (memory in its system field, its output limit), and the answer read as the
gateway reads it. No endpoint: bodies and answers are checked as data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core.records import Decision
from replay.memory.inject import synthetic_rule_id
from replay.run.decisions import plan, request_body, result_record
from replay.run.directory import RunError
from replay.run.endpoint import Outcome, api_url
from replay.run.run_config import RunConfig
from replay.suite import Suite, SuiteManifest

RULE = "Look invoices up by id."
MSG_TOOLS = [{"name": "lookup", "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}}},
             {"name": "search", "input_schema": {"type": "object"}}]
SYSTEM = [{"type": "text", "text": "You keep the ledger.", "cache_control": {"type": "ephemeral"}},
          {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]
TURN = [{"role": "user", "content": [{"type": "text", "text": "Is INV-7 paid?"}]}]


def decision(request: dict[str, Any], api: str | None = "messages", i: int = 1) -> Decision:
    return Decision.model_validate({
        "id": f"d-{i}", "stratum": "verified_action", "cluster": "c", "workspace": "ws-a", "session": f"s-{i}",
        "captured_at": "2026-07-01T10:00:00Z", **({"api": api} if api else {}), "request": request,
        "target": {"tool": "lookup", "arg_keys": ["id"]}})


def config(api: str = "chat") -> RunConfig:
    return RunConfig.model_validate({
        "endpoint": {"base_url": "http://127.0.0.1:9/v1", "api": api}, "decoding": {"max_tokens": 24, "seed": 5},
        "arms": [{"name": "bare", "model": "worker-base"}, {"name": "rule", "model": "worker-base",
                                                            "memory": f"rule:{RULE}"}]})


def items(*decisions: Decision, cfg: RunConfig | None = None):
    """The planned work, arm `bare` first."""
    suite = Suite(Path("."), SuiteManifest.model_validate({"name": "s", "version": "1",
                                                           "created": "2026-07-01T00:00:00Z"}), decisions, "0" * 64)
    return sorted(plan(suite, cfg or config(), set()), key=lambda item: item.arm.name)


MESSAGES = {"system": SYSTEM, "messages": TURN, "tools": MSG_TOOLS, "tool_choice": {"type": "any"}}


def test_a_messages_decision_is_sent_as_a_messages_request_with_memory_in_its_system_field():
    bare, ruled = items(decision(MESSAGES))
    cfg = config()
    assert api_url(cfg, bare.api) == "http://127.0.0.1:9/v1/messages"
    body = request_body(cfg, bare)
    assert body == {**MESSAGES, "model": "worker-base", "max_tokens": 24, "temperature": 0.0, "top_p": 1.0, "seed": 5}
    ruled_body = request_body(cfg, ruled)
    text = ruled_body["system"][0]["text"]  # the footer joins the prompt's last text block, with its blank line
    assert text.startswith("You keep the ledger.\n\n<standing_rules>\nEvery rule below is mandatory.\n- " + RULE)
    assert ruled_body["system"][0]["cache_control"] == {"type": "ephemeral"} and ruled_body["system"][1] == SYSTEM[1]
    assert ruled.rule_ids == (synthetic_rule_id(RULE),) and bare.rule_ids == ()
    assert ruled_body["messages"] == TURN and SYSTEM[0]["text"] == "You keep the ledger."  # nothing else changed
    string_system = request_body(cfg, items(decision({**MESSAGES, "system": "Terse."}))[1])
    assert string_system["system"].startswith("Terse.\n\n<standing_rules>")
    no_system = {k: v for k, v in MESSAGES.items() if k != "system"}
    assert request_body(cfg, items(decision(no_system))[1])["system"].startswith("<standing_rules>")
    assert "system" not in request_body(cfg, items(decision(no_system))[0])


def test_a_messages_answer_is_read_from_its_tool_use_block_and_scored_by_key_set():
    bare = items(decision(MESSAGES))[0]
    answer = {"type": "message", "role": "assistant", "stop_reason": "tool_use",
              "content": [{"type": "text", "text": "Checking."},
                          {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"id": "INV-7"}}],
              "usage": {"input_tokens": 120, "output_tokens": 9}}
    record = result_record(bare, Outcome(answer, None, 1, 0.2))
    assert record.parsed.outcome == "ok" and record.parsed.calls[0].tool == "lookup"
    assert record.score.joint_correct and record.score.tool_correct
    assert (record.usage.prompt_tokens, record.usage.completion_tokens) == (120, 9)
    assert record.raw_output["finish_reason"] == "tool_use" and record.raw_output["message"]["content"] == "Checking."
    wrong = {**answer, "content": [{"type": "tool_use", "id": "t", "name": "lookup", "input": {"invoice": "INV-7"}}]}
    assert result_record(bare, Outcome(wrong, None, 1, 0.2)).score.joint_correct is False
    unknown = {**answer, "content": [{"type": "tool_use", "id": "t", "name": "delete", "input": {}}]}
    assert result_record(bare, Outcome(unknown, None, 1, 0.2)).parsed.outcome == "unknown_tool"
    assert result_record(bare, Outcome({"type": "error"}, None, 1, 0.2)).parsed.outcome == "empty_response"


def test_a_decision_without_an_api_goes_through_the_runs_endpoint_api():
    unnamed = decision(MESSAGES, api=None)
    assert [item.api for item in items(unnamed)] == ["chat", "chat"]
    sent = items(unnamed, cfg=config("messages"))
    assert [item.api for item in sent] == ["messages", "messages"]
    assert request_body(config("messages"), sent[1])["system"][0]["text"].startswith("You keep the ledger.\n\n<")
    named = decision({"messages": TURN, "tools": [], "tool_choice": "auto"}, api="chat")
    assert [item.api for item in items(named, cfg=config("messages"))] == ["chat", "chat"]  # its own api wins
    chat_only = decision({"messages": TURN, "tool_choice": "required"}, api=None)
    with pytest.raises(RunError, match="decision d-1: its request is not a messages request.*tool_choice"):
        items(chat_only, cfg=config("messages"))


def test_a_responses_decision_is_sent_with_input_instructions_and_max_output_tokens():
    tools = [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]
    request = {"instructions": "You keep the ledger.", "input": [{"role": "user", "content": "Is INV-7 paid?"}],
               "tools": tools}
    bare, ruled = items(decision(request, api="responses"))
    assert api_url(config(), bare.api).endswith("/v1/responses")
    body = request_body(config(), ruled)
    assert body["instructions"].startswith("You keep the ledger.\n\n<standing_rules>") and body["input"] == request["input"]
    assert body["max_output_tokens"] == 24 and "max_tokens" not in body and "messages" not in body
    answer = {"status": "completed", "usage": {"input_tokens": 50, "output_tokens": 7}, "output": [
        {"type": "function_call", "call_id": "fc_1", "name": "lookup", "arguments": '{"id": "INV-7"}'}]}
    record = result_record(bare, Outcome(answer, None, 1, 0.1))
    assert record.score.joint_correct and record.usage.completion_tokens == 7


def test_the_runner_never_branches_on_an_api_name() -> None:
    """What differs per API (where memory goes, how the body is built) is read from core/wire.py's `Wire`,
    so a fourth API adds a wire, not branches in the runner (issue 43, item 6)."""
    import ast
    from pathlib import Path

    import replay.run.decisions
    from core.wire import WIRES

    tree = ast.parse(Path(replay.run.decisions.__file__).read_text(encoding="utf-8"))
    names = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Compare)
             for side in (node.left, *node.comparators) if isinstance(side, ast.Constant) and side.value in WIRES]
    assert names == [], f"replay/run/decisions.py compares with an API name on line(s) {names}"


def test_a_result_carries_its_decisions_thread_for_the_breakdown_by_thread():
    sub = Decision.model_validate({**decision(MESSAGES).model_dump(mode="json", exclude_none=True),
                                   "thread": "agent-a1", "parent_call": "toolu_1"})
    answer = {"type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": 1, "output_tokens": 1}}
    assert result_record(items(sub)[0], Outcome(answer, None, 1, 0.1)).thread == "agent-a1"
    assert result_record(items(decision(MESSAGES))[0], Outcome(answer, None, 1, 0.1)).thread is None

"""Runner mechanics that need no endpoint: resume bookkeeping, config diffs, request order and bodies."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings

from core.errors import WorkerTierError
from core.records import Decision
from replay.run.decisions import WorkItem, order_items, request_body, result_record
from replay.run.directory import RunError, manifest_diff, prepare_run_dir, read_completed
from replay.run.endpoint import Outcome
from replay.run.run_config import RunConfig
from tests.support.hostile import hostile_bytes

TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}}
         for n in ("list_invoices", "search_invoices")]


def decision(i: int, system: str = "sys A") -> Decision:
    return Decision.model_validate({
        "id": f"d-{i}", "stratum": "verified_action", "cluster": "c", "workspace": "ws-a", "session": f"s-{i}",
        "captured_at": "2026-07-01T10:00:00Z",
        "request": {"messages": [{"role": "system", "content": system}, {"role": "user", "content": f"task {i}"}],
                    "tools": TOOLS, "tool_choice": "required", "parallel_tool_calls": False},
        "target": {"tool": "list_invoices", "arg_keys": ["filter", "filter.customer_id"]},
    })


def config(**runner) -> RunConfig:
    return RunConfig.model_validate({
        "endpoint": {"base_url": "http://127.0.0.1:9/v1"}, "decoding": {"max_tokens": 32, "seed": 5},
        "runner": runner,
        "arms": [{"name": "base", "model": "worker-base"}, {"name": "cand", "model": "cand-v1",
                                                           "decoding": {"max_tokens": 16}}]})


def item(arm_index: int, d: Decision, cfg: RunConfig | None = None) -> WorkItem:
    cfg = cfg or config()
    return WorkItem(cfg.arms[arm_index], d, d.request.messages, ())


def test_torn_last_line_is_cut_and_not_counted(tmp_path):
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps({"arm": "base", "decision_id": "d-1"}) + "\n" + '{"arm": "base", "deci')
    assert read_completed(results) == {("base", "d-1")}
    assert results.read_text().endswith("}\n")


def test_unreadable_middle_line_is_an_error_with_file_and_line(tmp_path):
    results = tmp_path / "results.jsonl"
    results.write_text('{"arm": "a", "decision_id": "x"}\nnot json\n{"arm": "a", "decision_id": "y"}\n')
    with pytest.raises(RunError, match=r"results.jsonl:2"):
        read_completed(results)


@pytest.mark.parametrize("line", [b"\xff\xfe{}", b"[]", b"7", b'{"arm": "a"}'])
def test_a_middle_line_that_is_not_a_result_object_is_an_error_with_file_and_line(tmp_path, line):
    results = tmp_path / "results.jsonl"
    results.write_bytes(b'{"arm": "a", "decision_id": "x"}\n' + line + b'\n{"arm": "a", "decision_id": "y"}\n')
    with pytest.raises(RunError, match=r"results.jsonl:2"):
        read_completed(results)


@pytest.mark.parametrize("line", [b"[" * 50_000 + b"]" * 50_000, b'{"arm": "a", "decision_id": "\xff"}', b"[1, 2]",
                                  b'{"arm": ["a"], "decision_id": "y"}', b'{"arm": "a", "decision_id": ' + b"9" * 5000 + b"}"])
def test_resuming_over_any_unreadable_line_is_one_error_with_file_and_line(tmp_path, line):
    """`run` and `sandbox run` resume through read_completed: a deep, non-UTF-8, non-object or
    mistyped line is a RunError naming results.jsonl:2, never a RecursionError or TypeError."""
    results = tmp_path / "results.jsonl"
    results.write_bytes(b'{"arm": "a", "decision_id": "x"}\n' + line + b"\n")
    with pytest.raises(RunError, match=r"results.jsonl:2: unreadable result line"):
        read_completed(results)


def test_a_run_json_that_is_not_a_manifest_is_refused(tmp_path):
    (tmp_path / "run").mkdir()
    for text in ("[" * 50_000 + "]" * 50_000, "[1]", '{"config": [1], "suite": "s"}'):
        (tmp_path / "run" / "run.json").write_text(text)
        with pytest.raises(WorkerTierError, match="run.json|refusing"):
            prepare_run_dir(tmp_path / "run", {"config": {}, "suite": {"sha256": "aaa"}})


def test_a_changed_config_or_suite_is_refused_with_what_changed(tmp_path):
    manifest = {"config": {"decoding": {"max_tokens": 32}}, "suite": {"sha256": "aaa"}}
    assert prepare_run_dir(tmp_path / "run", manifest) is False
    assert prepare_run_dir(tmp_path / "run", manifest) is True
    changed = {"config": {"decoding": {"max_tokens": 64}}, "suite": {"sha256": "bbb"}}
    with pytest.raises(RunError) as err:
        prepare_run_dir(tmp_path / "run", changed)
    assert "config.decoding.max_tokens: 32 -> 64" in str(err.value)
    assert "suite.sha256: 'aaa' -> 'bbb'" in str(err.value)
    assert manifest_diff(manifest, manifest) == []


def test_a_run_may_resume_through_another_endpoint_address(tmp_path):
    manifest = {"config": {"endpoint": {"base_url": "http://127.0.0.1:9000/v1"}, "arms": [{"name": "a"}]},
                "suite": {"sha256": "aaa"}}
    moved = {"config": {"endpoint": {"base_url": "http://127.0.0.1:9100/v1"}, "arms": [{"name": "a"}]},
             "suite": {"sha256": "aaa"}}
    assert prepare_run_dir(tmp_path / "run", manifest) is False
    assert prepare_run_dir(tmp_path / "run", moved) is True


def test_prefix_order_groups_requests_by_model_then_shared_prompt():
    items = [item(a, decision(i, system=f"sys {'AB'[i % 2]}")) for i in range(6) for a in (0, 1)]
    ordered = order_items(items, "prefix")
    models = [it.arm.model for it in ordered]
    assert models == sorted(models)
    systems = [it.messages[0]["content"] for it in ordered if it.arm.model == "worker-base"]
    assert systems == sorted(systems)
    assert sorted(map(id, ordered)) == sorted(map(id, items))


def test_a_replicate_runs_as_its_own_group_with_its_arms_request_and_labels_its_results():
    """In prefix order a replicate does not sit beside its original's identical requests (they would
    share a batch and a cache fill, and hide the noise between arms); its body is its original's."""
    cfg = RunConfig.model_validate({
        "endpoint": {"base_url": "http://127.0.0.1:9/v1"},
        "arms": [{"name": "base", "model": "worker-base"}, {"name": "base-aa", "replicate_of": "base"}]})
    items = [item(a, decision(i), cfg) for i in range(4) for a in (0, 1)]
    ordered = [it.arm.name for it in order_items(items, "prefix")]
    assert ordered == ["base"] * 4 + ["base-aa"] * 4
    assert request_body(cfg, items[0]) == request_body(cfg, items[1])
    outcome = Outcome({"choices": [{"message": {"role": "assistant", "content": "hi"}}]}, None, 1, 0.1)
    assert result_record(items[1], outcome).replicate_of == "base"
    assert result_record(items[0], outcome).replicate_of is None


def test_shuffled_order_is_a_seeded_permutation():
    items = [item(0, decision(i)) for i in range(20)]
    first, second = order_items(items, "shuffled", seed=1), order_items(items, "shuffled", seed=1)
    assert [i.decision.id for i in first] == [i.decision.id for i in second]
    assert [i.decision.id for i in first] != [i.decision.id for i in items]


def test_request_body_keeps_the_frozen_request_and_applies_arm_decoding():
    cfg = config()
    body = request_body(cfg, item(1, decision(1), cfg))
    assert body["model"] == "cand-v1" and body["max_tokens"] == 16 and body["seed"] == 5
    assert body["temperature"] == 0.0 and body["tool_choice"] == "required" and body["parallel_tool_calls"] is False
    assert body["tools"] == TOOLS


def test_a_transport_failure_becomes_a_scored_result_not_a_gap():
    record = result_record(item(0, decision(1)), Outcome(None, "HTTP 503: engine down", attempts=4, latency_s=0.0))
    assert record.parsed.outcome == "transport_error"
    assert record.score.joint_correct is False and "transport_error" in record.score.flags
    assert record.attempts == 4 and record.raw_output["error"] == "HTTP 503: engine down"


def test_a_structured_answer_is_parsed_and_scored():
    body = {"choices": [{"finish_reason": "tool_calls", "message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "list_invoices",
                                                      "arguments": '{"filter": {"customer_id": "c-9"}}'}}]}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 12}}
    record = result_record(item(0, decision(1)), Outcome(body, None, attempts=1, latency_s=0.25))
    assert record.parsed.outcome == "ok" and record.score.joint_correct is True
    assert record.usage.completion_tokens == 12 and record.latency_s == 0.25
    assert record.finished_at <= datetime.now(UTC)


def test_an_arm_limited_to_workspaces_plans_only_their_decisions():
    from replay.run.decisions import plan
    from replay.suite import Suite

    cfg = RunConfig.model_validate({"endpoint": {"base_url": "http://127.0.0.1:9/v1"}, "arms": [
        {"name": "all", "model": "m"}, {"name": "only-b", "model": "m", "workspaces": ["ws-b"]}]})
    decisions = [decision(1), decision(2).model_copy(update={"workspace": "ws-b"})]
    suite = Suite(path=None, manifest=None, decisions=tuple(decisions), sha256="x")
    planned = {(i.arm.name, i.decision.id) for i in plan(suite, cfg, done={("all", "d-1")})}
    assert planned == {("all", "d-2"), ("only-b", "d-2")}


def test_text_tool_calls_are_typed_by_the_decisions_tool_schema():
    """A Qwen3-Coder text answer is read as the engine would with the request's schemas."""
    tools = [{"type": "function", "function": {"name": "list_invoices", "parameters": {
        "type": "object", "properties": {"filter": {"type": "object"}}}}}]
    d = decision(1).model_copy(update={"request": decision(1).request.model_copy(update={"tools": tools})})
    content = "<tool_call>\n<function=list_invoices>\n<parameter=filter>\n{\"customer_id\": \"c-9\"}\n</parameter>\n</function>\n</tool_call>"
    body = {"choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": content}}]}
    record = result_record(item(0, d), Outcome(body, None, attempts=1, latency_s=0.1))
    assert record.parsed.first is not None and record.parsed.first.key_set == ["filter", "filter.customer_id"]
    assert record.score.joint_correct is True


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=hostile_bytes([b'{"arm": "a", "decision_id": "x"}', b'{"arm": "a", "decision_id": "y"}']))
def test_resuming_over_any_bytes_is_a_plan_or_one_error_with_file_and_line(tmp_path, data: bytes) -> None:
    results = tmp_path / "results.jsonl"
    results.write_bytes(data)
    try:
        done = read_completed(results)
    except RunError as exc:
        assert str(exc).startswith(f"{results}:")
    else:
        assert all(isinstance(arm, str) and isinstance(key, str) for arm, key in done)

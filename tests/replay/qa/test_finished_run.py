"""Finished runs read from the recorded Claude Code sessions: as recorded, none of the three ends in an answer
(two stop on a tool result, one on the runtime's API-error message); with planted endings (named so), the
thread, its calls, the guard's verdicts and the final record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.guard import GuardRules
from replay.corpus.claude_code import ClaudeCodeDir, read_session_file
from replay.qa.finished_run import Run, Unchecked, corpus_runs, read_run
from tests.replay.qa.corpus import RETRIES, append_answer, rebuilt, text
from tests.support.curation import LOOKUP, copy_workspace, session_path

DATA = Path(__file__).resolve().parents[1] / "corpus" / "data"
SUBAGENTS = "93bed59f-e58a-466d-b220-82348a6d365b"


def run_of(path: Path, session: str) -> Run | Unchecked:
    return read_run("ws", session, read_session_file(path, session), GuardRules())


def test_the_recorded_sessions_hold_no_finished_run_and_say_why() -> None:
    refused: list[str] = []
    runs = {r.session: r for r in corpus_runs([ClaudeCodeDir(DATA / "claude-code"),
                                               ClaudeCodeDir(DATA / "claude-code-subagents")], GuardRules(), refused)}
    assert refused == [] and all(isinstance(r, Unchecked) for r in runs.values())
    reasons = {session: r.reason for session, r in runs.items() if isinstance(r, Unchecked)}
    assert reasons == {
        LOOKUP: "no final answer: the thread ends in a tool result (record 4b4bce2a-2062-45ac-8d8f-613a14b4880f)",
        RETRIES: "no final answer: the thread ends in a tool result (record f1b1932a-6585-4087-a254-af6ff9a4bbf2)",
        SUBAGENTS: "no final answer: the thread ends in the runtime's API-error message "
                   "(record 5274e6c4-dc58-429d-ad35-6662bdbab5d9)"}


@pytest.fixture
def lookup(tmp_path: Path) -> Path:
    copy_workspace(tmp_path, "ws")
    return session_path(tmp_path, "ws", LOOKUP)


def test_a_planted_final_answer_makes_the_lookup_a_run(lookup: Path) -> None:
    final = append_answer(lookup, LOOKUP, text("Invoice INV-7 is paid."))
    assert rebuilt(lookup, LOOKUP)
    run = run_of(lookup, LOOKUP)
    assert isinstance(run, Run) and run.final_record == final
    assert [(c.tool, c.outcome) for c in run.calls] == [("mcp__inv__lookup", "failed"), ("mcp__inv__lookup", "ok"),
                                                        ("mcp__inv__lookup", "ok")]
    assert [c.input for c in run.calls] == [{"id": "INV-7"}] * 3
    assert [(c.record, c.result_record) for c in run.calls][0] == ("19d4c402-2c4a-40e6-b0ab-9ecdeed79ac6",
                                                                   "1391740e-e7dd-473e-a072-adaee90acd29")
    assert [c.id for c in run.last_results] == ["chatcmpl-tool-84f8cf759eb1131d"]
    assert [a.text for a in run.answer] == ["Invoice INV-7 is paid."]


def test_an_answer_spread_over_records_is_one_final_answer(lookup: Path) -> None:
    """Planted: a thinking record, then the text record of the same message, as Claude Code splits an answer."""
    first = append_answer(lookup, LOOKUP, [{"type": "thinking", "thinking": "…"}])
    lines = [json.loads(line) for line in lookup.read_text().splitlines()]
    record = next(line for line in lines if line.get("uuid") == first)
    second = {**record, "uuid": "0b7c1f40-0000-4000-8000-000000000002", "parentUuid": first,
              "message": {**record["message"], "content": text("Paid.")}}
    lookup.write_text(lookup.read_text() + json.dumps(second) + "\n")
    run = run_of(lookup, LOOKUP)
    assert isinstance(run, Run) and run.final_record == second["uuid"]
    assert [(a.record, a.text) for a in run.answer] == [(second["uuid"], "Paid.")]


@pytest.mark.parametrize(("content", "reason"), [
    ([{"type": "tool_use", "id": "t-9", "name": "mcp__inv__lookup", "input": {"id": "INV-7"}}], "a tool call"),
    ([{"type": "text", "text": "  "}], "no text"),
    ([{"type": "text", "text": "Let me check."},
      {"type": "tool_use", "id": "t-9", "name": "mcp__inv__lookup", "input": {}}], "a tool call"),
])
def test_an_ending_that_is_no_answer_is_unchecked(lookup: Path, content: list[dict[str, str]], reason: str) -> None:
    append_answer(lookup, LOOKUP, content)
    run = run_of(lookup, LOOKUP)
    assert isinstance(run, Unchecked) and reason in run.reason


def test_the_thread_is_the_chain_not_the_file(tmp_path: Path) -> None:
    """Planted: a rewound session, whose final answer hangs off the first prompt: the three refused Agent calls
    after it are an abandoned branch, not the run's."""
    copy_workspace(tmp_path, "ws")
    path = session_path(tmp_path, "ws", RETRIES)
    append_answer(path, RETRIES, text("INV-7 is paid."), parent="616b4cf6-912d-4291-9995-f1d5105b4d60")
    run = run_of(path, RETRIES)
    assert isinstance(run, Run) and run.calls == () and run.last_results == ()


def test_a_parent_chain_that_loops_is_unchecked(lookup: Path) -> None:
    final = append_answer(lookup, LOOKUP, text("Paid."))
    lines = [json.loads(line) for line in lookup.read_text().splitlines()]
    first = next(line for line in lines if line.get("type") == "user")
    first["parentUuid"] = final  # planted: the first prompt now hangs off the final answer
    lookup.write_text("".join(json.dumps(line) + "\n" for line in lines))
    run = run_of(lookup, LOOKUP)
    assert isinstance(run, Unchecked) and "loops" in run.reason

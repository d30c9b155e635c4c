"""Claude Code's own session files as the corpus: real files, written by Claude Code 2.1.x itself through
the real gateway and engine (recorded by scripts/record_claude_code.py; nothing written by hand), beside
the gateway's descriptors of the same calls. Every descriptor resolves from them; each way a file can be
spoiled after the fact refuses only what it touches, with its reason."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from core.canonical import message_digest
from core.capture_store import CapturedDecision
from replay.corpus.claude_code import ClaudeCodeDir, logged_calls, read_session_file
from replay.corpus.resolve import (
    CaptureRefusal,
    RefusalReason,
    Resolved,
    resolve,
)
from replay.corpus.sources import open_source
from replay.corpus.transcripts import TranscriptDir

DATA = Path(__file__).parent / "data" / "claude-code"
WORKSPACE = "ws-agent"


def captures() -> list[CapturedDecision]:
    return [CapturedDecision(**json.loads(line)) for line in (DATA / "captures.jsonl").read_text().splitlines()]


def files(root: Path = DATA) -> dict[str, Path]:
    """Session id -> its main file."""
    return {p.stem: p for p in sorted((root / WORKSPACE / "projects").glob("*/*.jsonl"))}


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_records(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A copy of the recorded corpus, to spoil."""
    shutil.copytree(DATA / WORKSPACE, tmp_path / WORKSPACE)
    return tmp_path


def by_session(decisions: list[CapturedDecision]) -> dict[str, list[CapturedDecision]]:
    grouped: dict[str, list[CapturedDecision]] = {}
    for d in decisions:
        grouped.setdefault(d.session, []).append(d)
    return grouped


# --- the runtime's own hashes are ours ------------------------------------------------------------

def test_every_message_the_request_log_names_hashes_to_its_name_under_the_canonical_form():
    """Claude Code keys its request log by its own hash of each message; the canonical message hash
    (core/canonical.py, which the gateway's descriptors use) reproduces every one of them."""
    checked = 0
    for path in files().values():
        parsed = read_session_file(path, path.stem)
        index = parsed.by_hash()
        for call in parsed.calls:
            for name in call.record["tail"]:
                assert message_digest("messages", index[name]) == name
                checked += 1
        for name, blob in parsed.blobs.items():
            assert message_digest("messages", blob) == name
    assert checked >= 6


def test_every_captured_descriptor_resolves_from_the_session_files_by_request_hash():
    decisions = captures()
    source = open_source(DATA)
    assert isinstance(source, ClaudeCodeDir)
    resolved = [resolve(d, source) for d in decisions]
    assert all(isinstance(r, Resolved) and r.request_verified for r in resolved), resolved
    assert len(decisions) == 6 and {d.hashing for d in decisions} == {"canonical"}
    for decision, result in zip(decisions, resolved, strict=True):
        assert isinstance(result, Resolved)
        # the gateway forced the tool choice; the resolved request carries it as the engine got it
        assert decision.forced and result.request["tool_choice"] == {"type": "any"}
        assert all(tool["strict"] for tool in result.request["tools"])
        assert "x-anthropic-billing-header" not in json.dumps(result.request["system"])


def test_the_threads_of_a_session_and_the_outcomes_the_gateway_labelled():
    sessions = by_session(captures())
    lookups = next(ds for ds in sessions.values() if ds[0].chosen_tool == "mcp__inv__lookup")
    assert [d.outcome for d in lookups] == ["failed", "ok", None]  # the tool failed once (is_error)
    assert len({d.thread for d in lookups}) == 1 and len(lookups[0].thread or "") == 16


def test_an_input_claude_code_could_not_parse_is_a_malformed_call():
    cut = next(ds for ds in by_session(captures()).values() if ds[0].chosen_tool is None)
    assert {d.parse_outcome for d in cut} == {"malformed_call"}
    path = files()[cut[0].session]
    assert "__unparsedToolInput" in path.read_text()
    for logged in logged_calls(read_session_file(path, path.stem)):
        assert logged.answer is not None and isinstance(logged.answer["tool_calls"][0]["function"]["arguments"], str)
    for decision in cut:
        result = resolve(decision, ClaudeCodeDir(DATA))
        assert isinstance(result, Resolved) and result.arguments is None


# --- spoiled files: refused with their reason, nothing else lost --------------------------------

def test_a_truncated_last_line_refuses_that_session_only(corpus):
    decisions = captures()
    target = decisions[0].session
    path = files(corpus)[target]
    path.write_bytes(path.read_bytes()[:-40])
    source = ClaudeCodeDir(corpus)
    for decision in decisions:
        result = resolve(decision, source)
        if decision.session == target:
            assert isinstance(result, CaptureRefusal) and result.reason == RefusalReason.TRANSCRIPT_UNREADABLE
            assert f"{path.name}:" in result.detail and "invalid JSON" in result.detail
        else:
            assert isinstance(result, Resolved)


def test_a_prompt_edited_after_the_fact_leaves_tail_hashes_without_a_message(corpus):
    target = captures()[0].session
    path = files(corpus)[target]
    rows = records(path)
    first_user = next(r for r in rows if r["type"] == "user")
    first_user["message"]["content"] = first_user["message"]["content"].replace("INV-7", "INV-8")
    write_records(path, rows)
    for decision in by_session(captures())[target]:
        result = resolve(decision, ClaudeCodeDir(corpus))
        assert isinstance(result, CaptureRefusal) and result.reason == RefusalReason.RECORD_INCOMPLETE, result
        assert "which the file does not hold (edited or cut after the fact)" in result.detail


def test_a_base_that_loops_or_comes_later_is_refused_and_earlier_calls_still_resolve(corpus):
    decisions = by_session(captures())[captures()[0].session]
    path = files(corpus)[decisions[0].session]
    rows = records(path)
    calls = [r for r in rows if r["type"] == "api-request"]
    calls[1]["base"] = calls[1]["id"]  # the second call names itself as its base
    write_records(path, rows)
    results = [resolve(d, ClaudeCodeDir(corpus)) for d in decisions]
    assert isinstance(results[0], Resolved)
    assert isinstance(results[1], CaptureRefusal) and results[1].reason == RefusalReason.RECORD_INCOMPLETE
    assert "is not an earlier request of this file (missing, later, or a loop)" in results[1].detail


def test_a_line_of_a_gigabyte_refuses_its_file_without_being_read_into_memory(corpus):
    decision = captures()[0]
    path = files(corpus)[decision.session]
    with path.open("ab") as handle:
        handle.truncate(path.stat().st_size + (1 << 30))  # a sparse GiB of NULs: one line, never a newline
    result = resolve(decision, ClaudeCodeDir(corpus))
    assert isinstance(result, CaptureRefusal) and result.reason == RefusalReason.TRANSCRIPT_UNREADABLE
    assert "line longer than 16777216 bytes" in result.detail


def test_links_out_of_the_workspace_are_refused(corpus, tmp_path_factory):
    decision = captures()[0]
    path = files(corpus)[decision.session]
    outside = tmp_path_factory.mktemp("outside") / path.name
    shutil.move(path, outside)
    path.symlink_to(outside)  # a link out of the corpus
    result = resolve(decision, ClaudeCodeDir(corpus))
    assert isinstance(result, CaptureRefusal) and result.reason == RefusalReason.TRANSCRIPT_UNREADABLE
    assert "a link out of workspace ws-agent's directory" in result.detail
    # another workspace's session file linked in: found under ws-other, refused as not its own
    other = corpus / "ws-other" / "projects" / "x"
    other.mkdir(parents=True)
    (other / path.name).symlink_to(corpus / WORKSPACE / "projects" / path.parent.name / path.name)
    shutil.move(outside, path.parent / "real.jsonl")
    path.unlink()
    (path.parent / "real.jsonl").rename(path)
    stolen = CapturedDecision(**{**decision.__dict__, "workspace": "ws-other"})
    result = resolve(stolen, ClaudeCodeDir(corpus))
    assert isinstance(result, CaptureRefusal) and "a link out of workspace ws-other's directory" in result.detail


def test_a_line_of_another_session_refuses_the_file(corpus):
    decision = captures()[0]
    path = files(corpus)[decision.session]
    rows = records(path)
    rows[-1]["sessionId"] = "someone-elses-session"
    write_records(path, rows)
    result = resolve(decision, ClaudeCodeDir(corpus))
    assert isinstance(result, CaptureRefusal) and result.reason == RefusalReason.TRANSCRIPT_UNREADABLE
    assert "a line of session 'someone-elses-session' in the file of session" in result.detail


def test_a_session_or_workspace_that_is_not_there_or_no_name(corpus):
    decision = captures()[0]
    for workspace, session in (("ws-none", decision.session), (WORKSPACE, "0000"), ("../ws-agent", decision.session),
                               (WORKSPACE, "../x")):
        moved = CapturedDecision(**{**decision.__dict__, "workspace": workspace, "session": session})
        result = resolve(moved, ClaudeCodeDir(corpus))
        assert isinstance(result, CaptureRefusal) and result.reason == RefusalReason.SESSION_MISSING


# --- a file without a request log (older Claude Code): the conversation alone --------------------

def without_request_log(path: Path) -> None:
    write_records(path, [r for r in records(path) if not r["type"].startswith("api-request")])


def test_a_file_without_a_request_log_gives_its_calls_from_the_conversation(corpus):
    decision = captures()[0]
    path = files(corpus)[decision.session]
    without_request_log(path)
    calls = logged_calls(read_session_file(path, path.stem))
    assert calls and all(c.conversation_only and "system" not in c.body for c in calls)
    assert [len(c.body["messages"]) for c in calls] == [1, 3, 5]  # no system reminders in the conversation
    # the gateway saw the reminders Claude Code sent as a system message: such a record cannot prove it
    result = resolve(decision, ClaudeCodeDir(corpus))
    assert isinstance(result, CaptureRefusal) and result.reason == RefusalReason.TURN_MISSING


def test_a_parent_uuid_cycle_gives_no_call_and_no_hang(corpus):
    path = files(corpus)[captures()[0].session]
    without_request_log(path)
    rows = records(path)
    conversation = [r for r in rows if r["type"] in ("user", "assistant")]
    conversation[0]["parentUuid"] = conversation[-1]["uuid"]  # the root now hangs off the last line
    write_records(path, rows)
    calls = logged_calls(read_session_file(path, path.stem))
    assert calls == []


def test_the_corpus_is_only_read(corpus):
    before = {p: (p.read_bytes(), os.stat(p).st_mtime_ns) for p in corpus.rglob("*") if p.is_file()}
    source = ClaudeCodeDir(corpus)
    assert all(isinstance(resolve(d, source), Resolved) for d in captures())
    assert {p: (p.read_bytes(), os.stat(p).st_mtime_ns) for p in corpus.rglob("*") if p.is_file()} == before


def test_the_format_is_told_from_the_directory(tmp_path):
    assert isinstance(open_source(DATA), ClaudeCodeDir)
    (tmp_path / "ws-a").mkdir()
    assert isinstance(open_source(tmp_path), TranscriptDir)
    assert isinstance(open_source(tmp_path, "claude-code"), ClaudeCodeDir)


# --- subagents: their own files, under the parent's session -------------------------------------

SUBAGENTS = Path(__file__).parent / "data" / "claude-code-subagents"


def test_a_subagents_calls_resolve_from_its_own_file_with_the_parent_session_recorded():
    """A session whose main loop delegated through Claude Code's `Agent` tool (recorded with two of its
    subagent runs): the gateway saw every call under the parent's session id and told the threads apart;
    each subagent call resolves from its own file, named as that subagent's thread."""
    decisions = [CapturedDecision(**json.loads(line)) for line in (SUBAGENTS / "captures.jsonl").read_text().splitlines()]
    [main] = files(SUBAGENTS).values()
    subagent_files = sorted(main.parent.glob(f"{main.stem}/subagents/agent-*.jsonl"))
    assert len(subagent_files) == 2 and {d.session for d in decisions} == {main.stem}
    source = ClaudeCodeDir(SUBAGENTS)
    results = [resolve(d, source) for d in decisions]
    threads = {r.thread for r in results if isinstance(r, Resolved)}
    assert {f"agent-{f.stem.removeprefix('agent-')}" for f in subagent_files} <= threads
    assert "main" in threads  # the main loop's own calls
    assert len({d.thread for d in decisions}) == 3  # the gateway's threads: main and two subagents
    for result in results:  # what does not resolve is a call Claude Code did not log, and says so
        assert isinstance(result, Resolved) or (result.reason == "hash mismatch"
                                                and "did not log this call" in result.detail), result
    assert sum(isinstance(r, Resolved) for r in results) >= len(results) - 3
    parsed = [read_session_file(f, main.stem) for f in subagent_files]
    calls = {b["id"] for _, a in read_session_file(main, main.stem).answers.values() for b in a["content"]
             if b.get("type") == "tool_use"}
    session = source.session(WORKSPACE, main.stem)
    assert session is not None
    assert all(f.parent_call in calls for f in session.files[1:])  # each run names the parent's Agent call
    assert all(p.agent for p in parsed)


def test_a_suite_from_the_captures_says_each_decisions_thread_as_the_session_files_do(tmp_path):
    """The gateway saw the subagents' calls under the parent's session and told them apart by a hash; resolved
    from the session files, each decision is `main` or its subagent's, with the parent's call that started it."""
    from core.capture_store import CaptureStore
    from replay.corpus.capture_suite import build_suite
    from replay.suite import load_suite

    decisions = [CapturedDecision(**json.loads(line)) for line in (SUBAGENTS / "captures.jsonl").read_text().splitlines()]
    db = CaptureStore(tmp_path / "capture.sqlite")
    for decision in decisions:
        db.insert(decision)
    db.close()
    source = ClaudeCodeDir(SUBAGENTS)
    build_suite(tmp_path / "capture.sqlite", tmp_path / "suite", transcripts=source,
                keys={WORKSPACE: bytes.fromhex("7e" * 32)})
    suite = load_suite(tmp_path / "suite").decisions
    session = source.session(WORKSPACE, decisions[0].session)
    assert session is not None
    started = {f.thread: f.parent_call for f in session.files}
    assert {d.thread for d in suite} <= set(started) and len({d.thread for d in suite}) > 1
    assert all(d.parent_call == started[d.thread] for d in suite)
    assert all((d.parent_call is None) == (d.thread == "main") for d in suite)


def test_the_audit_counts_subagent_runs():
    from replay.corpus.audit import audit

    report = audit(ClaudeCodeDir(SUBAGENTS))
    assert (report.sessions, report.subagent_runs) == (1, 2)


def test_a_workspace_directory_linked_in_from_outside_is_refused(corpus, tmp_path_factory):
    outside = tmp_path_factory.mktemp("elsewhere") / "ws-agent"
    shutil.copytree(corpus / WORKSPACE, outside)
    (corpus / "ws-linked").symlink_to(outside)
    decision = CapturedDecision(**{**captures()[0].__dict__, "workspace": "ws-linked"})
    result = resolve(decision, ClaudeCodeDir(corpus))
    assert isinstance(result, CaptureRefusal) and result.reason == RefusalReason.TRANSCRIPT_UNREADABLE
    assert "a link out of the corpus" in result.detail


def test_a_session_is_read_once_for_all_the_decisions_resolved_from_it(monkeypatch):
    import replay.corpus.claude_code as claude_code

    reads: list[Path] = []
    real = claude_code.read_session_file
    monkeypatch.setattr(claude_code, "read_session_file", lambda path, *a, **k: reads.append(path) or real(path, *a, **k))
    source = ClaudeCodeDir(DATA)
    decisions = captures()
    assert all(isinstance(resolve(d, source), Resolved) for d in decisions)
    assert sorted(reads) == sorted(files().values())  # each of the two session files once, for six decisions

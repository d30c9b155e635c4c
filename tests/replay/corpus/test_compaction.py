"""A compacted session, end to end. No recorded session compacted (the test model's context never filled
with a summary that worked), so one is planted in a copy of a real one as Claude Code 2.1.x writes it: the
summary request is never logged (its query source is not a main or subagent loop), a `compact_boundary`
system line, the summary as a user line (`isCompactSummary`), the blobs the boundary made Claude Code forget
logged again, and the requests after it starting a new chain (no base) that names the summary in its tail.
Every hash is the one Claude Code would have written. The calls after the compaction resolve and build into
suites; the summary request the gateway captured is refused, as the reader says: not logged."""

from __future__ import annotations

import shutil
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from core.canonical import message_digest, request_digest
from core.capture_store import CapturedDecision, CaptureStore
from replay.corpus.capture_suite import build_suite
from replay.corpus.claude_code import API, ClaudeCodeDir, logged_calls, read_session_file
from replay.corpus.resolve import CaptureRefusal, RefusalReason, Resolved, resolve
from replay.suite import load_suite
from tests.replay.corpus.test_claude_code import DATA, WORKSPACE, captures, records, write_records
from tests.support.suites import build_corpus_suite

LOOKUP = "bfcec685-e7a6-47c9-be95-f5826d6c1469"
"""The lookup session: three calls, the first failed; the compaction comes before the second."""
SUMMARY = ("This session is being continued from a previous conversation that ran out of context. The conversation "
           "is summarized below:\nThe user asked to look up invoice INV-7. The lookup tool timed out once.\n"
           "Please continue the conversation from where we left it off without asking the user any further "
           "questions. Continue with the last task that you were asked to work on.")
PROMPT = "Your task is to create a detailed summary of the conversation so far."
KEY = bytes.fromhex("7e" * 32)


def digests(messages: list[dict[str, Any]]) -> list[str]:
    return [message_digest(API, m) for m in messages]


def text(message: dict[str, Any]) -> str:
    """A message's first text (a string content, or its first block's)."""
    content = message["content"]
    return content if isinstance(content, str) else str(content[0].get("text"))


def plant_compaction(root: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Compact the copied lookup session before its second call; the bodies of its three calls as the file
    now logs them, and the body of the summary request Claude Code sent (and did not log)."""
    path = next((root / WORKSPACE / "projects").glob(f"*/{LOOKUP}.jsonl"))
    before = [c.body for c in logged_calls(read_session_file(path, LOOKUP))]
    lines = records(path)
    calls = [i for i, line in enumerate(lines) if line["type"] == "api-request"]
    first, second, third = (lines[i] for i in calls)
    blob = next(line for line in lines if line["type"] == "api-request-blob")
    kept = before[0]["messages"][1]  # the system reminder, sent again after the summary
    assert digests([kept]) == [blob["hash"]]
    last = next(line for line in reversed(lines[:calls[1]]) if "uuid" in line)
    common = {k: last[k] for k in ("sessionId", "cwd", "version", "userType", "entrypoint") if k in last}
    boundary = {"parentUuid": None, "logicalParentUuid": last["uuid"], "isSidechain": False, "type": "system",
                "subtype": "compact_boundary", "content": "Conversation compacted", "isMeta": False,
                "timestamp": first["timestamp"], "uuid": str(uuid.uuid4()), "level": "info",
                "compactMetadata": {"trigger": "auto", "preTokens": 4000}, **common}
    summary_line = {"parentUuid": boundary["uuid"], "isSidechain": False, "type": "user",
                    "message": {"role": "user", "content": SUMMARY}, "isCompactSummary": True,
                    "isVisibleInTranscriptOnly": True, "uuid": str(uuid.uuid4()), "timestamp": first["timestamp"],
                    **common}
    summary = {"role": "user", "content": SUMMARY}
    second.pop("base")
    second.update(keep=0, tail=digests([summary, kept]))  # a new chain: nothing before the summary is kept
    third.update(base=second["id"], keep=2)  # its own tail (the answer and the result after) is unchanged
    answer = next(line for line in lines[calls[1]:] if line["type"] == "assistant")
    answer["parentUuid"] = summary_line["uuid"]
    write_records(path, [*lines[:calls[1]], boundary, summary_line, blob, *lines[calls[1]:]])
    after = [c.body for c in logged_calls(read_session_file(path, LOOKUP))]
    compacted = [before[0], *({**body, "messages": [summary, kept, *body["messages"][4:]]} for body in before[1:])]
    assert after == compacted  # every call rebuilds, the later two from the summary on
    *sent, results = before[1]["messages"]
    summarize = {**before[1], "messages": [*sent, {**results, "content": [*results["content"],
                                                                          {"type": "text", "text": PROMPT}]}]}
    return after, [summarize]


def descriptors(after: list[dict[str, Any]], summarize: dict[str, Any]) -> list[CapturedDecision]:
    """The gateway's descriptors of the session's calls in order: the first, the summary request (answered in
    text), then the two after the compaction, whose thread (the first message's hash) is the summary's."""
    first, second, third = (d for d in captures() if d.session == LOOKUP)

    def of(row: CapturedDecision, body: dict[str, Any]) -> CapturedDecision:
        hashes = digests(body["messages"])
        return replace(row, message_hashes=hashes, request_sha256=request_digest(API, body), thread=hashes[0][:16],
                       roles=[m["role"] for m in body["messages"]])

    summary = replace(of(second, summarize), id="summary", parse_outcome="no_call", chosen_tool=None, chosen_keys=[],
                      call_id=None, calls=0, outcome=None, thread=first.thread)
    return [first, summary, of(second, after[1]), of(third, after[2])]


@pytest.fixture
def compacted(tmp_path: Path) -> tuple[Path, list[CapturedDecision]]:
    shutil.copytree(DATA / WORKSPACE, tmp_path / "corpus" / WORKSPACE)
    after, (summarize,) = plant_compaction(tmp_path / "corpus")
    return tmp_path / "corpus", descriptors(after, summarize)


def test_the_calls_after_a_compaction_resolve_and_the_unlogged_summary_request_is_refused(compacted):
    root, rows = compacted
    source = ClaudeCodeDir(root)
    first, summary, *later = (resolve(row, source) for row in rows)
    assert isinstance(first, Resolved) and first.request_verified
    for result in later:  # the second has as many messages as the first call: told apart by their hashes
        assert isinstance(result, Resolved) and result.request_verified and result.thread == "main"
        assert text(result.request["messages"][0]) == SUMMARY
    assert isinstance(summary, CaptureRefusal) and summary.reason == RefusalReason.HASH_MISMATCH
    assert "did not log this call: Claude Code logs neither its compaction summaries" in summary.detail


def test_a_capture_suite_of_a_compacted_session(compacted, tmp_path):
    """The summary request is no decision (it is answered in text, with no call); the call after the
    compaction is, its request from the summary on. The gateway's thread starts again at the compaction (a
    thread is the hash of the first message), so that call's stratum reads a thread without the failure."""
    root, rows = compacted
    db = CaptureStore(tmp_path / "capture.sqlite")
    for row in rows:
        db.insert(row)
    db.close()
    report = build_suite(tmp_path / "capture.sqlite", tmp_path / "suite", transcripts=ClaudeCodeDir(root),
                         keys={WORKSPACE: KEY})
    assert (report.resolved, report.request_verified, report.refused) == (2, 2, {})
    assert report.strata == {"known_failure": 1, "clean_trajectory_action": 1}
    assert report.skipped == {"no verdict from its outcome": 2}  # the summary request, and the unlabelled last call
    failed, after = load_suite(tmp_path / "suite").decisions
    assert text(failed.turn[0]) == "Look up invoice INV-7."
    assert text(after.turn[0]) == SUMMARY and len(after.turn) == 2
    assert {failed.thread, after.thread} == {"main"}


def test_a_corpus_suite_and_audit_of_a_compacted_session(compacted, tmp_path):
    """From the files alone the session is one thread across the compaction: the calls after it follow the
    failed one (verified actions), and the summary request, never logged, is no call of the record."""
    from replay.corpus.audit import audit

    root, _ = compacted
    report = build_corpus_suite(ClaudeCodeDir(root), tmp_path / "suite", keys={WORKSPACE: KEY})
    assert report.strata == {"known_failure": 1, "verified_action": 2} and report.unread == []
    decisions = [d for d in load_suite(tmp_path / "suite").decisions if d.session.startswith(LOOKUP[:8])]
    assert [text(d.turn[0]) == SUMMARY for d in decisions] == [False, True, True]
    assert [len(d.turn) for d in decisions] == [2, 2, 4]
    counts = audit(ClaudeCodeDir(root))
    assert counts.decisions == {"known_failure": 1, "verified_action": 2} and counts.refused == []
    assert counts.records == sum(len(p.read_text().splitlines()) for p in (root / WORKSPACE).rglob("*.jsonl"))

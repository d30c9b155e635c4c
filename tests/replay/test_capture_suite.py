"""Strata from captured outcomes, and `worker-replay suite build --from-capture`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replay.capture_suite import assign_strata, build_suite, strip_memory
from replay.cli import main
from replay.suite import SuiteError, freeze_suite, load_suite
from core.capture import CapturedDecision, CaptureStore, ToolResult, read_decisions

TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in ("search", "lookup")]
MEMORY = "You keep the ledger.\n\n<memory>\n[memory/profile.md]\nACME pays late.\n</memory>\n\n" \
         "<standing_rules>\nEvery rule below is mandatory.\n- Ask first.\n</standing_rules>"


def captured(n: int, session: str, tool: str | None, *, outcome: str | None = None, full: bool = True,
             at: str = "2026-08-02T10:00:00Z") -> CapturedDecision:
    messages = [{"role": "system", "content": MEMORY}, {"role": "user", "content": f"task {session} step {n}"}]
    return CapturedDecision(
        id=f"r-{session}-{n}", captured_at=at, mode="full" if full else "descriptor", workspace="ws-a",
        session=session, route="worker", adapter="worker-base", kind="production", request_sha256="0" * 64,
        message_hashes=[], roles=["system", "user"], tools_offered=["lookup", "search"], tool_choice="auto",
        parse_outcome="ok" if tool else "no_call", chosen_tool=tool, chosen_keys=["id"] if tool else [],
        call_id=f"c-{n}" if tool else None, calls=1 if tool else 0, duration_s=0.5, outcome=outcome,
        request={"messages": messages, "tools": TOOLS} if full else None,
        chosen_arguments={"id": "7"} if (full and tool) else None)


def test_strata_follow_the_outcomes():
    decisions = [
        captured(1, "a", "search", outcome="blocked"), captured(2, "a", "lookup", outcome="ok"),
        captured(3, "a", "search", outcome="ok"), captured(4, "a", None),
        captured(1, "b", "search", outcome="ok"), captured(2, "b", "lookup", outcome="ok"),
        captured(1, "c", "search", outcome="failed"), captured(2, "c", "search", outcome="ok"),
        captured(1, "d", "search", outcome="empty_result"), captured(2, "d", "lookup", outcome="ok"),
        captured(1, "e", "search", outcome="pending"), captured(2, "e", "lookup"),
    ]
    assert assign_strata(decisions) == [
        "known_failure", "verified_recovery", "verified_action", None,  # rejected, recovered, then fine
        "clean_trajectory_action", "clean_trajectory_action",
        "known_failure", "verified_action",  # the same tool again is no recovery
        None, "verified_action",  # an empty result is an anomaly, not a rejection
        None, None,  # pending proves nothing; an unlabelled call neither
    ]


def test_memory_blocks_are_stripped():
    assert strip_memory([{"role": "system", "content": MEMORY}, {"role": "user", "content": "hi"}]) == [
        {"role": "system", "content": "You keep the ledger."}, {"role": "user", "content": "hi"}]


def store(path: Path, decisions: list[CapturedDecision]) -> Path:
    db = CaptureStore(path)
    for d in decisions:
        db.insert(d)
    db.close()
    return path


def test_store_labels_the_call_that_produced_a_result(tmp_path):
    db = CaptureStore(tmp_path / "c.sqlite")
    db.insert(captured(1, "a", "search"))
    db.insert(captured(2, "a", "lookup"))
    db.label("a", [ToolResult("c-1", "search", "blocked"), ToolResult(None, "lookup", "ok")])
    db.label("b", [ToolResult("c-1", "search", "failed")])  # another session's result touches nothing
    db.close()
    assert [d.outcome for d in read_decisions(tmp_path / "c.sqlite")] == ["blocked", "ok"]


def test_build_writes_a_valid_suite_from_full_captures(tmp_path):
    db = store(tmp_path / "capture.sqlite", [
        captured(1, "a", "search", outcome="blocked"), captured(2, "a", "lookup", outcome="ok"),
        captured(1, "b", "search", outcome="ok", full=False), captured(3, "a", None)])
    report = build_suite(db, tmp_path / "suite", name="live", version="2026.08")
    assert report.strata == {"known_failure": 1, "verified_recovery": 1}
    assert report.skipped == {"descriptor only (no request stored)": 1, "no verdict from its outcome": 1}
    suite = load_suite(tmp_path / "suite")
    assert (suite.manifest.name, suite.manifest.version) == ("live", "2026.08")
    failure, recovery = suite.decisions
    assert failure.failed_action.model_dump(exclude_none=True) == {"tool": "search", "arguments": {"id": "7"}}
    assert failure.target is None
    assert recovery.target.model_dump() == {"tool": "lookup", "arg_keys": ["id"]}
    assert recovery.memory.workspace == "ws-a" and recovery.cluster == "ws-a/a"
    assert recovery.request.messages[0]["content"] == "You keep the ledger."
    assert all(m["role"] != "assistant" for m in recovery.request.messages)  # the target is not in the request


def test_since_cuts_off_older_decisions(tmp_path):
    db = store(tmp_path / "capture.sqlite", [
        captured(1, "old", "search", outcome="ok", at="2026-08-01T09:00:00Z"),
        captured(1, "new", "lookup", outcome="ok", at="2026-08-03T09:00:00Z")])
    build_suite(db, tmp_path / "fresh", since="2026-08-02T00:00:00Z")
    assert [d.session for d in load_suite(tmp_path / "fresh").decisions] == ["new"]


def test_refuses_to_write_into_a_frozen_version(tmp_path, capsys):
    db = store(tmp_path / "capture.sqlite", [captured(1, "b", "search", outcome="ok")])
    out = tmp_path / "suite"
    assert main(["suite", "build", "--from-capture", str(db), "--out", str(out)]) == 0
    assert "1 decisions (clean_trajectory_action 1)" in capsys.readouterr().out
    freeze_suite(out)
    before = (out / "decisions.jsonl").read_bytes()
    store(db, [captured(2, "b", "lookup", outcome="ok")])
    assert main(["suite", "build", "--from-capture", str(db), "--out", str(out)]) == 2
    assert "frozen suite version" in capsys.readouterr().err
    assert (out / "decisions.jsonl").read_bytes() == before
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    with pytest.raises(SuiteError, match="not empty and holds no suite"):
        build_suite(db, tmp_path / "other")
    assert json.loads((out / "decisions.jsonl").read_text().splitlines()[0])["stratum"] == "clean_trajectory_action"


def test_no_usable_capture_builds_nothing_and_says_why(tmp_path):
    db = store(tmp_path / "capture.sqlite", [captured(1, "b", "search", outcome="ok", full=False),
                                             captured(2, "b", None)])
    with pytest.raises(SuiteError, match="no decisions") as info:
        build_suite(db, tmp_path / "suite")
    assert "descriptor only" in str(info.value) and "no verdict" in str(info.value)
    assert not (tmp_path / "suite").exists()


def test_an_unreadable_store_or_ledger_is_one_line_naming_the_file(tmp_path, capsys):
    """Issue 14 item 11's siblings on the replay side."""
    bogus = tmp_path / "capture.sqlite"
    bogus.write_text("not a database")
    assert main(["suite", "build", "--from-capture", str(bogus), "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert str(bogus) in err and "Traceback" not in err
    from replay.memory.ledger import Ledger
    from core.sqlitedb import StoreError

    (tmp_path / "ledger-dir").mkdir()
    with pytest.raises(StoreError, match="ledger-dir"):
        Ledger(tmp_path / "ledger-dir")


def test_a_built_suite_that_does_not_validate_writes_nothing(tmp_path, monkeypatch):
    """Sibling of issue 14 item 5: check everything before writing (here: the built suite)."""
    import replay.capture_suite as module
    from replay.suite import SuiteProblem

    db = store(tmp_path / "capture.sqlite", [captured(1, "b", "search", outcome="ok")])
    monkeypatch.setattr(module, "validate_suite", lambda path: [SuiteProblem(str(path / "decisions.jsonl"), 1, "bad")])
    out = tmp_path / "suite"
    with pytest.raises(SuiteError, match="nothing written") as info:
        build_suite(db, out)
    assert "decisions.jsonl:1: bad" in str(info.value)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith("capture.sqlite")] == []

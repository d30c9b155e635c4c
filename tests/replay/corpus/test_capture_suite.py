"""Strata from captured outcomes, and `worker-replay suite build --from-capture`."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from core.capture_store import CapturedDecision, CaptureStore, ToolResult, read_decisions
from core.sqlitedb import StoreError
from replay.cli import main
from replay.corpus.capture_suite import assign_strata, build_suite, strip_memory
from replay.corpus.resolve import load_keys
from replay.corpus.transcripts import TranscriptDir
from replay.suite import SuiteError, check_privacy, freeze_suite, load_suite
from tests.support.deferred import answer, descriptor, messages_answer, tool_use, write_session

TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in ("search", "lookup")]
MEMORY = "You keep the ledger.\n\n<memory>\n[memory/profile.md]\nACME pays late.\n</memory>\n\n" \
         "<standing_rules>\nEvery rule below is mandatory.\n- Ask first.\n</standing_rules>"


def captured(n: int, session: str, tool: str | None, *, outcome: str | None = None, full: bool = True,
             at: str = "2026-08-02T10:00:00Z", workspace: str = "ws-a") -> CapturedDecision:
    messages = [{"role": "system", "content": MEMORY}, {"role": "user", "content": f"task {session} step {n}"}]
    return CapturedDecision(
        id=f"r-{workspace}-{session}-{n}", captured_at=at, mode="full" if full else "descriptor", workspace=workspace,
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


def test_a_session_id_reused_by_another_workspace_is_another_session():
    """The demo's two workspaces both use `s-remind`: one tenant's blocked call must not make the
    other's clean session anomalous, nor count as the previous call of its recovery."""
    decisions = [captured(1, "s-remind", "search", outcome="blocked", workspace="ws-a"),
                 captured(1, "s-remind", "lookup", outcome="ok", workspace="ws-b"),
                 captured(2, "s-remind", "search", outcome="ok", workspace="ws-b")]
    assert assign_strata(decisions) == ["known_failure", "clean_trajectory_action", "clean_trajectory_action"]


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
    db.label("ws-a", "a", [ToolResult("c-1", "search", "blocked"), ToolResult(None, "lookup", "ok")])
    db.label("ws-a", "b", [ToolResult("c-1", "search", "failed")])  # another session's result touches nothing
    db.label("ws-b", "a", [ToolResult("c-1", "search", "failed")])  # and so does another workspace's
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
    from core.sqlitedb import StoreError
    from replay.memory.ledger import Ledger

    (tmp_path / "ledger-dir").mkdir()
    with pytest.raises(StoreError, match="ledger-dir"):
        Ledger(tmp_path / "ledger-dir")


# --- descriptors resolved from the transcript corpus, redacted with workspace keys ---------------

EMAIL, PHONE = "maria.lopez@acme-corp.com", "+49 30 1234 5678"
SEND = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in ("lookup", "send")]


def session(workspace: str, name: str) -> tuple[list[CapturedDecision], list[dict]]:
    """A rejected send (to a person's address) and the lookup that recovered, as captured and as written."""
    history = [{"role": "system", "content": "You keep the ledger.\n\n<memory>\nACME pays late.\n</memory>"},
               {"role": "user", "content": f"Mail INV-7 to {EMAIL}, or call {PHONE}."}]
    first = answer("send", {"to": EMAIL, "invoice": "INV-7"}, "c1")
    second = [*history, first, {"role": "tool", "tool_call_id": "c1", "content": '{"error": "Permission denied"}'}]
    last = answer("lookup", {"id": "INV-7"}, "c2")
    keep = {"workspace": workspace, "session": name, "tools": SEND}
    return ([descriptor(history, first, outcome="blocked", **keep), descriptor(second, last, outcome="ok", **keep)],
            [*second, last])


def test_descriptors_become_a_redacted_suite_and_refusals_are_counted(tmp_path, capsys):
    corpus, decisions = tmp_path / "transcripts", []
    for workspace, name in (("ws-a", "s-1"), ("ws-b", "s-1"), ("ws-a", "gone"), ("ws-a", "edited"),
                            ("ws-a", "short"), ("ws-c", "s-1")):
        captured_, messages = session(workspace, name)
        decisions += captured_
        if name == "edited":
            messages[1] = {**messages[1], "content": "Mail INV-8 instead."}
        if name != "gone":
            write_session(corpus, messages[:3] if name == "short" else messages, workspace=workspace, session=name,
                          tools=SEND)
    db = store(tmp_path / "capture.sqlite", decisions)
    keys = tmp_path / "keys.toml"
    keys.write_text(f'[keys]\n"ws-a" = "{"a1" * 16}"\n"ws-b" = "{"b2" * 16}"\n')
    keys.chmod(0o600)
    out = tmp_path / "suite"
    assert main(["suite", "build", "--from-capture", str(db), "--transcripts", str(corpus), "--keys", str(keys),
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "4 decisions (known_failure 2, verified_recovery 2)" in printed
    assert "left out: same decision state as an earlier capture 1" in printed  # ws-a/short's first turn
    assert "descriptors: 7 resolved (7 by request hash, 0 by message hashes only); refused: hash mismatch 2, " \
           "no pseudonym key for the workspace 2, session missing 2, turn missing 1" in printed
    assert "r-ws-a-edited-2: hash mismatch: ws-a/edited: message 1 (user) is not the one captured" in printed
    assert "redactions: EMAIL 8, PHONE 4\nprivacy check: clean" in printed
    suite = load_suite(out)
    (failed_a, recovery_a, failed_b, _) = suite.decisions
    pseudonym = failed_a.failed_action.arguments["to"]
    assert pseudonym.startswith("<EMAIL_") and failed_b.failed_action.arguments["to"].startswith("<EMAIL_")
    assert pseudonym != failed_b.failed_action.arguments["to"]  # another workspace, another pseudonym
    assert failed_a.request.messages[1]["content"] == f"Mail INV-7 to {pseudonym}, or call " \
        f"{recovery_a.request.messages[1]['content'].split('call ')[1]}"
    sent = json.loads(recovery_a.request.messages[2]["tool_calls"][0]["function"]["arguments"])
    assert sent == {"to": pseudonym, "invoice": "INV-7"}  # the request and the failed action agree
    assert recovery_a.target.model_dump() == {"tool": "lookup", "arg_keys": ["id"]}
    assert failed_a.request.messages[0]["content"] == "You keep the ledger."  # memory stripped after hashing
    assert EMAIL not in (out / "decisions.jsonl").read_text() and "a1a1" not in (out / "decisions.jsonl").read_text()
    assert main(["suite", "check-privacy", str(out)]) == 0
    assert main(["suite", "freeze", str(out)]) == 0


def test_one_unreadable_transcript_is_refused_and_the_build_goes_on(tmp_path, capsys):
    corpus, decisions = tmp_path / "transcripts", []
    for name in ("s-1", "deep"):
        captured_, messages = session("ws-a", name)
        decisions += captured_
        write_session(corpus, messages, workspace="ws-a", session=name, tools=SEND)
    with (corpus / "ws-a" / "deep.jsonl").open("a") as handle:
        handle.write("[" * 50_000 + "]" * 50_000 + "\n")
    keys = tmp_path / "keys.toml"
    keys.write_text(f'[keys]\n"ws-a" = "{"a1" * 16}"\n')
    keys.chmod(0o600)
    out = tmp_path / "suite"
    assert main(["suite", "build", "--from-capture", str(store(tmp_path / "capture.sqlite", decisions)),
                 "--transcripts", str(corpus), "--keys", str(keys), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "descriptors: 2 resolved (2 by request hash, 0 by message hashes only); refused: transcript unreadable 2" \
        in printed, printed
    assert "deep.jsonl:7: invalid JSON: arrays and objects are nested deeper than 100 levels" in printed, printed
    assert len(load_suite(out).decisions) == 2


def test_messages_mode_accepts_what_the_request_hash_cannot_prove(tmp_path, capsys):
    corpus = tmp_path / "transcripts"
    captured_, messages = session("ws-a", "s-1")
    db = store(tmp_path / "capture.sqlite", [replace(d, request_sha256="f" * 64) for d in captured_])
    write_session(corpus, messages, tools=SEND)
    keys = tmp_path / "keys.toml"
    keys.write_text(f'[keys]\n"ws-a" = "{"a1" * 16}"\n')
    keys.chmod(0o600)
    with pytest.raises(SuiteError, match="2 refused: hash mismatch"):  # an empty suite is never written
        build_suite(db, tmp_path / "strict", transcripts=TranscriptDir(corpus), keys=load_keys(keys))
    assert not (tmp_path / "strict").exists()
    report = build_suite(db, tmp_path / "loose", transcripts=TranscriptDir(corpus), keys=load_keys(keys),
                         verify="messages")
    assert (report.resolved, report.request_verified, report.strata) == (2, 0, {"known_failure": 1,
                                                                              "verified_recovery": 1})


def test_descriptors_need_keys_and_a_suite_with_values_does_not_freeze(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("WORKER_REPLAY_PSEUDONYM_KEYS", raising=False)
    (tmp_path / "transcripts").mkdir()
    db = store(tmp_path / "capture.sqlite", [replace(captured(1, "a", "search", outcome="ok"), request={
        "messages": [{"role": "user", "content": f"Find the invoices of {EMAIL}"}], "tools": TOOLS})])
    assert main(["suite", "build", "--from-capture", str(db), "--transcripts", str(tmp_path / "transcripts"),
                 "--out", str(tmp_path / "x")]) == 2
    assert "--keys FILE" in capsys.readouterr().err
    out = tmp_path / "plain"
    assert main(["suite", "build", "--from-capture", str(db), "--out", str(out)]) == 0  # full captures, no keys
    capsys.readouterr()
    assert main(["suite", "check-privacy", str(out)]) == 1
    assert capsys.readouterr().out.strip() == \
        f"{out / 'decisions.jsonl'}:1: decision 'cap-r-ws-a-a-1': EMAIL value at $.request.messages[0].content"
    assert main(["suite", "freeze", str(out)]) == 2
    assert "the privacy check finds 1 detectable value(s)" in capsys.readouterr().err
    assert "frozen" not in (out / "suite.toml").read_text()


def test_a_built_suite_that_does_not_validate_writes_nothing(tmp_path, monkeypatch):
    """Sibling of issue 14 item 5: check everything before writing (here: the built suite)."""
    import replay.corpus.capture_suite as module
    from replay.suite import SuiteProblem

    db = store(tmp_path / "capture.sqlite", [captured(1, "b", "search", outcome="ok")])
    monkeypatch.setattr(module, "validate_suite", lambda path: [SuiteProblem(str(path / "decisions.jsonl"), 1, "bad")])
    out = tmp_path / "suite"
    with pytest.raises(SuiteError, match="nothing written") as info:
        build_suite(db, out)
    assert "decisions.jsonl:1: bad" in str(info.value)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith("capture.sqlite")] == []


def test_out_inside_the_transcript_directory_is_refused(tmp_path, capsys):
    """DESIGN §9: the resolver never writes into the corpus."""
    corpus = tmp_path / "transcripts"
    captured_, messages = session("ws-a", "s-1")
    write_session(corpus, messages, tools=SEND)
    db = store(tmp_path / "capture.sqlite", captured_)
    keys = tmp_path / "keys.toml"
    keys.write_text(f'[keys]\n"ws-a" = "{"a1" * 16}"\n')
    keys.chmod(0o600)
    before = sorted(corpus.rglob("*"))
    for out in (corpus / "suite", corpus / "ws-a", corpus):
        assert main(["suite", "build", "--from-capture", str(db), "--transcripts", str(corpus), "--keys", str(keys),
                     "--out", str(out)]) == 2
        assert "inside the transcript directory" in capsys.readouterr().err
    (tmp_path / "link").symlink_to(corpus, target_is_directory=True)
    with pytest.raises(SuiteError, match="inside the transcript directory"):
        build_suite(db, tmp_path / "link" / "suite", transcripts=TranscriptDir(corpus), keys=load_keys(keys))
    assert sorted(corpus.rglob("*")) == before


def test_an_unreadable_session_is_refused_and_the_build_goes_on(tmp_path):
    from replay.corpus.transcripts import MAX_LINE_BYTES

    corpus, decisions = tmp_path / "transcripts", []
    for name in ("s-1", "s-huge"):
        captured_, messages = session("ws-a", name)
        decisions += captured_
        write_session(corpus, messages, session=name, tools=SEND)
    with (corpus / "ws-a" / "s-huge.jsonl").open("a") as fh:
        fh.write(json.dumps({"role": "user", "content": "x" * MAX_LINE_BYTES}) + "\n")
    keys = {"ws-a": bytes.fromhex("a1" * 16)}
    report = build_suite(store(tmp_path / "capture.sqlite", decisions), tmp_path / "suite",
                         transcripts=TranscriptDir(corpus), keys=keys)
    assert report.refused == {"transcript unreadable": 2} and report.resolved == 2
    assert any(f"longer than {MAX_LINE_BYTES} bytes" in line for line in report.refusals)


@pytest.mark.parametrize(("workspace", "name"), [("../other-tenant", "s-1"), ("", "s-1"), ("ws-a", "../s-1"),
                                                 ("ws-a", "")])
def test_a_capture_whose_workspace_or_session_is_no_name_is_left_out(tmp_path, workspace, name):
    """Captured workspace and session ids come from request headers: a row with a name that could
    climb out of `<memory.root>` or the corpus never becomes a decision."""
    db = store(tmp_path / "capture.sqlite", [captured(1, name, "search", outcome="ok", workspace=workspace),
                                             captured(1, "s-2", "lookup", outcome="ok")])
    report = build_suite(db, tmp_path / "suite")
    assert report.skipped == {"workspace or session is not a name": 1}
    assert [d.session for d in load_suite(tmp_path / "suite").decisions] == ["s-2"]


def test_a_session_id_that_holds_a_detectable_value_stays_a_name_when_redacted(tmp_path):
    captured_, messages = session("ws-a", "s-10.0.0.1")
    corpus = tmp_path / "transcripts"
    write_session(corpus, messages, session="s-10.0.0.1", tools=SEND)
    captured_ = [replace(d, id=f"g-{i}") for i, d in enumerate(captured_)]  # the gateway's ids hold no session
    report = build_suite(store(tmp_path / "capture.sqlite", captured_), tmp_path / "suite",
                         transcripts=TranscriptDir(corpus), keys={"ws-a": bytes.fromhex("a1" * 16)})
    assert report.resolved == 2 and check_privacy(tmp_path / "suite") == []
    sessions = {d.session for d in load_suite(tmp_path / "suite").decisions}
    assert len(sessions) == 1 and sessions.pop().startswith("s-IP_")


@pytest.mark.parametrize("since", ["yesterday", "2026-13-01", "", "7"])
def test_a_since_that_is_not_an_iso_time_is_one_error_line(tmp_path, capsys, since):
    db = store(tmp_path / "capture.sqlite", [captured(1, "b", "search", outcome="ok")])
    assert main(["suite", "build", "--from-capture", str(db), "--out", str(tmp_path / "s"), "--since", since]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "--since" in err[0] and "ISO time" in err[0], err
    assert not (tmp_path / "s").exists()


BAD_ROWS = {
    "not JSON": "UPDATE decisions SET roles = '[\"system\", '",
    "a JSON column of the wrong type": "UPDATE decisions SET chosen_keys = '{\"a\": 1}'",
    "a bad time": "UPDATE decisions SET captured_at = 'yesterday'",
    "no time": "UPDATE decisions SET captured_at = 7",
    "a missing column": "ALTER TABLE decisions DROP COLUMN duration_s",
    "a missing JSON column": "ALTER TABLE decisions DROP COLUMN roles",
}


@pytest.mark.parametrize("change", BAD_ROWS.values(), ids=BAD_ROWS.keys())
@pytest.mark.parametrize("since", [None, "2026-08-01T00:00:00Z"])
def test_a_capture_row_that_is_not_a_decision_is_one_error_line_naming_the_store(tmp_path, capsys, change, since):
    import sqlite3

    db = store(tmp_path / "capture.sqlite", [captured(1, "b", "search", outcome="ok")])
    with sqlite3.connect(db) as conn:
        conn.execute(change)
    conn.close()
    argv = ["suite", "build", "--from-capture", str(db), "--out", str(tmp_path / "s")]
    assert main([*argv, *(["--since", since] if since else [])]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and str(db) in err[0], err
    with pytest.raises(StoreError, match="decisions row 1"):
        read_decisions(db)


@pytest.mark.parametrize("request_", [{"tools": TOOLS}, {"messages": "hi"}, {"messages": [7]},
                                      {"messages": [{"role": "user", "content": "x"}], "tools": "all"}])
def test_a_stored_request_that_is_not_a_chat_request_is_one_error_line_naming_the_decision(tmp_path, capsys,
                                                                                        request_):
    bad = replace(captured(1, "b", "search", outcome="ok"), request=request_)
    db = store(tmp_path / "capture.sqlite", [bad])
    assert main(["suite", "build", "--from-capture", str(db), "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and bad.id in err[0], err


# --- decisions captured on the Anthropic Messages API ---------------------------------------------

MSG_TOOLS = [{"name": n, "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}}}
             for n in ("lookup", "send")]
MSG_SYSTEM = [{"type": "text", "text": "You keep the ledger."},
              {"type": "text", "text": f"Mail from {EMAIL}.\n\n<memory>\nACME pays late.\n</memory>"}]


def messages_session(name: str) -> tuple[list[CapturedDecision], list[dict]]:
    """A rejected send (`is_error`), the lookup that recovered and its fine result, on the Messages API."""
    history = [{"role": "user", "content": [{"type": "text", "text": f"Mail INV-7 to {EMAIL}."}]}]
    first = tool_use("send", {"to": EMAIL}, "toolu_1")
    second = [*history, first, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True, "content": "Permission denied"}]}]
    last = tool_use("lookup", {"id": "INV-7"}, "toolu_2")
    keep = {"session": name, "tools": MSG_TOOLS, "tool_choice": {"type": "any"}, "api": "messages",
            "system": MSG_SYSTEM, "params": {"max_tokens": 64}}
    return ([descriptor(history, messages_answer(first), outcome="failed", **keep),
             descriptor(second, messages_answer(last), outcome="ok", **keep)], [*second, last])


def test_messages_descriptors_become_a_suite_in_the_messages_shape(tmp_path, capsys):
    corpus, decisions = tmp_path / "transcripts", []
    for name in ("s-1", "s-2"):
        captured_, messages = messages_session(name)
        decisions += captured_
        write_session(corpus, messages, session=name, tools=MSG_TOOLS, tool_choice={"type": "any"},
                      params={"max_tokens": 64}, api="messages", system=MSG_SYSTEM if name == "s-1" else "other")
    keys = {"ws-a": bytes.fromhex("a1" * 16)}
    report = build_suite(store(tmp_path / "capture.sqlite", decisions), tmp_path / "suite",
                         transcripts=TranscriptDir(corpus), keys=keys)
    assert (report.resolved, report.refused) == (2, {"hash mismatch": 2})  # s-2's system prompt is not the one sent
    assert report.strata == {"known_failure": 1, "verified_recovery": 1} and check_privacy(tmp_path / "suite") == []
    failed, recovery = load_suite(tmp_path / "suite").decisions
    assert (failed.api, recovery.api) == ("messages", "messages")
    assert recovery.request.system[0] == {"type": "text", "text": "You keep the ledger."}
    assert recovery.request.system[1]["text"].startswith("Mail from <EMAIL_")  # redacted, memory stripped
    assert "<memory>" not in json.dumps(recovery.request.system)
    assert recovery.request.tools == MSG_TOOLS and recovery.request.tool_choice == {"type": "any"}
    assert recovery.request.messages[1]["content"][0]["name"] == "send"  # the Anthropic turn as sent
    assert recovery.target.model_dump() == {"tool": "lookup", "arg_keys": ["id"]}
    assert failed.failed_action.arguments["to"].startswith("<EMAIL_")
    line = json.loads((tmp_path / "suite" / "decisions.jsonl").read_text().splitlines()[0])
    assert line["api"] == "messages" and set(line["request"]) == {"system", "messages", "tools", "tool_choice"}
    assert main(["suite", "freeze", str(tmp_path / "suite")]) == 0


def test_a_capture_records_its_api_and_an_unset_api_is_never_written(tmp_path):
    db = store(tmp_path / "capture.sqlite", [captured(1, "b", "search", outcome="ok")])
    build_suite(db, tmp_path / "suite")
    line = json.loads((tmp_path / "suite" / "decisions.jsonl").read_text())
    assert line["api"] == "chat"  # a capture says which API it came through
    decision = load_suite(tmp_path / "suite").decisions[0]
    assert "api" not in decision.model_copy(update={"api": None}).model_dump()  # an unset api is never written

"""The report's retrieval block: each arm's outcome by whether the decision's own history read memory (a corpus in
this project's transcript format, read by replay/corpus/retrieval.py)."""

from __future__ import annotations

import json
from pathlib import Path

from core.records import Decision
from replay.analysis.report.memory_reads import retrieval_block
from replay.cli import main as replay_main
from replay.corpus.retrieval import decision_reads
from replay.corpus.sources import open_source
from replay.corpus.transcripts import TranscriptHeader, transcript_lines
from tests.replay.analysis.test_report import parse
from tests.support.e13 import positive_record
from tests.support.runs import seal, write_sealed

# Decisions 0 and 1 come from a session that read its memory: 0 after the read (its history holds it), 1 before
# it. 2 comes from a session that read none, 3 from a session the corpus does not hold. The base arm gets only 0
# right; the memory arm gets 0 and 2.
SESSIONS = ["s-read", "s-read", "s-none", "s-gone"]
CORRECT = {"base": {0}, "workspace": {0, 2}}
TOOL = {"type": "function", "function": {"name": "search_invoices", "parameters": {
    "type": "object", "properties": {"customer_id": {"type": "string"}}}}}


READ = [{"role": "user", "content": "the terms?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "Read", "arguments": json.dumps({"file_path": "memory/notes/terms.md"})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "net 30"}]


def decision(i: int) -> Decision:
    history = READ if i == 0 else [{"role": "user", "content": f"the terms of invoice {i}?"}]
    return Decision.model_validate({
        "id": f"d-{i}", "stratum": "verified_action", "cluster": f"c-{i}", "workspace": "ws-a",
        "session": SESSIONS[i], "captured_at": "2026-08-02T10:11:12Z",
        "request": {"messages": history, "tools": [TOOL]},
        "target": {"tool": "search_invoices", "arg_keys": ["customer_id"]}})


def write_corpus(root: Path) -> None:
    read = [*READ, {"role": "assistant", "content": "Net 30."}]
    none = [read[0], {"role": "assistant", "content": "I do not know."}]
    (root / "ws-a").mkdir(parents=True)
    for session, lines in (("s-read", read), ("s-none", none)):
        header = TranscriptHeader(workspace="ws-a", session=session)
        (root / "ws-a" / f"{session}.jsonl").write_text(transcript_lines(header, lines))


def test_each_arm_beside_what_its_decisions_histories_read(tmp_path):
    corpus = tmp_path / "transcripts"
    write_corpus(corpus)
    decisions = [decision(i) for i in range(4)]
    results = [positive_record(arm, "verified_action", f"d-{i}", i, i in correct, i in correct)
               for arm, correct in CORRECT.items() for i in range(4)]
    block = retrieval_block(results, decisions, decision_reads(open_source(corpus), decisions, []))
    # d-1's session read memory, but after d-1: its history holds no read, and it counts with d-2
    assert [(r.arm, str(r.read), str(r.unread), r.unknown) for r in block.rows] == [
        ("base", "1/1", "0/2", 1), ("workspace", "1/1", "1/2", 1)]
    assert block.note.startswith("The decisions come from 3 session(s), 2 of them in the corpus: 3 turn(s), 1 of "
                                 "which read a memory file on demand; 1 read(s), 0.33 per turn. 1 of the 3 "
                                 "decision(s) whose session the corpus holds read memory earlier in their own history")


def test_the_report_command_adds_the_block_from_the_corpus(tmp_path, capsys):
    corpus, suite, run = tmp_path / "transcripts", tmp_path / "suite", tmp_path / "run"
    write_corpus(corpus)
    suite.mkdir()
    (suite / "suite.toml").write_text('name = "s"\nversion = "1"\ncreated = 2026-08-01T00:00:00Z\n')
    (suite / "decisions.jsonl").write_text("".join(decision(i).model_dump_json() + "\n" for i in range(4)))
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"suite": {"path": str(suite)}}))
    seal(run)
    results = [positive_record(arm, "verified_action", f"d-{i}", i, i in correct, i in correct)
               for arm, correct in CORRECT.items() for i in range(4)]
    write_sealed(run, results)
    assert replay_main(["report", str(run), "--corpus", str(corpus), "--ledger", str(tmp_path / "ledger")]) == 0
    markdown = (run / "report.md").read_text()
    assert "### Retrieval" in markdown and "| workspace | withheld | 1/1 | 1/2 | 1 |" in markdown
    rows = parse(run / "report.html").by_id("retrieval").find_all("tr")
    assert [c.all_text() for c in rows[1].children] == ["base", "withheld", "1/1", "0/2", "1"]


def test_a_report_with_a_corpus_needs_the_runs_suite(tmp_path, capsys):
    results = [positive_record("base", "verified_action", "d-0", 0, True, True)]
    write_sealed(tmp_path, results)
    (tmp_path / "run.json").write_text("{}")
    seal(tmp_path)
    assert replay_main(["report", str(tmp_path), "--corpus", str(tmp_path)]) == 2
    assert "--corpus needs the run's suite" in capsys.readouterr().err

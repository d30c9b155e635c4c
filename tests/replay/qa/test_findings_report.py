"""`worker-replay qa check` over corpora of the recorded sessions: the JSON it documents, counts per workspace
and kind, and hostile runs (no final answer, an answer that is only a tool call, 100k tool results, bytes that
are not UTF-8, a FIFO) each a finding, an unchecked run or an unreadable file — never a crash or a hang."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from replay.cli import main
from tests.replay.qa.corpus import RETRIES, append_answer, replace_result, text
from tests.support.curation import LOOKUP, copy_workspace, session_path

CONFIG = str(Path(__file__).resolve().parents[3] / "configs" / "qa" / "checks.toml")
TOOL_RESULTS = 100_000


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, object], str]:
    code = main(["qa", "check", *args, "--config", CONFIG, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if code == 0 else {}, captured.err


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ws-a: the retries session answered without a word of its refused calls; the lookup session with a planted
    list of three invoices and an answer counting two, with a placeholder. ws-b: the recorded sessions as they are."""
    root = tmp_path_factory.mktemp("corpus")
    copy_workspace(root, "ws-a")
    copy_workspace(root, "ws-b")
    append_answer(session_path(root, "ws-a", RETRIES), RETRIES, text("Invoice INV-7 is paid."))
    lookup = session_path(root, "ws-a", LOOKUP)
    replace_result(lookup, "4b4bce2a-2062-45ac-8d8f-613a14b4880f",
                   '{"invoices": [{"id": "INV-7"}, {"id": "INV-8"}, {"id": "INV-9"}]}')
    append_answer(lookup, LOOKUP, text("Hello {{name}}, I found 2 invoices."))
    return root


def test_the_json_holds_findings_runs_and_counts(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report, _ = check(capsys, str(corpus))
    assert code == 0 and report["runs"] == 2
    assert report["counts"] == {"ws-a": {"placeholder": 1, "unacknowledged_tool_error": 1, "count_mismatch": 1}}
    findings = report["findings"]
    assert isinstance(findings, list)
    assert [(f["workspace"], f["session"], f["kind"]) for f in findings] == [
        ("ws-a", RETRIES, "unacknowledged_tool_error"), ("ws-a", LOOKUP, "placeholder"),
        ("ws-a", LOOKUP, "count_mismatch")]
    assert all(set(f) == {"workspace", "session", "kind", "records", "detail"} and f["records"] for f in findings)
    assert [u["session"] for u in report["unchecked"]] == [RETRIES, LOOKUP]  # ws-b's, as recorded


def test_the_text_lists_findings_counts_and_what_was_not_checked(corpus: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["qa", "check", str(corpus), "--config", CONFIG]) == 0
    out = capsys.readouterr().out
    assert out.startswith("qa check: 2 finished run(s) in 1 workspace(s), 3 finding(s); 2 session(s) without")
    assert f"not checked: ws-b/{LOOKUP}: no final answer: the thread ends in a tool result" in out


def test_a_corpus_with_no_finished_run_says_how_its_threads_end(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    copy_workspace(tmp_path, "ws-b")  # both recorded sessions stop on a tool's result
    assert main(["qa", "check", str(tmp_path), "--config", CONFIG]) == 0
    out = capsys.readouterr().out
    assert ("\n    2 no final answer: the thread ends in a tool result: the run stopped on a tool's result (max turns, "
            "a crash, a session cut short)\n") in out
    assert out.rstrip().endswith("nothing was checked: no session ends in a final answer with text")


def test_an_unreadable_session_is_listed_and_the_others_checked(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    copy_workspace(tmp_path, "ws-a")
    retries = session_path(tmp_path, "ws-a", RETRIES)
    append_answer(retries, RETRIES, text("Invoice INV-7 is paid: caf\u00e9."))
    data = retries.read_bytes()
    assert b"caf\\u00e9" in data
    retries.write_bytes(data.replace(b"caf\\u00e9", b"caf\xe9"))  # planted: Latin-1
    lookup = session_path(tmp_path, "ws-a", LOOKUP)
    lookup.unlink()
    os.mkfifo(lookup)  # planted: a tenant's FIFO where a session file was
    started = time.monotonic()
    code, report, _ = check(capsys, str(tmp_path))
    assert code == 0 and time.monotonic() - started < 30 and report["runs"] == 0
    refused = report["refused"]
    assert isinstance(refused, list) and len(refused) == 2
    assert any("not UTF-8" in r for r in refused) and any("FIFO" in r for r in refused)


def test_a_hundred_thousand_tool_results_are_checked_in_linear_time(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Planted: one answer with 100k parallel lookups, all timed out, then "All done."."""
    copy_workspace(tmp_path, "ws-a")
    path = session_path(tmp_path, "ws-a", RETRIES)
    uses = [{"type": "tool_use", "id": f"t{i}", "name": "mcp__inv__lookup", "input": {"id": f"INV-{i}"}}
            for i in range(TOOL_RESULTS)]
    results = [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "error: timed out", "is_error": True}
               for i in range(TOOL_RESULTS)]
    append_answer(path, RETRIES, uses, results=results)
    append_answer(path, RETRIES, text("All done."))
    started = time.monotonic()
    code, report, _ = check(capsys, str(tmp_path))
    assert code == 0 and time.monotonic() - started < 60
    findings = report["findings"]
    assert isinstance(findings, list)
    lookups = [f for f in findings if "mcp__inv__lookup" in f["detail"]]
    assert len(lookups) == 1 and lookups[0]["records"][1].startswith("69958073")


def test_a_corpus_that_is_not_one_and_a_bad_config_are_one_error_line(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["qa", "check", str(tmp_path / "absent"), "--config", CONFIG]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'absent'}: not a corpus (not a directory)"
    bad = tmp_path / "checks.toml"
    bad.write_text('placeholders = "p.txt"\nadmissions = ["failed"]\n')
    (tmp_path / "p.txt").write_text("# fine\n(a+)\\1\n")
    assert main(["qa", "check", str(tmp_path), "--config", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {tmp_path / 'p.txt'}:2: pattern does not compile in RE2")

"""Labelled runs: dispositions joined to the corpus's finished runs (stale, unknown and doubled lines refused and
counted, unlabelled runs kept), the file formats, and `worker-replay qa labels` on the recorded sessions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from replay.cli import main
from replay.qa.errors import QAError
from replay.qa.labels import (
    Disposition,
    DispositionLine,
    LabelledRun,
    LabelRefusal,
    Mode,
    ReviewVerdict,
    build_labels,
    read_labels,
    reviewer_key,
)
from tests.replay.qa.corpus import RETRIES, append_answer, text
from tests.support.curation import LOOKUP, copy_workspace, session_path


def line(**fields: Any) -> DispositionLine:
    return DispositionLine.model_validate({"workspace": "ws", **fields})


def test_dispositions_join_the_runs_and_the_rest_are_counted() -> None:
    finals = [("ws", "a", "f-a"), ("ws", "b", "f-b"), ("ws", "c", "f-c")]
    lines = [(1, line(session="a", final_record="f-a", disposition="fail", reviewer={"shadow-qwen": "pass"})),
             (2, line(session="b", final_record="old", disposition="pass")),  # the session went on after it
             (3, line(session="d", disposition="pass")),  # no such run
             (4, line(session="c", reviewer={"shadow-cascade": "escalate"}))]  # a verdict, no person yet
    build = build_labels(finals, lines)
    assert [(r.session, r.disposition, r.reviewer) for r in build.runs] == [
        ("a", Disposition.FAIL, {Mode.SHADOW_QWEN: ReviewVerdict.PASS}), ("b", None, {}),
        ("c", None, {Mode.SHADOW_CASCADE: ReviewVerdict.ESCALATE})]
    assert build.labelled == 1 and build.refused == {LabelRefusal.STALE: 1, LabelRefusal.NO_RUN: 1}
    assert build.examples == ["line 2: names final record old, the run's is now f-b",
                              "line 3: ws/d: the corpus holds no finished run of it"]


def test_a_run_labelled_twice_is_refused_with_both_lines() -> None:
    with pytest.raises(QAError, match="line 3: run ws/a is already labelled on line 1"):
        build_labels([], [(1, line(session="a", disposition="pass")), (3, line(session="a", disposition="fail"))])


@pytest.mark.parametrize("fields", [
    {"session": "a"},  # says nothing
    {"session": "a", "reviewer": {"off": "pass"}},  # mode off runs no reviewer
    {"session": "a", "reviewer": {"enforce": "pass"}},
    {"session": "a", "disposition": "maybe"},
    {"session": "../a", "disposition": "pass"},
    {"session": "a", "disposition": "pass", "note": "x"},
])
def test_a_dispositions_line_that_is_not_one(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        line(**fields)


def test_a_reviewer_is_named_with_its_mode() -> None:
    assert reviewer_key("qwen", None) == "qwen"
    assert reviewer_key("production", Mode.SHADOW_CASCADE) == "production@shadow-cascade"


def test_a_labels_file_naming_a_run_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "reviews.jsonl"
    run = LabelledRun(workspace="ws", session="a", final_record="f").model_dump_json()
    path.write_text(f"{run}\n{run}\n")
    with pytest.raises(QAError, match=r"reviews.jsonl:2: run ws/a is already on line 1"):
        read_labels(path)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """ws-a's two recorded sessions with planted final answers; ws-b's as recorded (no finished run)."""
    root = tmp_path / "corpus"
    copy_workspace(root, "ws-a")
    copy_workspace(root, "ws-b")
    for session in (LOOKUP, RETRIES):
        append_answer(session_path(root, "ws-a", session), session, text("INV-7 is paid."))
    return root


def final_of(root: Path, session: str) -> str:
    lines = [json.loads(x) for x in session_path(root, "ws-a", session).read_text().splitlines()]
    return str(next(x["uuid"] for x in reversed(lines) if x.get("type") == "assistant"))


def test_qa_labels_writes_every_finished_run(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dispositions = tmp_path / "dispositions.jsonl"
    dispositions.write_text(
        json.dumps({"workspace": "ws-a", "session": LOOKUP, "final_record": final_of(corpus, LOOKUP),
                    "disposition": "pass", "reviewer": {"shadow-qwen": "pass", "shadow-dual": "escalate"}}) + "\n"
        + json.dumps({"workspace": "ws-b", "session": LOOKUP, "disposition": "fail"}) + "\n")
    out = tmp_path / "reviews.jsonl"
    assert main(["qa", "labels", str(corpus), "--dispositions", str(dispositions), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[:3] == [
        f"{out}: 2 finished run(s): 1 with a person's disposition (1 pass, 0 fail), 1 without; 1 with a production "
        "reviewer verdict", "dispositions not used: no_run 1",
        f"  line 2: ws-b/{LOOKUP}: the corpus holds no finished run of it"]
    runs = read_labels(out)
    assert [(r.session, r.final_record, r.disposition, r.reviewer) for r in runs] == [
        (RETRIES, final_of(corpus, RETRIES), None, {}),
        (LOOKUP, final_of(corpus, LOOKUP), Disposition.PASS,
         {Mode.SHADOW_QWEN: ReviewVerdict.PASS, Mode.SHADOW_DUAL: ReviewVerdict.ESCALATE})]


@pytest.mark.parametrize(("content", "error"), [
    ('{"workspace": "ws-a", "session": "s", "disposition": "pass"}\n{"workspace": "ws-a"}\n',
     "dispositions.jsonl:2: field session: Field required"),
    ('{"workspace": "ws-a", "session": "s", "disposition": "pass"}\n' * 2,
     "dispositions.jsonl: line 2: run ws-a/s is already labelled on line 1; one line a run"),
])
def test_a_bad_dispositions_file_is_one_error_line(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   content: str, error: str) -> None:
    dispositions = tmp_path / "dispositions.jsonl"
    dispositions.write_text(content)
    out = tmp_path / "reviews.jsonl"
    assert main(["qa", "labels", str(corpus), "--dispositions", str(dispositions), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and err.endswith(error) and "\n" not in err and not out.exists()


def test_labels_are_never_written_into_the_corpus(corpus: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    dispositions = tmp_path / "d.jsonl"
    dispositions.write_text("")
    assert main(["qa", "labels", str(corpus), "--dispositions", str(dispositions),
                 "--out", str(corpus / "ws-a" / "reviews.jsonl")]) == 2
    assert "inside a corpus; the corpus is only ever read" in capsys.readouterr().err

"""Reviewer against people: the matrix and every figure on labelled runs built here, each figure checked against
its own computation (κ by its definition, McNemar by enumerating every sign sequence), the evidence file's
consistency check, and `worker-replay qa agree`."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from pathlib import Path

import pytest
from pydantic import ValidationError

from core.evidence import AgreementReport, AgreementRow, Disposition, ReviewVerdict
from replay.cli import main
from replay.qa.agreement import agreement, format_agreement
from replay.qa.answer import ReviewOutcome
from replay.qa.errors import QAError
from replay.qa.labels import LabelledRun, Mode
from replay.qa.verdicts import ReviewerVerdictLine, gather, production_lines
from replay.stats import clopper_pearson

P, F, E = ReviewVerdict.PASS, ReviewVerdict.FAIL, ReviewVerdict.ESCALATE


def enumerated_mcnemar(first: int, second: int) -> float:
    """P(a sequence of the discordant runs' signs is at least as unbalanced as the observed one), enumerated."""
    n = first + second
    extreme = sum(1 for signs in itertools.product((1, -1), repeat=n) if abs(sum(signs)) >= abs(first - second))
    return float(Fraction(extreme, 2**n))


def labelled(people: str, workspace: str = "ws-a", start: int = 0) -> list[LabelledRun]:
    """One run per letter: p (people passed it), f (failed it), - (no disposition)."""
    return [LabelledRun(workspace=workspace, session=f"s{start + i}", final_record=f"f{start + i}",
                        disposition=None if c == "-" else Disposition(c.replace("p", "pass").replace("f", "fail")))
            for i, c in enumerate(people)]


def judged(runs: list[LabelledRun], reviewer: str, verdicts: str) -> list[tuple[str, ReviewerVerdictLine]]:
    return [("test", ReviewerVerdictLine(workspace=r.workspace, session=r.session, reviewer=reviewer,
                                         verdict={"p": P, "f": F, "e": E}[v]))
            for r, v in zip(runs, verdicts, strict=True) if v != "."]


# people:  p p p p f f f f f -  (ws-a)   p f f p (ws-b)
# qwen:    p p f e p f f e f p           p p f p
RUNS = labelled("ppppfffff-") + labelled("pffp", "ws-b", 10)
QWEN = judged(RUNS, "qwen", "ppfepffefp" + "ppfp")


def test_the_matrix_and_rates_of_one_reviewer() -> None:
    report = agreement(RUNS, gather(RUNS, QWEN))
    row = report.row("qwen", None)
    assert row is not None and (row.reviewed, row.labelled) == (14, 13)  # the unlabelled run is reviewed, not counted
    assert row.matrix == {P: {Disposition.PASS: 4, Disposition.FAIL: 2}, F: {Disposition.PASS: 1, Disposition.FAIL: 4},
                          E: {Disposition.PASS: 1, Disposition.FAIL: 1}}
    assert (row.false_passes, row.human_fails, row.false_pass_rate) == (2, 7, 2 / 7)
    assert row.false_pass_ci == clopper_pearson(2, 7)
    assert (row.escalations, row.escalation_rate, row.escalation_ci) == (2, 2 / 13, clopper_pearson(2, 13))
    # κ of pass / not pass against people: agree = 4 (pass, pass) + 5 (not pass, fail) of 13
    observed, chance = Fraction(9, 13), Fraction(6 * 6 + 7 * 7, 13 * 13)
    assert row.kappa == pytest.approx(float((observed - chance) / (1 - chance)), abs=1e-12)
    ws_b = report.row("qwen", "ws-b")
    assert ws_b is not None and (ws_b.labelled, ws_b.false_passes, ws_b.human_fails) == (4, 1, 2)
    assert [(r.reviewer, r.workspace) for r in report.rows] == [("qwen", "ws-a"), ("qwen", "ws-b"), ("qwen", None)]
    assert (report.runs, report.labelled, report.unmatched_verdicts) == (14, 13, 0)


def test_production_verdicts_are_a_reviewer_per_mode() -> None:
    runs = [RUNS[0].model_copy(update={"reviewer": {Mode.SHADOW_QWEN: P, Mode.SHADOW_CASCADE: E}}),
            RUNS[4].model_copy(update={"reviewer": {Mode.SHADOW_QWEN: P}})]
    lines = [("reviews.jsonl", line) for line in production_lines(runs)]
    report = agreement(runs, gather(runs, lines))
    qwen = report.row("production@shadow-qwen", None)
    cascade = report.row("production@shadow-cascade", None)
    assert qwen is not None and (qwen.labelled, qwen.false_passes, qwen.human_fails) == (2, 1, 1)
    assert cascade is not None and (cascade.labelled, cascade.escalations, cascade.human_fails) == (1, 1, 0)
    assert cascade.false_pass_rate is None and cascade.false_pass_ci == (0.0, 1.0)  # no run people failed


@pytest.mark.parametrize(("large", "only_qwen", "only_large"), [
    ("ppfepffefp" + "ppfp", 0, 0),  # the same verdicts: no discordant run, p = 1
    ("ppffffffff" + "pffp", 0, 2),  # large right on two runs qwen got wrong, wrong on none it got right
    ("ffppffffff" + "pffp", 2, 4),
    ("pppppppppp" + "pppp", 5, 2),  # large passes everything: right on people's passes only
])
def test_two_reviewers_by_the_exact_mcnemar_test(large: str, only_qwen: int, only_large: int) -> None:
    """Right = passed or not as people did; qwen is wrong on s2, s3, s4 and s11."""
    report = agreement(RUNS, gather(RUNS, QWEN + judged(RUNS, "large", large)))
    [pair] = [p for p in report.pairs if p.workspace is None]
    assert (pair.first, pair.second, pair.runs) == ("large", "qwen", 13)
    assert (pair.only_first_right, pair.only_second_right) == (only_large, only_qwen)
    assert pair.p_value == pytest.approx(enumerated_mcnemar(only_large, only_qwen), abs=1e-15)


def test_pairs_are_per_workspace_too_and_only_on_runs_both_judged() -> None:
    large = judged(RUNS, "large", "pp........" + "ffff")
    report = agreement(RUNS, gather(RUNS, QWEN + large))
    assert [(p.workspace, p.runs) for p in report.pairs] == [("ws-a", 2), ("ws-b", 4), (None, 6)]


def test_verdicts_on_other_runs_are_counted_and_a_second_verdict_refused() -> None:
    stray = [("v:1", ReviewerVerdictLine(workspace="ws-z", session="s0", reviewer="qwen", verdict=P)),
             ("v:2", ReviewerVerdictLine(workspace="ws-a", session="s0", reviewer="large", verdict=P,
                                         final_record="older"))]
    assert agreement(RUNS, gather(RUNS, QWEN + stray)).unmatched_verdicts == 2
    with pytest.raises(QAError, match=r"v:3: qwen judged ws-a/s0 already \(test\)"):
        gather(RUNS, [*QWEN, ("v:3", QWEN[0][1])])


def test_an_evidence_file_whose_counts_are_not_its_matrix_is_refused() -> None:
    row = agreement(RUNS, gather(RUNS, QWEN)).row("qwen", None)
    assert row is not None
    with pytest.raises(ValidationError, match="must be the matrix's"):
        AgreementRow.model_validate({**row.model_dump(), "false_passes": 0})
    with pytest.raises(ValidationError):
        AgreementRow.model_validate({**row.model_dump(), "reviewed": 10**8})


def test_qa_agree_prints_the_table_and_writes_the_evidence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels, verdicts, out = tmp_path / "reviews.jsonl", tmp_path / "verdicts.jsonl", tmp_path / "agreement.json"
    labels.write_text("".join(r.model_dump_json() + "\n" for r in RUNS))
    verdicts.write_text("".join(line.model_dump_json() + "\n" for _, line in QWEN))
    assert main(["qa", "agree", "--labels", str(labels), "--verdicts", str(verdicts), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("qa agree: 14 run(s), 13 with a person's disposition, 1 without")
    assert "2/7 = 28.6% [3.7%, 71.0%]" in text and "2/13 = 15.4%" in text
    report = AgreementReport.model_validate_json(out.read_text())
    assert report.row("qwen", "ws-b") is not None
    assert main(["qa", "agree", "--labels", str(labels), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == []  # the labels alone carry no reviewer verdict


def test_a_bad_verdicts_line_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels, verdicts = tmp_path / "reviews.jsonl", tmp_path / "verdicts.jsonl"
    labels.write_text("".join(r.model_dump_json() + "\n" for r in RUNS))
    verdicts.write_text('{"workspace": "ws-a", "session": "s0", "reviewer": "qwen", "verdict": "maybe"}\n')
    assert main(["qa", "agree", "--labels", str(labels), "--verdicts", str(verdicts)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {verdicts}:1: field verdict: Input should be") and "\n" not in err


def test_escalations_forced_by_an_unusable_answer_are_counted_apart() -> None:
    """A replayed reviewer whose answer could not be used escalates (so it never passes a run); the row says how
    many of its escalations were that, per workspace and over all, and only on labelled runs."""
    unusable = {"ws-a": ["s0", "s9"], "ws-b": []}  # s0: qwen had passed it, as people did; s9: not labelled
    lines = [(source, line.model_copy(update={"outcome": ReviewOutcome.NO_CALL, "answered": None,
                                              "verdict": E})
              if line.session in unusable[line.workspace] else line) for source, line in QWEN]
    report = agreement(RUNS, gather(RUNS, lines))
    row, plain = report.row("qwen", None), agreement(RUNS, gather(RUNS, QWEN)).row("qwen", None)
    assert row is not None and plain is not None
    assert (row.escalations, row.unusable) == (3, 1) and (plain.escalations, plain.unusable) == (2, 0)
    ws_b = report.row("qwen", "ws-b")
    assert ws_b is not None and ws_b.unusable == 0
    assert ", 1 unusable" in format_agreement(report) and "unusable" not in format_agreement(
        agreement(RUNS, gather(RUNS, QWEN)))
    with pytest.raises(ValidationError, match="more unusable answers than escalations"):
        AgreementRow.model_validate({**row.model_dump(), "unusable": 4})


def test_the_evidence_format_defaults_to_the_statistics_confidence() -> None:
    """`core/evidence.py` cannot import `replay.stats`; its default confidence is the one `qa agree` uses."""
    from replay.stats import DEFAULT_CONFIDENCE
    assert AgreementReport.model_fields["confidence"].default == DEFAULT_CONFIDENCE

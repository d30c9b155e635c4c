"""Calibrated like the instrument: a planted reviewer with known false-pass and escalation rates (a seeded
function, no model) on a labelled set. Over many seeds `qa agree`'s exact intervals cover the planted rates at
least about as often as their confidence says, and end to end through the commands a reviewer worse than
configs/gates/reviewer-enforce.toml allows is refused, one good enough passes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from core.evidence import Disposition
from replay.analysis.gates import read_verdict
from replay.cli import main
from replay.qa.agreement import agreement
from replay.qa.labels import LabelledRun
from replay.qa.planted_reviewer import PLANTED, PlantedRates, planted_verdict, planted_verdicts
from replay.qa.verdicts import gather

ROOT = Path(__file__).resolve().parents[3]
POLICY = ROOT / "configs" / "gates" / "reviewer-enforce.toml"
SEEDS = 600


def labelled_set(fails: int, passes: int, unlabelled: int = 0) -> list[LabelledRun]:
    dispositions = [Disposition.FAIL] * fails + [Disposition.PASS] * passes + [None] * unlabelled
    return [LabelledRun(workspace=f"ws-{i % 3}", session=f"s{i}", final_record=f"f{i}", disposition=d)
            for i, d in enumerate(dispositions)]


def test_the_planted_rates_hold_on_a_large_set() -> None:
    runs = labelled_set(20_000, 20_000, 50)
    rates = PlantedRates(false_pass=0.1, escalation=0.2, false_fail=0.05)
    row = agreement(runs, gather(runs, [("planted", v) for v in planted_verdicts(runs, rates, seed=7)])).row(
        PLANTED, None)
    assert row is not None and row.reviewed == row.labelled == 40_000  # no verdict without a disposition
    assert row.false_pass_ci[0] < 0.1 < row.false_pass_ci[1] and row.escalation_ci[0] < 0.2 < row.escalation_ci[1]
    assert row.false_pass_rate == pytest.approx(0.1, abs=0.01) and row.escalation_rate == pytest.approx(0.2, abs=0.01)


@pytest.mark.parametrize(("false_pass", "escalation"), [(0.1, 0.15), (0.02, 0.3)])
def test_over_many_seeds_the_intervals_cover_the_planted_rates(false_pass: float, escalation: float) -> None:
    """Clopper–Pearson never covers less than 95% at a fixed n; over 600 seeds a coverage under 93% would be
    about 3 standard errors below that."""
    runs = labelled_set(100, 100)
    rates = PlantedRates(false_pass=false_pass, escalation=escalation, false_fail=0.05)
    covered = {"false_pass": 0, "escalation": 0}
    for seed in range(SEEDS):
        row = agreement(runs, gather(runs, [("planted", v) for v in planted_verdicts(runs, rates, seed)])).row(
            PLANTED, None)
        assert row is not None and row.human_fails == 100 and row.labelled == 200
        covered["false_pass"] += row.false_pass_ci[0] <= false_pass <= row.false_pass_ci[1]
        covered["escalation"] += row.escalation_ci[0] <= escalation <= row.escalation_ci[1]
    assert covered["false_pass"] / SEEDS >= 0.93 and covered["escalation"] / SEEDS >= 0.93, covered


def test_a_runs_verdict_depends_on_the_seed_and_the_run_only() -> None:
    runs = labelled_set(50, 50)
    rates = PlantedRates(false_pass=0.3, escalation=0.3)
    alone = [planted_verdict(run, rates, 3) for run in runs[:10]]
    assert [planted_verdict(run, rates, 3) for run in reversed(runs)][-10:] == alone[::-1]
    assert [planted_verdict(run, rates, 4) for run in runs[:10]] != alone


def test_impossible_rates_are_refused() -> None:
    with pytest.raises(ValidationError, match="at most 1"):
        PlantedRates(false_pass=0.6, escalation=0.5)


def commands(tmp_path: Path, capsys: pytest.CaptureFixture[str], false_pass: float,
             fails: int = 150) -> tuple[int, str, Path]:
    """Labels → `qa plant` → `qa agree --out` → `qa gate` with the shipped policy; (exit, verdict text, file)."""
    labels = tmp_path / "reviews.jsonl"
    labels.write_text("".join(r.model_dump_json() + "\n" for r in labelled_set(fails, 300 - fails, 20)))
    verdicts, evidence = tmp_path / "planted.jsonl", tmp_path / "agreement.json"
    assert main(["qa", "plant", "--labels", str(labels), "--false-pass", str(false_pass), "--escalation", "0.1",
                 "--seed", "11", "--out", str(verdicts)]) == 0
    assert main(["qa", "agree", "--labels", str(labels), "--verdicts", str(verdicts), "--out", str(evidence)]) == 0
    capsys.readouterr()
    code = main(["qa", "gate", "--policy", str(POLICY), "--agreement", str(evidence), "--reviewer", PLANTED])
    return code, capsys.readouterr().out, tmp_path / "gate-reviewer-enforce-planted.json"


def test_a_reviewer_worse_than_the_threshold_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, text, written = commands(tmp_path, capsys, false_pass=0.2)
    assert code == 1 and "REJECTED (0 pass, 1 fail, 0 not run)" in text
    verdict = json.loads(written.read_text())["predicate"]["verdict"]
    assert verdict["candidate"] == PLANTED and verdict["baseline"] == "people" and not verdict["passed"]
    [condition] = verdict["conditions"]
    low, high = condition["evidence"]["false_pass_ci"]
    assert low <= 0.2 <= high and high > 0.05 and condition["evidence"]["labelled"] == 300


def test_a_reviewer_that_never_false_passes_is_passed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, text, written = commands(tmp_path, capsys, false_pass=0.0)
    assert code == 0 and "PASSED (1 pass, 0 fail, 0 not run)" in text and read_verdict(written).passed


def test_too_few_runs_people_failed_cannot_pass_even_without_a_false_pass(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """71 runs people failed, none passed: the CP upper bound is 1 − 0.025^(1/71) > 5%."""
    code, text, _ = commands(tmp_path, capsys, false_pass=0.0, fails=71)
    assert code == 1 and "false passes 0 of" in text

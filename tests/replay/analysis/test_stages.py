"""One stage of a candidate's path (quantisation) between two runs of the same arms on the same suite: the second
run's arms beside the first's, each arm against itself. Planted: the quantised run is the high-precision run with
known decisions flipped, so the discordant pairs the report must show are known exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.records import ResultRecord
from replay.analysis.report import report_run
from replay.analysis.stages import stage_arm, stage_pairs, staged
from replay.cli import main as replay_main
from replay.run.directory import ResultsError
from tests.support.e13 import BASE, Q_ONLY, e13_results, with_replicate
from tests.support.runs import seal, write_sealed

LOST = ("verified_recovery-001", "verified_recovery-002", "clean_trajectory_action-000")
GAINED = ("verified_recovery-060",)


def flipped(records: list[ResultRecord], arm: str, ids: tuple[str, ...]) -> list[ResultRecord]:
    """`records` with the joint correctness of `ids` in `arm` turned over (planted)."""
    return [r.model_copy(update={"score": r.score.model_copy(update={"joint_correct": not r.score.joint_correct})})
            if r.arm == arm and r.decision_id in ids else r for r in records]


def write_run(path: Path, records: list[ResultRecord]) -> Path:
    path.mkdir()
    write_sealed(path, records)
    (path / "run.json").write_text(json.dumps({"config": {"arms": [{"name": BASE}, {"name": Q_ONLY}]}}))
    seal(path)
    return path


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    high = e13_results((BASE, Q_ONLY))
    by_id = {r.decision_id: r for r in high if r.arm == Q_ONLY}
    assert all(by_id[i].score.joint_correct for i in LOST) and not any(by_id[i].score.joint_correct for i in GAINED)
    low = flipped(high, Q_ONLY, LOST + GAINED)
    return write_run(tmp_path / "high", high), write_run(tmp_path / "quantised", low)


def test_the_report_shows_each_arm_against_itself_across_quantisation(runs: tuple[Path, Path]) -> None:
    high, low = runs
    md, html = report_run(high, stages={"quantised": low})
    text = md.read_text()
    lines = text.splitlines()
    q_section = lines.index(next(line for line in lines if line.startswith("### q-only:quantised against q-only (")))
    wins = next(line for line in lines[q_section:] if line.startswith("Wins ("))
    losses = next(line for line in lines[q_section:] if line.startswith("Losses ("))
    assert losses.startswith(f"Losses ({len(LOST)}): ") and sorted(losses.split(": ")[1].split(", ")) == sorted(LOST)
    assert wins == f"Wins ({len(GAINED)}): {', '.join(GAINED)}"
    base_section = lines.index(next(line for line in lines if line.startswith("### base:quantised against base (")))
    assert next(line for line in lines[base_section:] if line.startswith("Losses (")) == "Losses (0): none"
    assert any(line.startswith("### q-only:quantised against base:quantised (") for line in lines)
    assert any(line.startswith("### q-only against base (") for line in lines), "the run's own comparison stays"
    assert "q-only:quantised against q-only" in html.read_text()


def test_the_cli_takes_the_quantised_run(runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    high, low = runs
    assert replay_main(["report", str(high), "--quantised", str(low)]) == 0
    assert "### q-only:quantised against q-only" in (high / "report.md").read_text()


def test_a_quantised_run_without_an_arm_is_refused_naming_it(tmp_path: Path, runs: tuple[Path, Path],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    high, _ = runs
    only_base = write_run(tmp_path / "base-only", e13_results((BASE,)))
    assert replay_main(["report", str(high), "--quantised", str(only_base)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the quantised run has no results for arm(s) 'q-only' (its arms: base)" in err[0], err
    assert not (high / "report.md").exists()


def test_a_quantised_run_of_other_decisions_is_refused(tmp_path: Path, runs: tuple[Path, Path]) -> None:
    high, _ = runs
    fewer = write_run(tmp_path / "fewer", [r for r in e13_results((BASE, Q_ONLY)) if r.decision_id != LOST[0]])
    with pytest.raises(ResultsError, match=f"answered different decisions.*{LOST[0]}"):
        report_run(high, stages={"quantised": fewer})


def test_staged_renames_arms_and_their_replicates() -> None:
    records = with_replicate(e13_results((BASE, Q_ONLY)))
    renamed = staged(records, "quantised")
    assert {r.arm for r in renamed} == {stage_arm(r.arm, "quantised") for r in records}
    assert {r.replicate_of for r in renamed} - {None} == {stage_arm(r.replicate_of, "quantised")
                                                           for r in records if r.replicate_of}
    assert [r.decision_id for r in renamed] == [r.decision_id for r in records]


def test_stage_pairs_put_every_arm_against_itself_then_the_comparisons_again() -> None:
    assert stage_pairs([("base", "cand"), ("base", "mix")], "q", {"base", "cand", "mix", "extra"}) == [
        ("base", "base:q"), ("cand", "cand:q"), ("mix", "mix:q"), ("base:q", "cand:q"), ("base:q", "mix:q")]

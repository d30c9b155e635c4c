"""The demo's planted calibration beside the model: run on the demo's own slice and pack, labelled planted,
resumed."""

from __future__ import annotations

from pathlib import Path

import pytest

from demo.demo_data import write_demo
from demo.instrument import instrument_beside_model, planted_calibration
from demo.run import SANDBOX_FAMILIES, SERIOUS_GATE, demo_cell, held_out_slice, sandbox_pack
from replay.analysis.gates import evaluate_gate
from replay.calibration.calibrate import END_TO_END
from replay.suite import load_suite

HARMFUL = "lc:helpdesk-api-flaky"


@pytest.fixture(scope="module")
def slice_and_memory(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("demo")
    suite_dir, memory = write_demo(root / "data", seed=0)
    held_out_slice(load_suite(suite_dir), root / "held-out", demo_cell)
    return root / "held-out", memory


def test_the_demo_calibration_is_planted_and_a_rerun_reads_it(slice_and_memory: tuple[Path, Path],
                                                              tmp_path: Path) -> None:
    suite_dir, memory = slice_and_memory
    suite = load_suite(suite_dir)
    pack = sandbox_pack(tmp_path)
    assert len(pack.scenarios) == len(SANDBOX_FAMILIES)
    cal = planted_calibration(suite, memory, tmp_path / "cal", pack, replicates=40)
    assert cal.label == "planted" and cal.gate is not None and cal.lesson is not None and cal.sandbox is not None
    assert [e.episodes_agree for e in cal.end_to_end] == [e.episodes for e in cal.end_to_end] == [3 * len(pack.scenarios)]
    assert cal.gate.replicates == 40 and [e.agree_with_simulation for e in cal.end_to_end] == [e.rows for e in cal.end_to_end]
    # What the demo shows of the instrument holds on its trimmed slice: the causal gate catches the planted
    # harmful rule and spares the genuine ones, and the judged gate stays quiet on the planted null.
    top = max(cal.lesson.uptakes, key=lambda u: u.uptake)
    assert {r.rule_id: r.causal.rate >= 0.9 for r in top.rules if r.rule_id == HARMFUL} == {HARMFUL: True}
    assert max(r.causal.rate for r in top.rules if r.rule_id != HARMFUL) == 0.0
    judged = next(c for c in cal.gate.conditions if c.id == "all-judged")
    assert judged.false_pass is not None and judged.false_pass.rate <= 0.05
    # A resumed demo reads what it wrote instead of calibrating again (calibrate refuses an out that holds one).
    assert planted_calibration(suite, memory, tmp_path / "cal", pack, replicates=7) == cal

    # The model's side: here a gate verdict of the planted run itself, as `analyse` passes the model's.
    run_dir = tmp_path / "cal" / END_TO_END / "seed-0"
    verdict = evaluate_gate(SERIOUS_GATE, run_dir, "baseline", "cand-plus20")
    text = instrument_beside_model(cal, [verdict], {HARMFUL: "hold (0 wins / 1 loss, p=1)"})
    lines = text.splitlines()
    assert "planted = the planted-effect endpoint's seeded policy on this suite and pack" in lines[0]
    assert "never a model" in lines[0]
    sandbox = next(line for line in lines if "the conditions the sandbox run judges" in line)
    sandbox_header = lines[lines.index(sandbox) + 1]
    assert "planted null: pass" in sandbox_header and "points completed: pass" in sandbox_header
    # The planted run judged no sandbox evidence: its measured sandbox conditions are not_run.
    assert next(line for line in lines if line.strip().startswith("critical-failures")).rstrip().endswith("not_run")
    header = next(line for line in lines if line.strip().startswith("condition"))
    assert "planted null: false pass" in header and "planted +20 points: pass" in header
    assert "measured cand-plus20" in header
    rows = {line.split()[0]: line for line in lines if line.startswith("  ") and line.split()[0] in
            {"paired-gain", "targeted-ci", "all-judged", HARMFUL, "lc:billing-escalations"}}
    assert rows["targeted-ci"].rstrip().endswith(verdict.status("targeted-ci").value)
    assert rows[HARMFUL].split()[1] == "harmful" and rows[HARMFUL].rstrip().endswith("hold (0 wins / 1 loss, p=1)")
    assert rows["lc:billing-escalations"].split()[1] == "genuine"
    assert rows["lc:billing-escalations"].rstrip().endswith("not judged")
    lesson_header = next(line for line in lines if line.strip().startswith("rule"))
    assert "planted, harmful rule followed 90%: evicted" in lesson_header and "measured: causal verdict" in lesson_header

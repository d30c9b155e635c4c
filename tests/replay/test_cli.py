"""`worker-replay` on results files alone (the E13 fixture): exit codes, outputs, files, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replay.cli import main
from tests.support.cli import assert_one_error_line, run_cli
from tests.support.e13 import ARMS, BASE, Q_ONLY, e13_results
from tests.support.runs import decision, seal, write_sealed

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "s1"
    run.mkdir()
    write_sealed(run, e13_results(ARMS))
    return run


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_compare_prints_table_1_and_json(run_dir, tmp_path, capsys):
    ledger = str(tmp_path / "ledger.sqlite")
    code, out, _ = cli(capsys, "compare", str(run_dir), "--baseline", BASE, "--candidate", Q_ONLY, "--ledger", ledger)
    assert code == 0
    recovery = next(line for line in out.splitlines() if line.startswith("verified_recovery, joint"))
    assert "31" in recovery and "38" in recovery and "+7 / −0" in recovery and "0.0156" in recovery
    code, out, _ = cli(capsys, "compare", str(run_dir), "--baseline", BASE, "--candidate", Q_ONLY, "--json",
                       "--ledger", ledger)
    row = next(r for r in json.loads(out)["correctness"] if r["scope"] == "all_positive" and r["measure"] == "joint")
    assert (row["stats"]["baseline_correct"], row["stats"]["candidate_correct"]) == (138, 141)


def test_gate_rejects_s1_exits_1_and_writes_the_verdict(run_dir, tmp_path, capsys):
    code, out, _ = cli(capsys, "gate", str(run_dir), "--policy", str(ROOT / "configs/gates/serious-candidate.toml"),
                       "--baseline", BASE, "--candidate", Q_ONLY, "--ledger", str(tmp_path / "l.sqlite"))
    assert code == 1 and "REJECTED" in out
    verdict = json.loads(next(run_dir.glob("gate-*.json")).read_text())["predicate"]["verdict"]
    status = {c["id"]: c["status"] for c in verdict["conditions"]}
    assert [status[c] for c in ("paired-gain", "repeat-reduction", "targeted-ci", "clean-non-inferiority")] == \
        ["fail", "pass", "pass", "fail"]


def test_gate_plan_says_what_each_condition_reads_without_judging(run_dir, tmp_path, capsys):
    policy = str(ROOT / "configs/gates/serious-candidate.toml")
    code, out, _ = cli(capsys, "gate", "--plan", "--policy", policy)
    assert code == 0 and "critical-failures" in out and "NO" in out and not list(run_dir.glob("gate-*.json"))
    code, out, _ = cli(capsys, "gate", str(run_dir), "--plan", "--policy", policy, "--baseline", BASE,
                       "--candidate", Q_ONLY, "--evidence", f"confirmation={run_dir}")
    confirmation = next(line for line in out.splitlines() if line.lstrip().startswith("confirmation-run"))
    assert code == 0 and confirmation.split()[2] == "yes"
    assert "missing now: critical-failures, unsupported-completion, isolated-replay-completion;" in out
    assert_one_error_line(run_cli("replay", "gate", "--policy", policy, cwd=tmp_path),
                          "gate needs RUN_DIR, --baseline, --candidate (or --plan")
    assert_one_error_line(run_cli("replay", "gate", str(run_dir), "--policy", policy, "--suite", str(tmp_path),
                                  cwd=tmp_path), "--suite is read only with --plan")


def test_gate_plan_reads_the_suite_given(tmp_path, capsys):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "suite.toml").write_text('name = "t"\nversion = "1"\ncreated = 2026-08-01T00:00:00Z\n')
    (suite / "decisions.jsonl").write_text(decision(1).model_dump_json(exclude_none=True) + "\n")
    code, out, _ = cli(capsys, "gate", "--plan", "--policy", str(ROOT / "configs/gates/corpus-only.toml"),
                       "--suite", str(suite))
    assert code == 0 and f"suite {suite}:" in out
    assert "cannot pass on this suite, whatever the candidate does: repeat-reduction (it holds 0 known_failure" in out


def test_gate_help_names_the_plan_and_the_corpus_only_policy(capsys):
    with pytest.raises(SystemExit):
        main(["gate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--plan" in text and "configs/gates/corpus-only.toml asks what a corpus alone can answer" in text


def test_report_writes_markdown_and_html(run_dir, tmp_path, capsys):
    code, out, _ = cli(capsys, "report", str(run_dir), "--pair", f"{BASE}:{Q_ONLY}", "--ledger", str(tmp_path / "l"))
    assert code == 0 and (run_dir / "report.html").is_file() and (run_dir / "report.md").is_file()
    assert "report.html" in out


def test_unknown_arm_is_a_clear_error(run_dir, tmp_path, capsys):
    code, _, err = cli(capsys, "compare", str(run_dir), "--baseline", BASE, "--candidate", "nope",
                       "--ledger", str(tmp_path / "l"))
    assert code == 2 and err.startswith("error:") and "nope" in err and "Traceback" not in err


def test_suite_validate_reports_file_and_line(tmp_path, capsys):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "suite.toml").write_text('name = "s"\nversion = "1"\ncreated = 2026-08-01T00:00:00Z\n')
    (suite / "decisions.jsonl").write_text('{"id": "a"}\nnot json\n')
    code, out, _ = cli(capsys, "suite", "validate", str(suite))
    assert code == 1
    assert f"{suite / 'decisions.jsonl'}:1:" in out and f"{suite / 'decisions.jsonl'}:2:" in out


def test_dispute_then_trace_round_trip(run_dir, tmp_path, capsys):
    from core.records import ResultRecord
    from replay.memory.ledger import Ledger

    ledger = tmp_path / "ledger.sqlite"
    record = e13_results(ARMS)[0]
    carried = ResultRecord.model_validate({**record.model_dump(), "injected_rule_ids": ["lc:x"]})
    with Ledger(ledger) as db:
        db.ingest_results("run-1", [carried])
    code, out, _ = cli(capsys, "dispute", "lc:x", "--reason", "user says it is wrong", "--ledger", str(ledger))
    assert code == 0 and "1 need a re-run" in out and "NEEDS RE-RUN" in out
    code, out, _ = cli(capsys, "trace", "lc:x", "--ledger", str(ledger))
    assert "run run-1: 1 result(s)" in out and "user says it is wrong" in out


def test_report_compares_every_arm_with_the_run_configs_first_arm(run_dir, tmp_path, capsys):
    arms = [{"name": name} for name in (BASE, Q_ONLY, "mixed")]
    (run_dir / "run.json").write_text(json.dumps({"config": {"arms": arms}}))
    seal(run_dir)
    code, _, _ = cli(capsys, "report", str(run_dir), "--ledger", str(tmp_path / "l"))
    html = (run_dir / "report.html").read_text()
    assert code == 0 and 'id="cmp-base-vs-q-only"' in html and 'id="cmp-base-vs-mixed"' in html


def test_report_baseline_option_names_the_reference_arm(run_dir, tmp_path, capsys):
    arms = [{"name": name} for name in (BASE, Q_ONLY, "mixed")]
    (run_dir / "run.json").write_text(json.dumps({"config": {"arms": arms}}))
    seal(run_dir)
    code, _, _ = cli(capsys, "report", str(run_dir), "--baseline", Q_ONLY, "--ledger", str(tmp_path / "l"))
    html = (run_dir / "report.html").read_text()
    assert code == 0 and 'id="cmp-q-only-vs-base"' in html and 'id="cmp-q-only-vs-mixed"' in html
    assert "calls changed vs q-only" in html and "calls changed vs base" not in html


@pytest.mark.parametrize("args, needles", [
    (["dispute", "lc:x", "--reason", " ", "--ledger", "l.sqlite"], ["lc:x", "needs a reason"]),
    (["undispute", "lc:x", "--reason", "reviewed", "--ledger", "l.sqlite"], ["lc:x is not disputed"]),
    (["compare", "no-run", "--baseline", "a", "--candidate", "b", "--ledger", "l.sqlite"], ["no-run", "not found"]),
    (["gate", "no-run", "--policy", "no.toml", "--baseline", "a", "--candidate", "b", "--ledger", "l.sqlite"],
     ["no.toml"]),
    (["run", "--suite", "no-suite", "--config", "no.toml", "--out", "out"], ["no-suite"]),
])
def test_user_errors_print_one_error_line_and_exit_2(args, needles, tmp_path):
    assert_one_error_line(run_cli("replay", *args, cwd=tmp_path), *needles)


def test_a_malformed_evidence_option_is_a_usage_error(run_dir, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["gate", str(run_dir), "--policy", "p.toml", "--baseline", "a", "--candidate", "b", "--evidence", "shadow"])
    assert exit_.value.code == 2 and "expected KEY=PATH, got 'shadow'" in capsys.readouterr().err


def test_a_malformed_pair_option_is_a_usage_error(run_dir, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["report", str(run_dir), "--pair", "base"])
    assert exit_.value.code == 2 and "expected BASELINE:CANDIDATE, got 'base'" in capsys.readouterr().err


def test_plan_prints_the_table_and_json(run_dir, capsys):
    policy = str(ROOT / "configs/gates/serious-candidate.toml")
    code, out, _ = cli(capsys, "plan", "--pilot", str(run_dir), "--baseline", BASE, "--candidate", Q_ONLY,
                       "--policy", policy)
    assert code == 0 and "α = 0.05" in out
    assert any(line.startswith("all positives *") and "320" in line for line in out.splitlines())
    code, out, _ = cli(capsys, "plan", "--pilot", str(run_dir), "--baseline", BASE, "--candidate", Q_ONLY,
                       "--policy", policy, "--effect", "8", "--power", "0.9", "--json")
    data = json.loads(out)
    assert code == 0 and (data["effect_points"], data["power"]) == (8.0, 0.9)
    assert data["rows"][-1]["scope"] == "all_positive" and data["rows"][-1]["decisions_needed"] > 0


def test_plan_errors_are_one_line(run_dir, tmp_path):
    policy = str(ROOT / "configs/gates/serious-candidate.toml")
    assert_one_error_line(run_cli("replay", "plan", "--pilot", str(run_dir), "--baseline", BASE, "--candidate",
                                  Q_ONLY, "--policy", policy, "--power", "1.5", cwd=tmp_path), "power must be in (0, 1)")
    assert_one_error_line(run_cli("replay", "plan", "--pilot", str(run_dir), "--baseline", BASE, "--candidate",
                                  "nope", "--policy", policy, cwd=tmp_path), "nope")

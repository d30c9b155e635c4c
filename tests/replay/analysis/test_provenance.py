"""What `compare`, `report` and `gate` record in the ledger (issue 66): the run under its run_id and directory, the
arms, the rules their results carried, a verdict's policy and outcome; a dispute then keeps the gate from passing
until the rule is restored, and every verdict stays in the history."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from core.records import ResultRecord
from replay.analysis.gates import read_verdict
from replay.analysis.provenance import record_run
from replay.cli import main
from replay.cli.common import default_ledger
from replay.memory.ledger import Ledger, RuleRef
from replay.run.directory import RUN_JSON
from tests.support.cli import ROOT
from tests.support.e13 import ARMS, BASE, MIXED, Q_ONLY, e13_results
from tests.support.runs import LENIENT_POLICY, seal, write_sealed


def carrying(records: list[ResultRecord], rules: dict[tuple[str, str], list[str]]) -> list[ResultRecord]:
    """The records, those of (arm, decision) in `rules` having carried those rule ids."""
    return [r.model_copy(update={"injected_rule_ids": rules.get((r.arm, r.decision_id), [])}) for r in records]


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """The E13 run; q-only's answer to one recovery decision carried lc:x, mixed's lc:m."""
    rules = {(Q_ONLY, "verified_recovery-003"): ["lc:x"], (MIXED, "verified_recovery-004"): ["lc:m"]}
    return write_sealed(tmp_path / "run", carrying(e13_results(ARMS), rules))


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    return tmp_path / "ledger.sqlite"


def run_id(run: Path) -> str:
    return str(json.loads((run / RUN_JSON).read_text())["run_id"])


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().out


def test_compare_records_the_run_and_the_comparison_with_the_rules_its_arms_carried(
        run_dir: Path, ledger: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, "compare", str(run_dir), "--baseline", BASE, "--candidate", Q_ONLY, "--ledger", str(ledger))[0] == 0
    with Ledger(ledger) as opened:
        trace = opened.trace("lc:x")
        assert trace.runs == {run_id(run_dir): str(run_dir.resolve())}
        assert [(r.arm, r.decision_id) for r in trace.results] == [(Q_ONLY, "verified_recovery-003")]
        assert [(c.run_id, c.baseline, c.candidate) for c in trace.comparisons] == [(run_id(run_dir), BASE, Q_ONLY)]
        assert trace.comparisons[0].summary["decisions"] == 484
        assert opened.trace("lc:m").comparisons == ()  # mixed was not compared


def test_report_records_every_comparison_it_made(run_dir: Path, ledger: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, "report", str(run_dir), "--ledger", str(ledger))[0] == 0
    with Ledger(ledger) as opened:
        assert [(c.baseline, c.candidate) for c in opened.trace("lc:x").comparisons] == [(BASE, Q_ONLY)]
        assert [(c.baseline, c.candidate) for c in opened.trace("lc:m").comparisons] == [(BASE, MIXED)]


def test_gate_records_its_verdict_with_the_policy_the_outcome_and_the_arms_rules(
        run_dir: Path, ledger: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = ROOT / "configs" / "gates" / "serious-candidate.toml"
    code, _ = cli(capsys, "gate", str(run_dir), "--policy", str(policy), "--baseline", BASE, "--candidate", Q_ONLY,
                  "--ledger", str(ledger))
    with Ledger(ledger) as opened:
        [verdict] = opened.trace("lc:x").verdicts
        assert opened.trace("lc:m").verdicts == ()
    assert code == 1 and (verdict.run_id, verdict.kind, verdict.verdict) == (run_id(run_dir), "gate", "fail")
    assert verdict.subject.startswith(f"serious-candidate: {Q_ONLY} vs {BASE} at ")
    evidence = verdict.evidence
    assert evidence["policy_sha256"] == hashlib.sha256(policy.read_bytes()).hexdigest()
    assert (evidence["policy"], evidence["baseline"], evidence["candidate"]) == ("serious-candidate", BASE, Q_ONLY)
    assert evidence["verdict_file"] == str((run_dir / "gate-serious-candidate-q-only.json").resolve())
    assert evidence["conditions"]["paired-gain"] == "fail" and evidence["run_dir"] == str(run_dir.resolve())


def test_a_dispute_stops_the_gate_until_the_rule_is_restored_and_every_verdict_stays_in_the_history(
        run_dir: Path, ledger: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "lenient.toml"
    policy.write_text(LENIENT_POLICY)
    gate = ["gate", str(run_dir), "--policy", str(policy), "--baseline", BASE, "--candidate", Q_ONLY,
            "--ledger", str(ledger)]
    verdict_file = run_dir / "gate-lenient-q-only.json"
    assert cli(capsys, *gate)[0] == 0 and read_verdict(verdict_file).passed

    assert cli(capsys, "dispute", "lc:x", "--reason", "the user never said so", "--ledger", str(ledger))[0] == 0
    code, out = cli(capsys, *gate)
    written = read_verdict(verdict_file)
    assert code == 1 and not written.passed and written.tainted_rule_ids == ["lc:x"]
    assert written.disputed[0].reason == "the user never said so"
    assert "REJECTED (1 pass, 0 fail, 0 not run; rests on disputed rule(s) lc:x)" in out

    code, out = cli(capsys, "trace", "lc:x", "--ledger", str(ledger))
    verdicts = [line for line in out.splitlines() if line.startswith("verdict ")]
    assert [line.split(" -> ")[-1] for line in verdicts] == ["pass  NEEDS RE-RUN", "fail  NEEDS RE-RUN"]

    code, out = cli(capsys, "undispute", "lc:x", "--reason", "the user confirmed it", "--ledger", str(ledger))
    assert code == 0 and "restored " in out and "disputed " in out and "NEEDS RE-RUN" not in out
    assert cli(capsys, *gate)[0] == 0 and read_verdict(verdict_file).passed
    with Ledger(ledger) as opened:
        assert [v.verdict for v in opened.trace("lc:x").verdicts] == ["pass", "fail", "pass"]


def test_a_run_is_ingested_once_per_seal_and_one_without_a_run_id_is_known_by_its_results(
        run_dir: Path, ledger: Path) -> None:
    with Ledger(ledger) as opened:
        assert record_run(opened, run_dir) == run_id(run_dir)
        opened.dispute("lc:x", "bad")
        assert opened.trace("lc:x").results[0].needs_rerun
        assert record_run(opened, run_dir) == run_id(run_dir)  # nothing re-read: same seal
        manifest = json.loads((seal(run_dir) / RUN_JSON).read_text())
        del manifest["run_id"]
        (run_dir / RUN_JSON).write_text(json.dumps(manifest))
        sealed = manifest["seal"]["sha256"]
        assert record_run(opened, run_dir) == f"sha256:{sealed}"
        assert opened.rules_of(f"sha256:{sealed}", [Q_ONLY]) == {RuleRef("ws-a", "lc:x")}


def test_a_tests_default_ledger_is_its_own_outside_the_checkout(own_ledger: Path) -> None:
    assert default_ledger() == own_ledger and not own_ledger.resolve().is_relative_to(ROOT)

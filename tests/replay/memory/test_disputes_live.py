"""Seed 004's recovery path end to end on the CPU engine (issue 66): a rule planted in a workspace's memory is
injected into a real replay, judged by compare and a gate that passes; disputed, `trace` finds the run, the
comparison and the verdict, and the same gate now refuses, naming the rule and when it was disputed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replay.analysis.gates import read_verdict
from replay.cli import main as replay_main
from replay.run.directory import RUN_JSON, load_results
from serve.engine.launcher import EngineProcess
from tests.support.runs import LENIENT_POLICY, demo_slice

pytestmark = pytest.mark.engine
PLANTED = "lc:confirm-ticket-id"
STRATA = ("verified_recovery", "clean_trajectory_action")


def planted_slice(root: Path) -> tuple[Path, Path]:
    """Two held-out decisions of the demo suite frozen as a suite, and a memory root where each of their
    workspaces holds the planted rule, authorised (`evidence:user-explicit`) so that it is injected."""
    suite = root / "suite"
    picked = demo_slice(suite, root / "demo", STRATA)
    memory = root / "memory"
    for workspace in {d.workspace for d in picked}:
        rules = memory / workspace / "rules"
        rules.mkdir(parents=True)
        (rules / "learned-corrections.md").write_text(
            "# Learned Corrections\n\n## Rules: active\n"
            f"- Confirm the ticket id with the user before changing anything. <!-- {PLANTED} evidence:user-explicit -->\n")
    return suite, memory


def test_a_disputed_rule_reaches_its_run_comparison_and_verdict_and_the_gate_then_refuses(
        engine: EngineProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite, memory = planted_slice(tmp_path)
    config = tmp_path / "run.toml"
    config.write_text(f"""
[endpoint]
base_url = "{engine.base_url}/v1"
[decoding]
max_tokens = 32
[runner]
concurrency = 4
[memory]
root = "{memory}"
[[arms]]
name = "base"
model = "worker-base"
memory = "withheld"
[[arms]]
name = "memory"
model = "worker-base"
memory = "workspace"
""")
    policy = tmp_path / "lenient.toml"
    policy.write_text(LENIENT_POLICY)
    run, ledger = tmp_path / "run", ["--ledger", str(tmp_path / "ledger.sqlite")]
    gate = ["gate", str(run), "--policy", str(policy), "--baseline", "base", "--candidate", "memory", *ledger]

    assert replay_main(["run", "--suite", str(suite), "--config", str(config), "--out", str(run), *ledger]) == 0
    carried = {(r.arm, tuple(r.injected_rule_ids)) for r in load_results(run)}
    assert carried == {("base", ()), ("memory", (PLANTED,))}
    assert replay_main(["compare", str(run), "--baseline", "base", "--candidate", "memory", *ledger]) == 0
    assert replay_main(gate) == 0
    verdict_file = run / "gate-lenient-memory.json"
    assert read_verdict(verdict_file).passed
    capsys.readouterr()

    assert replay_main(["dispute", PLANTED, "--reason", "the user never asked for it", *ledger]) == 0
    assert replay_main(["trace", PLANTED, *ledger]) == 0
    trace = capsys.readouterr().out.splitlines()
    run_id = json.loads((run / RUN_JSON).read_text())["run_id"]
    assert trace[0] == f"{PLANTED}: 2 result(s), 1 comparison(s), 1 verdict(s); 4 need a re-run"
    assert trace[1].startswith("disputed ") and trace[1].endswith(": the user never asked for it")
    assert trace[2] == f"run {run_id} ({run.resolve()}): 2 result(s) in arm(s) memory (2)  NEEDS RE-RUN"
    assert trace[3].endswith(f" {run_id}: base vs memory  NEEDS RE-RUN")
    assert trace[4].startswith("verdict #") and f" {run_id}: gate lenient: memory vs base at " in trace[4]
    assert trace[4].endswith(" -> pass  NEEDS RE-RUN")

    assert replay_main(gate) == 1
    refused = read_verdict(verdict_file)
    assert not refused.passed and refused.tainted_rule_ids == [PLANTED]
    assert refused.disputed[0].reason == "the user never asked for it"
    assert f"cannot pass: rests on results that carried disputed rule(s) {PLANTED} (disputed " in capsys.readouterr().out

"""Executed corrections: a planted failed action is proven corrected only by a sandbox episode that completed
its scenario, played in the demo's real worlds (the calls scripted: planted, no model), and the target is the
first call the world accepted, with the values it ran with."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from demo.scenario_pack import write_pack
from replay.curation.proofs import ProofKind, RunEvidence, executed_corrections
from replay.sandbox.measures import score
from replay.sandbox.pack import Pack, load_pack, play
from replay.sandbox.runner import SandboxResult
from replay.sandbox.scenario import Call, Scenario


def episode(pack: Pack, scenario: Scenario, calls: list[Call], answer: str, arm: str) -> SandboxResult:
    world = pack.world(scenario)
    trajectory = play(world, scenario, calls, answer)
    oracle_end = play(world, scenario, scenario.oracle, scenario.oracle_answer).end_state
    return SandboxResult(
        arm=arm, scenario_id=scenario.id, world=scenario.world, workspace=scenario.workspace,
        policy_family=scenario.policy_family, model="worker-base", memory="withheld", endpoint_kind="engine",
        injected_rule_ids=[], trajectory=trajectory, scores=score(scenario, trajectory, oracle_end, world.prose_fields),
        episode_s=0.0, sandbox_s=0.0, finished_at=datetime(2026, 12, 4, tzinfo=UTC))


def test_a_failed_action_is_corrected_only_by_an_episode_that_completed(tmp_path: Path) -> None:
    pack = load_pack(write_pack(tmp_path / "pack", seed=0, per_family=1))
    scenario = next(s for s in pack.scenarios if s.policy_family == "recover-after-rejection")
    broken = episode(pack, scenario, scenario.broken, scenario.broken_answer, "base")
    fixed = episode(pack, scenario, scenario.oracle, scenario.oracle_answer, "cand")
    assert not broken.scores.task_completed and fixed.scores.task_completed
    decision = "s-1.main.0"
    assert executed_corrections(RunEvidence({}, {"run": [(broken, decision)]})) == {}
    assert executed_corrections(RunEvidence({}, {"run": [(fixed, None)]})) == {}  # a scenario of no decision
    found = executed_corrections(RunEvidence({}, {"run": [(broken, decision), (fixed, decision)]}))
    correction = found[(scenario.workspace, decision)]
    first = next(e for e in fixed.trajectory.ledger if e.allowed and e.ok)
    assert (correction.tool, correction.arguments) == (first.tool, json.loads(first.arguments))
    assert (correction.tool, correction.arguments) == (scenario.oracle[0].tool, scenario.oracle[0].arguments)
    assert correction.proof.model_dump(exclude_none=True) == {"kind": ProofKind.EXECUTED, "run": "run", "arm": "cand",
                                                              "episode": scenario.id}

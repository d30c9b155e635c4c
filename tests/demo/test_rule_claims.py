"""The demo's rule claims against its truth table, and the uptake arms and pairs the demo runs."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.records import Decision, DecisionScore, ParsedResponse, ParseOutcome, ResultRecord, ToolCall
from core.scoring import score_decision
from core.toolcalls import request_schemas
from demo.demo_data import write_demo
from demo.memory import RULES
from demo.rule_claims import CLAIMS, UNCLAIMED
from demo.run import (
    ABLATED_WORKSPACES,
    SERIOUS_GATE,
    analyse,
    held_out_slice,
    quick_cell,
    run_config,
    uptake_arms,
    uptake_pairs,
)
from demo.scenarios import KITS
from replay.cli import main as replay_main
from replay.memory.files import load_memory
from replay.memory.inject import inject, parse_condition
from replay.memory.ledger import Ledger
from replay.memory.uptake import RuleClaim, concerns, rejected_call, uptake_table
from replay.suite import Suite, load_suite
from tests.support.runs import write_sealed

WORKSPACE_OF = {rule.id: workspace for workspace, rules in RULES.items() for rule in rules}
ROLE_OF = {rule.id: rule.role for rules in RULES.values() for rule in rules}
TOOLS_OF = {kit.workspace: set(request_schemas(list(kit.tools)) or {}) for kit in KITS}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    write_demo(out, seed=0)
    return out


@pytest.fixture(scope="module")
def suite(demo: Path) -> Suite:
    return load_suite(demo / "suite")


def test_every_authorised_rule_has_a_claim_or_a_reason_why_not() -> None:
    authorised = {rule_id for rule_id, role in ROLE_OF.items() if role in ("genuine", "harmful")}
    assert set(CLAIMS) | set(UNCLAIMED) == authorised
    assert not set(CLAIMS) & set(UNCLAIMED)
    assert all(rule_id == claim.rule_id for rule_id, claim in CLAIMS.items())


def test_every_claimed_tool_is_one_of_its_workspaces_tools() -> None:
    for rule_id, claim in CLAIMS.items():
        offered = TOOLS_OF[WORKSPACE_OF[rule_id]]
        named = {claim.tool, claim.after_rejected} - {None}
        assert named <= offered, (rule_id, named - offered)


def test_every_claim_concerns_decisions_of_the_demo_suite(suite: Suite) -> None:
    held_out = [d for d in suite.decisions if d.stratum != "training_sanity"]
    for rule_id, claim in CLAIMS.items():
        own = [d for d in held_out if d.workspace == WORKSPACE_OF[rule_id]]
        assert any(concerns(claim, d) for d in own), rule_id


def test_every_claimed_rule_has_one_uptake_pair_in_the_demo(demo: Path, suite: Suite) -> None:
    """An `only-<slug>` arm on the rule's workspace, except where the workspace is ablated: there the
    ablation arm against the full memory is the pair, and no `only-` arm is spent."""
    config = run_config("http://127.0.0.1:9", {"recovery": "r", "mix": "m"}, suite, demo / "memory")
    only = {a.memory: tuple(a.workspaces or ()) for a in config.arms if a.name.startswith("only-")}
    ablated = {a.memory.removeprefix("workspace-minus:") for a in config.arms if a.name.startswith("minus-")}
    for rule_id in CLAIMS:
        if WORKSPACE_OF[rule_id] in ABLATED_WORKSPACES:
            assert f"rules:{rule_id}" not in only and rule_id in ablated, rule_id
        else:
            assert only[f"rules:{rule_id}"] == (WORKSPACE_OF[rule_id],), rule_id
    one_workspace = Suite(suite.path, suite.manifest, tuple(d for d in suite.decisions if d.workspace == "ws-sales"),
                          suite.sha256)
    assert {a["memory"] for a in uptake_arms(one_workspace)} == {
        f"rules:{rule_id}" for rule_id in CLAIMS if WORKSPACE_OF[rule_id] == "ws-sales"}


def record(arm: str, memory: str, decision: Decision, parsed: ParsedResponse, rules: tuple[str, ...]) -> ResultRecord:
    return ResultRecord(arm=arm, decision_id=decision.id, stratum=decision.stratum, cluster=decision.cluster,
                        workspace=decision.workspace, model="worker", memory=memory, parsed=parsed,
                        score=DecisionScore(), injected_rule_ids=list(rules), finished_at=datetime(2026, 8, 1, tzinfo=UTC))


def obeying(claim: RuleClaim, decision: Decision) -> ParsedResponse:
    """The answer of a model that does what the injected rule says."""
    if claim.tool is not None:
        return ParsedResponse(outcome=ParseOutcome.OK, calls=[ToolCall(tool=claim.tool, arguments={}, key_set=[])])
    rejected = rejected_call(decision)
    if rejected is None:
        return ParsedResponse(outcome=ParseOutcome.NO_CALL)
    arguments = dict.fromkeys(rejected.key_set, "x")  # flat keys in the demo's rejected calls
    return ParsedResponse(outcome=ParseOutcome.OK, calls=[ToolCall(tool=rejected.tool, arguments=arguments,
                                                                   key_set=sorted(rejected.key_set))])


def test_a_model_that_obeys_every_rule_has_full_uptake_on_the_demo_suite(suite: Suite) -> None:
    """The demo's arms, pairs and claims together: base answers no call, each `only-<slug>` arm obeys its rule
    (the ablated workspace's rules are paired by their ablation arms, in the next tests)."""
    decisions = [d for d in suite.decisions if d.stratum != "training_sanity"]
    results = [record("base", "withheld", d, ParsedResponse(outcome=ParseOutcome.NO_CALL), ()) for d in decisions]
    for arm in uptake_arms(Suite(suite.path, suite.manifest, tuple(decisions), suite.sha256)):
        rule_id = arm["memory"].removeprefix("rules:")
        results += [record(arm["name"], arm["memory"], d, obeying(CLAIMS[rule_id], d), (rule_id,))
                    for d in decisions if d.workspace in arm["workspaces"]]
    pairs = uptake_pairs(results)
    assert pairs == [(rule_id, "base", f"only-{rule_id.removeprefix('lc:')}") for rule_id in CLAIMS
                     if WORKSPACE_OF[rule_id] not in ABLATED_WORKSPACES]
    for u in uptake_table(CLAIMS, pairs, results, decisions):
        assert u.n > 0 and u.moved_to == u.open == u.n, u


def test_uptake_pairs_add_the_ablation_pair() -> None:
    decision = Decision.model_validate({
        "id": "d", "stratum": "verified_action", "cluster": "c", "workspace": "ws-support", "session": "s",
        "captured_at": "2026-08-01T00:00:00Z", "request": {"messages": [{"role": "user", "content": "hi"}]}})
    no_call = ParsedResponse(outcome=ParseOutcome.NO_CALL)
    results = [record("minus-helpdesk-api-flaky", "workspace-minus:lc:helpdesk-api-flaky", decision, no_call, ()),
               record("base+memory", "workspace", decision, no_call, ("lc:helpdesk-api-flaky",)),
               record("minus-file-naming", "workspace-minus:lc:file-naming", decision, no_call, ())]
    assert uptake_pairs(results) == [("lc:helpdesk-api-flaky", "minus-helpdesk-api-flaky", "base+memory")]


def made_up_run(demo: Path, suite: Suite, tmp_path: Path) -> tuple[Path, Suite]:
    """A sealed run of every arm the demo runs on its quick slice, with made-up answers (no engine): an arm that
    carried a claimed rule obeys the first such rule, every other answer is no call."""
    quick = held_out_slice(suite, tmp_path / "quick", quick_cell)
    config = run_config("http://127.0.0.1:9", {"recovery": "r", "mix": "m"}, quick, demo / "memory")
    memories = {ws: load_memory(demo / "memory" / ws) for ws in RULES}
    results = []
    for arm in config.arms:
        for d in quick.decisions:
            if arm.workspaces is not None and d.workspace not in arm.workspaces:
                continue
            rule_ids = inject(d.request.messages, parse_condition(arm.memory), memories[d.workspace]).rule_ids
            claimed = [CLAIMS[r] for r in rule_ids if r in CLAIMS]
            parsed = obeying(claimed[0], d) if claimed else ParsedResponse(outcome=ParseOutcome.NO_CALL)
            results.append(record(arm.name, arm.memory, d, parsed, rule_ids).model_copy(
                update={"score": score_decision(d, parsed), "target_tool": d.target.tool if d.target else None}))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_sealed(run_dir, results)
    return run_dir, quick


def test_analyse_tabulates_uptake_and_the_report_opens_with_the_answer(demo: Path, suite: Suite,
                                                                       tmp_path: Path) -> None:
    """The demo's analysis on made-up answers of every arm it runs (no engine)."""
    run_dir, quick = made_up_run(demo, suite, tmp_path)
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        found = analyse(run_dir, quick, demo / "memory", ledger)
    html, printed = found.html, found.details
    uptake = printed[printed.index("Rule uptake"):]
    assert printed.index("Lesson gate") < printed.index("Rule uptake") < printed.index("calls changed vs base")
    flaky = [line.split()[5:] for line in uptake.splitlines() if line.startswith("lc:helpdesk-api-flaky ")]
    # Two quick-slice decisions follow a rejected call; base+memory obeys its first rule there, as the
    # ablation arm does (unchanged). The quick slice is the ablated workspace: no `only-` arm runs.
    assert flaky == [["minus-helpdesk-api-flaky", "→", "base+memory", "2", "0", "0", "0", "0", "2", "0/2"]]
    summary = found.summary.splitlines()  # the first screen: no table but the summary's
    assert len(summary) <= 16 and "Gates:" in summary and summary[-1].startswith("Causal lesson gate: evicted")
    assert "Rule uptake" not in found.summary and "Lesson gate (causal" not in found.summary
    md = html.with_suffix(".md").read_text()
    assert md.index("## Answer") < md.index("### Lesson verdicts") < md.index("### Rule uptake") < md.index("## Run")
    assert "| lc:closed-ticket-reopen | call reopen_ticket | minus-closed-ticket-reopen → base+memory |" in md


def test_the_demo_writes_the_ledger_and_a_dispute_reaches_its_gate(demo: Path, suite: Suite, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 66 after `make demo`: `trace` on a rule the demo's base+memory arm injected lists its results, the
    comparison and the gate verdict of that arm; `dispute` marks them; the gate on that run then says why it
    cannot pass."""
    run_dir, quick = made_up_run(demo, suite, tmp_path)
    ledger = tmp_path / "ledger.sqlite"
    with Ledger(ledger) as opened:
        analyse(run_dir, quick, demo / "memory", opened)
    run_id = json.loads((run_dir / "run.json").read_text())["run_id"]
    flaky = "lc:helpdesk-api-flaky"

    assert replay_main(["trace", flaky, "--ledger", str(ledger)]) == 0
    out = capsys.readouterr().out
    assert f"run {run_id} ({run_dir.resolve()}):" in out and "base+memory (" in out
    assert f"{run_id}: base vs base+memory" in out
    assert f"{run_id}: gate serious-candidate: base+memory vs base at " in out
    assert f"{run_id}: lesson ws-support/{flaky}" in out and "NEEDS RE-RUN" not in out

    assert replay_main(["dispute", flaky, "--reason", "a vendor page, not the user", "--ledger", str(ledger)]) == 0
    marked = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("run ", "comparison ",
                                                                                         "verdict "))]
    assert marked and all(line.endswith("NEEDS RE-RUN") for line in marked)

    code = replay_main(["gate", str(run_dir), "--policy", str(SERIOUS_GATE), "--baseline", "base", "--candidate",
                        "base+memory", "--ledger", str(ledger)])
    out = capsys.readouterr().out
    verdict = json.loads((run_dir / "gate-serious-candidate-base_memory.json").read_text())["predicate"]["verdict"]
    assert code == 1 and not verdict["passed"] and verdict["tainted_rule_ids"] == [flaky]
    assert verdict["disputed"][0]["reason"] == "a vendor page, not the user"
    assert f"cannot pass: rests on results that carried disputed rule(s) {flaky} (disputed " in out

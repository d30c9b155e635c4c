"""Pre-registered gates: 001's S1 verdict, policy validation, every condition kind, disputed rules, verdict
files."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.keyset import key_set
from core.records import ResultRecord
from replay.analysis.compare import Comparison, CorrectnessRow, RepeatRow, compare, compare_run
from replay.analysis.gates import (
    CONDITION_KINDS,
    GateError,
    GatePolicy,
    Status,
    Verdict,
    evaluate,
    evaluate_gate,
    format_verdict,
    load_policy,
    read_verdict,
    write_verdict,
)
from replay.memory.ledger import Dispute, RuleRef
from replay.run.directory import load_results
from replay.stats import Overhead, PairedComparison, RepeatComparison
from tests.support.e13 import (
    BASE,
    MIXED,
    Q_ONLY,
    TARGET_ARGUMENTS,
    TOOLS,
    e13_results,
    known_failure_record,
    positive_record,
    with_replicate,
)
from tests.support.hostile import hostile_bytes
from tests.support.runs import bind, judged_beside, quantised, write_sealed

ROOT = Path(__file__).resolve().parents[3]
SERIOUS = ROOT / "configs" / "gates" / "serious-candidate.toml"
PRODUCTION = ROOT / "configs" / "gates" / "production-candidate.toml"
CANDIDATE = "strong"
# (baseline, candidate) outcomes of one evidence item
BOTH, WIN, LOSS, NEITHER = (True, True), (False, True), (True, False), (False, False)


def write_run(run_dir: Path, records: list[ResultRecord]) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    write_sealed(run_dir, records)
    return run_dir


def write_json(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


SUBJECT = {"candidate": {"model": CANDIDATE, "version": CANDIDATE}}
"""What served the candidate, as evidence names it: the judged runs' candidate (the base model's weights)."""


def outcomes(measure: str, pairs: list[tuple[bool, bool]], candidate: str | None = None) -> dict:
    items = [{"id": f"t{i}", "baseline": b, "candidate": c} for i, (b, c) in enumerate(pairs)]
    return {"measure": measure, "items": items, "subject": SUBJECT} | ({"candidate": candidate} if candidate else {})


def outcomes_file(path: Path, measure: str, pairs: list[tuple[bool, bool]], candidate: str | None = None) -> Path:
    return write_json(path, outcomes(measure, pairs, candidate))


def canary(errors: int, requests: int = 200, adapter: str | None = CANDIDATE) -> dict:
    return {"adapter": adapter, "control": {"requests": 1000, "errors": 5, "anomalies": 9},
            "canary": {"requests": requests, "errors": errors, "anomalies": 1}, "subject": SUBJECT}


def registry(loaded: list[str]) -> dict:
    return {"production": CANDIDATE, "rollback_target": "recovery-v1", "loaded": loaded}


def condition(kind: str, **params: object) -> str:
    """One `[[conditions]]` table with id "c"."""
    lines = ["[[conditions]]", 'id = "c"', f'kind = "{kind}"', 'description = "d"']
    lines += [f"{name} = {json.dumps(value)}" for name, value in params.items()]
    return "\n".join(lines) + "\n"


def policy_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text('name = "test"\nversion = "1"\n' + body, encoding="utf-8")
    return path


# ── the seed's verdict ──────────────────────────────────────────────────────


def test_serious_candidate_gate_on_s1_says_what_001_says() -> None:
    """001 §6: S1 passed the second and third conditions, failed the first and fifth, and was
    not run against the rest; so it was rejected."""
    verdict = evaluate(load_policy(SERIOUS), compare(e13_results(), BASE, Q_ONLY))
    statuses = {c.id: c.status for c in verdict.conditions}
    assert statuses == {
        "paired-gain": Status.FAIL,
        "repeat-reduction": Status.PASS,
        "targeted-ci": Status.PASS,
        "critical-failures": Status.NOT_RUN,
        "clean-non-inferiority": Status.FAIL,
        "unsupported-completion": Status.NOT_RUN,
        "isolated-replay-completion": Status.NOT_RUN,
        "overhead": Status.NOT_RUN,
        "confirmation-run": Status.NOT_RUN,
    }
    assert verdict.passed is False
    evidence = {c.id: c.evidence for c in verdict.conditions}
    gain = evidence["paired-gain"]
    assert gain["points"] == pytest.approx(1.14, abs=0.005)  # E6: +1.14, below +5
    assert (gain["wins"], gain["losses"], gain["n"]) == (14, 11, 264)
    assert evidence["repeat-reduction"]["relative_reduction"] == pytest.approx(0.25)  # Table 1: pass (25%)
    assert evidence["repeat-reduction"]["p_value"] == 0.021484375
    assert evidence["targeted-ci"]["scope"] == "verified_recovery" and evidence["targeted-ci"]["ci_low"] > 0
    assert evidence["targeted-ci"]["p_value"] == 0.015625
    assert evidence["clean-non-inferiority"]["points"] == pytest.approx(-5.5, abs=0.05)  # "about −5.5"


def test_the_noise_floor_is_evidence_beside_each_row_and_changes_no_verdict() -> None:
    policy = load_policy(SERIOUS)
    plain = evaluate(policy, compare(e13_results(), BASE, Q_ONLY))
    noisy = evaluate(policy, compare(with_replicate(e13_results()), BASE, Q_ONLY))
    assert [(c.id, c.status) for c in noisy.conditions] == [(c.id, c.status) for c in plain.conditions]
    assert plain.noise_floor is None and noisy.noise_floor is not None
    evidence = {c.id: c.evidence for c in noisy.conditions}
    assert evidence["paired-gain"]["noise_floor"] == {
        "arm": BASE, "replicate": "base-aa", "decisions": 264, "discordant": 15, "wins": 0, "losses": 15}  # base is right on the first
    assert evidence["targeted-ci"]["noise_floor"]["discordant"] == 5  # verified_recovery's own five
    assert "noise_floor" not in evidence["repeat-reduction"]  # repeats have no A/A row
    text = format_verdict(noisy)
    assert "noise floor: 15 of 264 held-out positives change with nothing changed (base-aa replicates base)" in text


def test_format_verdict_names_every_condition_and_the_decision() -> None:
    verdict = evaluate(load_policy(SERIOUS), compare(e13_results(), BASE, Q_ONLY))
    text = format_verdict(verdict)
    assert "REJECTED (2 pass, 2 fail, 5 not run)" in text
    for result in verdict.conditions:
        assert result.id in text
    assert "no evidence 'confirmation' given" in text
    assert "+14/−11, p = 0.6900" in text


# ── policies ────────────────────────────────────────────────────────────────


def test_shipped_policies_have_the_conditions_of_001() -> None:
    serious, production = load_policy(SERIOUS), load_policy(PRODUCTION)
    assert len(serious.conditions) == 9 and len(production.conditions) == 6
    assert [c.kind for c in production.conditions] == [
        "quantisation_survives", "fresh_chronological", "isolated_live_replay",
        "shadow_improves", "canary_no_regression", "rollback_ready",
    ]
    targeted = next(c for c in serious.conditions if c.kind == "targeted_ci")
    assert targeted.stratum == "verified_recovery"


def test_every_kind_of_the_registry_is_used_by_a_shipped_policy() -> None:
    reviewer = ROOT / "configs" / "gates" / "reviewer-enforce.toml"
    used = {c.kind for path in (SERIOUS, PRODUCTION, reviewer) for c in load_policy(path).conditions}
    assert used == set(CONDITION_KINDS)


def test_unknown_kind_is_rejected_with_the_known_kinds(tmp_path: Path) -> None:
    path = policy_file(tmp_path, condition("vibes"))
    with pytest.raises(GateError) as err:
        load_policy(path)
    message = str(err.value)
    assert "condition 'c': unknown kind 'vibes'" in message and "paired_gain" in message and str(path) in message


def test_unknown_parameter_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(GateError) as err:
        load_policy(policy_file(tmp_path, condition("paired_gain", min_point=5)))
    assert "condition 'c' (kind paired_gain): unknown parameter 'min_point'" in str(err.value)
    assert "missing parameter 'min_points'" in str(err.value)


def test_unknown_stratum_is_rejected_unless_the_policy_declares_it(tmp_path: Path) -> None:
    body = condition("targeted_ci", stratum="policy_lookup")
    with pytest.raises(GateError, match="condition 'c': unknown stratum 'policy_lookup' in stratum"):
        load_policy(policy_file(tmp_path, body))
    declared = load_policy(policy_file(tmp_path, 'extra_strata = ["policy_lookup"]\n' + body))
    assert declared.conditions[0].stratum == "policy_lookup"


def test_all_positive_is_a_scope_but_not_a_stratum(tmp_path: Path) -> None:
    body = condition("repeat_reduction", stratum="all_positive", min_relative_reduction=0.2)
    with pytest.raises(GateError, match="unknown stratum 'all_positive'"):
        load_policy(policy_file(tmp_path, body))


def test_policy_problems_are_reported_clearly(tmp_path: Path) -> None:
    with pytest.raises(GateError, match="condition ids must be unique: c"):
        load_policy(policy_file(tmp_path, condition("rollback_ready") * 2))
    with pytest.raises(GateError, match="unknown policy field 'threshold'"):
        load_policy(policy_file(tmp_path, "threshold = 3\n" + condition("rollback_ready")))
    with pytest.raises(GateError, match="invalid TOML"):
        load_policy(policy_file(tmp_path, "[[conditions]\n"))
    with pytest.raises(GateError, match="missing kind"):
        load_policy(policy_file(tmp_path, '[[conditions]]\nid = "a"\ndescription = "d"\n'))
    with pytest.raises(GateError, match="cannot read policy"):
        load_policy(tmp_path / "absent.toml")


# ── a candidate that passes ─────────────────────────────────────────────────


def strong_records(arm: str = CANDIDATE, gain: int = 10, tokens: int = 110, latency: float = 1.1) -> list[ResultRecord]:
    """20 each: recovery 5 → 5 + gain, clean 15 → 15, verified_action 10 → 14; known-failure repeats 10 → 2."""
    records = []
    for name, arm_tokens, arm_latency in ((BASE, 100, 1.0), (arm, tokens, latency)):
        is_base = name == BASE
        cost = {"tokens": arm_tokens, "latency_s": arm_latency}
        for stratum, base_correct, cand_correct in (
            ("verified_recovery", 5, 5 + gain), ("clean_trajectory_action", 15, 15), ("verified_action", 10, 14),
        ):
            correct = base_correct if is_base else cand_correct
            records += [
                positive_record(name, stratum, f"{stratum}-{i}", i, i < correct, True, **cost) for i in range(20)
            ]
        repeats = 10 if is_base else 2
        records += [
            known_failure_record(name, f"kf-{i}", i, dict.fromkeys(("tool", "shape", "exact"), i < repeats), **cost)
            for i in range(20)
        ]
    return records


@pytest.fixture
def serious_evidence(tmp_path: Path) -> dict[str, Path]:
    same = [BOTH] * 8 + [NEITHER] * 2
    return {
        "critical_failures": outcomes_file(tmp_path / "critical.json", "critical_failure", [NEITHER] * 9 + [BOTH]),
        "unsupported_completion": outcomes_file(tmp_path / "u.json", "unsupported_completion", [LOSS] + same[1:]),
        "isolated_replay": outcomes_file(tmp_path / "isolated.json", "task_completed", same, candidate=CANDIDATE),
        "confirmation": write_run(tmp_path / "confirmation", strong_records(gain=8)),
    }


def test_a_strong_candidate_with_all_evidence_passes(tmp_path: Path, serious_evidence: dict[str, Path]) -> None:
    run = write_run(tmp_path / "run", strong_records())
    verdict = evaluate_gate(SERIOUS, run, BASE, CANDIDATE, serious_evidence)
    assert {c.status for c in verdict.conditions} == {Status.PASS}, format_verdict(verdict)
    assert len(verdict.conditions) == 9 and verdict.passed
    assert "PASSED (9 pass, 0 fail, 0 not run)" in format_verdict(verdict)
    assert verdict.policy_sha256 and verdict.run_dir == str(run)


def test_one_not_run_condition_blocks_the_gate(tmp_path: Path, serious_evidence: dict[str, Path]) -> None:
    run = write_run(tmp_path / "run", strong_records())
    del serious_evidence["critical_failures"]
    verdict = evaluate_gate(SERIOUS, run, BASE, CANDIDATE, serious_evidence)
    assert verdict.status("critical-failures") is Status.NOT_RUN and not verdict.passed


def evaluate_one(
    body: str, tmp_path: Path, records: list[ResultRecord], evidence: dict[str, Path] | None = None
) -> tuple[Status, str]:
    verdict = evaluate(load_policy(policy_file(tmp_path, body)), compare(records, BASE, CANDIDATE), evidence,
                       run_dir=write_run(tmp_path / "judged", records))
    (result,) = verdict.conditions
    return result.status, result.reason


def test_new_critical_failure_fails(tmp_path: Path) -> None:
    items = outcomes("critical_failure", [NEITHER, WIN])
    items["items"][1]["category"] = "privacy"
    evidence = {"critical_failures": write_json(tmp_path / "c.json", items)}
    status, reason = evaluate_one(condition("no_new_critical_failures"), tmp_path, strong_records(), evidence)
    assert status is Status.FAIL and "1 new critical failure(s) in 2 checks: t1" in reason


def test_unsupported_completion_increase_fails(tmp_path: Path) -> None:
    evidence = {"unsupported_completion": outcomes_file(tmp_path / "u.json", "unsupported_completion", [WIN, NEITHER])}
    status, reason = evaluate_one(condition("no_unsupported_completion_increase"), tmp_path, strong_records(), evidence)
    assert status is Status.FAIL and "0 → 1 of 2" in reason


def test_isolated_replay_regression_fails(tmp_path: Path) -> None:
    evidence = {"isolated_replay": outcomes_file(tmp_path / "i.json", "task_completed", [LOSS, BOTH])}
    status, reason = evaluate_one(condition("isolated_replay_completion"), tmp_path, strong_records(), evidence)
    assert status is Status.FAIL and "2 → 1 of 2" in reason


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "does not exist"),
        ("{not json", "invalid JSON"),
        ('{"measure": ' + "[" * 50_000 + "]" * 50_000 + "}", "nested deeper than 100 levels"),
        ("[1, 2]", "Input should be a valid dictionary"),
        (outcomes("task_completed", [BOTH]), "measures 'task_completed', this condition needs 'critical_failure'"),
        (outcomes("critical_failure", [BOTH], candidate="other"), "is for candidate 'other'"),
        ({"measure": "critical_failure", "items": []}, "has no items"),
        (
            {"measure": "critical_failure", "items": [{"id": "a", "baseline": True}]},
            "items.0.candidate: Field required",
        ),
    ],
)
def test_unusable_evidence_is_not_run_with_the_reason(tmp_path: Path, content: object, reason: str) -> None:
    path = tmp_path / "evidence.json"
    if content is not None:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    evidence = {"critical_failures": path}
    status, text = evaluate_one(condition("no_new_critical_failures"), tmp_path, strong_records(), evidence)
    assert status is Status.NOT_RUN and reason in text


OVERHEAD = condition("overhead", max_token_overhead=0.15, max_latency_overhead=0.15)


def test_overhead_within_limits_passes_and_beyond_fails(tmp_path: Path) -> None:
    assert evaluate_one(OVERHEAD, tmp_path, strong_records(tokens=115, latency=1.15))[0] is Status.PASS
    status, reason = evaluate_one(OVERHEAD, tmp_path, strong_records(tokens=130))
    assert status is Status.FAIL and "tokens over the limit" in reason and "no compensation" in reason


def test_overhead_beyond_limits_passes_with_compensating_quality(tmp_path: Path) -> None:
    body = OVERHEAD + "compensating_min_points = 5.0\n"
    assert evaluate_one(body, tmp_path, strong_records(tokens=130))[0] is Status.PASS  # +23.3 points
    assert evaluate_one(body, tmp_path, strong_records(gain=-2, tokens=130))[0] is Status.FAIL  # +3.3 points


def test_overhead_without_measurements_is_not_run(tmp_path: Path) -> None:
    records = [r.model_copy(update={"arm": CANDIDATE}) if r.arm == Q_ONLY else r for r in e13_results()]
    status, reason = evaluate_one(OVERHEAD, tmp_path, records)
    assert status is Status.NOT_RUN and "no completion-token or latency measurements" in reason


def test_confirmation_run_that_does_not_reproduce_fails(tmp_path: Path) -> None:
    body = condition("confirmation_run", min_points=5.0)
    weak = {"confirmation": write_run(tmp_path / "weak", strong_records(gain=-2))}
    status, reason = evaluate_one(body, tmp_path, strong_records(), weak)
    assert status is Status.FAIL and "all_positive joint: 30 → 32 of 60" in reason
    renamed = {"confirmation": write_run(tmp_path / "other", strong_records(arm="x"))}
    status, reason = evaluate_one(body, tmp_path, strong_records(), renamed)
    assert status is Status.NOT_RUN and "no results for arm 'strong'" in reason


def test_unused_evidence_is_reported(tmp_path: Path) -> None:
    verdict = evaluate(load_policy(SERIOUS), compare(e13_results(), BASE, Q_ONLY), {"confirmaton": tmp_path})
    assert verdict.unused_evidence == ["confirmaton"]
    assert "used by no condition: confirmaton" in format_verdict(verdict)


def test_tainted_results_mark_the_conditions_that_rest_on_them() -> None:
    records = e13_results(rules={"verified_recovery-035": ["lc:disputed"]})
    comparison = compare(records, BASE, Q_ONLY, tainted={"lc:disputed"})
    verdict = evaluate(load_policy(SERIOUS), comparison, tainted={"lc:disputed"})
    assert {c.id for c in verdict.conditions if c.tainted_rule_ids} == {"paired-gain", "targeted-ci"}
    assert verdict.tainted_rule_ids == ["lc:disputed"]
    assert "† cannot pass: rests on results that carried disputed rule(s) lc:disputed;" in format_verdict(verdict)


# ── disputed rules: a verdict resting on one never passes (004; issue 66) ───


AT = datetime(2026, 8, 21, 12, 0, tzinfo=UTC)
RULES = ("lc:a", "lc:b", "lc:c")
# Met by any comparison with a positive decision: what is judged here is the dispute alone.
LENIENT = GatePolicy.model_validate({"name": "lenient", "version": "1", "conditions": [
    {"id": "no-worse", "kind": "non_inferiority", "scope": "all_positive", "min_points": -100,
     "description": "anything"}]})


def carrying(records: list[ResultRecord], rule_id: str, decision_id: str) -> list[ResultRecord]:
    """The records, the candidate's answer to `decision_id` having carried `rule_id`."""
    return [r.model_copy(update={"injected_rule_ids": [rule_id]}) if (r.arm, r.decision_id) == (CANDIDATE, decision_id)
            else r for r in records]


def test_a_candidate_that_meets_every_condition_does_not_pass_on_a_disputed_rule(
        tmp_path: Path, serious_evidence: dict[str, Path]) -> None:
    run = write_run(tmp_path / "run", carrying(strong_records(), "lc:vendor-page", "verified_recovery-3"))
    dispute = Dispute("lc:vendor-page", "ws-a", "a vendor page, not the user", AT)
    verdict = evaluate_gate(SERIOUS, run, BASE, CANDIDATE, serious_evidence, disputes=[dispute])
    assert {c.status for c in verdict.conditions} == {Status.PASS} and not verdict.passed
    assert verdict.tainted_rule_ids == ["lc:vendor-page"]
    assert [(d.rule_id, d.workspace, d.disputed_at) for d in verdict.disputed] == [("lc:vendor-page", "ws-a", AT)]
    text = format_verdict(verdict)
    assert "REJECTED (9 pass, 0 fail, 0 not run; rests on disputed rule(s) lc:vendor-page)" in text
    assert ("cannot pass: rests on results that carried disputed rule(s) lc:vendor-page (disputed in ws-a "
            "2026-08-21 12:00 UTC: a vendor page, not the user)") in text
    assert evaluate_gate(SERIOUS, run, BASE, CANDIDATE, serious_evidence).passed  # restored: no dispute left


def test_a_dispute_of_a_rule_in_another_workspace_or_one_no_result_carried_changes_nothing(
        tmp_path: Path, serious_evidence: dict[str, Path]) -> None:
    run = write_run(tmp_path / "run", carrying(strong_records(), "lc:x", "verified_recovery-3"))
    elsewhere = [Dispute("lc:x", "ws-other", "bad", AT), Dispute("lc:unused", None, "bad", AT)]
    verdict = evaluate_gate(SERIOUS, run, BASE, CANDIDATE, serious_evidence, disputes=elsewhere)
    assert verdict.passed and verdict.tainted_rule_ids == [] and verdict.disputed == []


@st.composite
def judged(draw: st.DrawFn) -> tuple[list[ResultRecord], set[str | RuleRef]]:
    """Two arms on the same positive decisions, each answer carrying some rules; some rules disputed, bare or in
    one workspace."""
    records = []
    for i in range(draw(st.integers(1, 6))):
        for arm in (BASE, CANDIDATE):
            record = positive_record(arm, "verified_recovery", f"d-{i}", i, draw(st.booleans()), True)
            rules = draw(st.lists(st.sampled_from(RULES), unique=True, max_size=2))
            records.append(record.model_copy(update={"injected_rule_ids": rules}))
    workspaces = sorted({r.workspace for r in records})
    disputed = draw(st.sets(st.sampled_from(RULES) | st.builds(RuleRef, st.sampled_from(workspaces),
                                                                st.sampled_from(RULES)), max_size=3))
    return records, disputed


@settings(max_examples=200)
@given(judged())
def test_no_verdict_passes_when_a_disputed_rule_is_among_its_arms_rules(case: tuple[list[ResultRecord],
                                                                                   set[str | RuleRef]]) -> None:
    records, disputed = case
    verdict = evaluate(LENIENT, compare(records, BASE, CANDIDATE, tainted=disputed), tainted=disputed)
    carried = {(r.workspace, rule) for r in records for rule in r.injected_rule_ids}
    hit = sorted({rule for workspace, rule in carried
                  if rule in disputed or RuleRef(workspace, rule) in disputed})
    assert verdict.tainted_rule_ids == hit
    assert verdict.passed == (not hit)  # the lenient condition itself always passes
    assert verdict.conditions[0].status is Status.PASS


# ── production conditions ───────────────────────────────────────────────────


def write_suite(path: Path, records: list[ResultRecord], captured_at: str) -> Path:
    path.mkdir(parents=True)
    (path / "suite.toml").write_text('name = "fresh"\nversion = "1"\ncreated = 2026-10-01T00:00:00Z\n')
    tools = [{"type": "function", "function": {"name": t, "parameters": {"type": "object"}}} for t in TOOLS]
    lines = []
    for record in (r for r in records if r.arm == BASE):
        decision = {
            "id": record.decision_id, "stratum": record.stratum, "cluster": record.cluster,
            "workspace": record.workspace, "session": f"s-{record.decision_id}", "captured_at": captured_at,
            "request": {"messages": [{"role": "user", "content": f"task {record.decision_id}"}], "tools": tools},
        }
        if record.target_tool is not None:
            decision["target"] = {"tool": record.target_tool, "arg_keys": sorted(key_set(TARGET_ARGUMENTS))}
        else:
            decision["failed_action"] = {"tool": "refund_invoice", "arg_keys": ["amount", "invoice_id"]}
        lines.append(json.dumps(decision))
    (path / "decisions.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def production_evidence(tmp_path: Path) -> dict[str, Path]:
    fresh_records = strong_records(gain=6)
    shadow = [BOTH] * 80 + [WIN] * 15 + [LOSS] * 5
    fresh_suite = write_suite(tmp_path / "fresh-suite", fresh_records, "2026-10-02T09:00:00Z")
    return {
        "quantised": quantised(write_run(tmp_path / "quantised", strong_records(gain=9))),
        "fresh": bind(write_run(tmp_path / "fresh", fresh_records), fresh_suite),
        "fresh_suite": fresh_suite,
        "isolated_live_replay": outcomes_file(tmp_path / "live.json", "live_replay_passed", [BOTH] * 19 + [WIN]),
        "shadow": outcomes_file(tmp_path / "shadow.json", "correct", shadow),
        "canary": write_json(tmp_path / "canary.json", canary(errors=1)),
        "registry": write_json(tmp_path / "registry.json", registry(["recovery-v1", CANDIDATE])),
    }


def production_verdict(tmp_path: Path, evidence: dict[str, Path] | None = None) -> Verdict:
    return evaluate_gate(PRODUCTION, write_run(tmp_path / "run", strong_records()), BASE, CANDIDATE, evidence)


def test_production_gate_passes_with_all_evidence(tmp_path: Path, production_evidence: dict[str, Path]) -> None:
    verdict = production_verdict(tmp_path, production_evidence)
    assert verdict.passed, format_verdict(verdict)


def test_production_gate_without_evidence_is_not_run(tmp_path: Path) -> None:
    verdict = production_verdict(tmp_path)
    assert {c.status for c in verdict.conditions} == {Status.NOT_RUN} and not verdict.passed


def production_status(tmp_path: Path, evidence: dict[str, Path], condition_id: str) -> tuple[Status, str]:
    result = next(c for c in production_verdict(tmp_path, evidence).conditions if c.id == condition_id)
    return result.status, result.reason


def test_quantisation_that_loses_the_gain_fails(tmp_path: Path, production_evidence: dict[str, Path]) -> None:
    production_evidence["quantised"] = quantised(write_run(tmp_path / "q2", strong_records(gain=6)))  # +16.7 vs +23.3
    status, reason = production_status(tmp_path, production_evidence, "quantisation-survives")
    assert status is Status.FAIL and "drop from high precision +6.67 points" in reason


def test_fresh_decisions_captured_before_the_cutoff_fail(tmp_path: Path, production_evidence: dict[str, Path]) -> None:
    stale = write_suite(tmp_path / "stale-suite", strong_records(gain=6), "2026-09-01T00:00:00Z")
    bind(production_evidence["fresh"], stale)
    production_evidence["fresh_suite"] = stale
    status, reason = production_status(tmp_path, production_evidence, "fresh-chronological")
    assert status is Status.FAIL and "captured on or before 2026-09-20" in reason


def test_fresh_run_without_its_suite_is_not_run(tmp_path: Path, production_evidence: dict[str, Path]) -> None:
    del production_evidence["fresh_suite"]
    status, reason = production_status(tmp_path, production_evidence, "fresh-chronological")
    assert status is Status.NOT_RUN and "no evidence 'fresh_suite' given" in reason


def test_canary_regression_fails_and_a_small_canary_is_not_run(
    tmp_path: Path, production_evidence: dict[str, Path]
) -> None:
    production_evidence["canary"] = write_json(tmp_path / "c.json", canary(errors=4, adapter=None))
    status, reason = production_status(tmp_path, production_evidence, "canary-no-regression")
    assert status is Status.FAIL and "errors 0.50% → 2.00%" in reason
    production_evidence["canary"] = write_json(tmp_path / "c.json", canary(errors=0, requests=20))
    assert production_status(tmp_path, production_evidence, "canary-no-regression")[0] is Status.NOT_RUN


def test_canary_anomalies_are_rated_over_the_tool_results_observed(
    tmp_path: Path, production_evidence: dict[str, Path]
) -> None:
    evidence = canary(errors=0)
    evidence["control"] |= {"anomalies": 9, "outcomes": 300}  # 3.00% of observed results
    evidence["canary"] |= {"anomalies": 1, "outcomes": 20}  # 5.00%: per request 0.50%, below the control's 0.90%
    production_evidence["canary"] = write_json(tmp_path / "c.json", evidence)
    status, reason = production_status(tmp_path, production_evidence, "canary-no-regression")
    assert status is Status.FAIL and "anomalies 3.00% → 5.00%" in reason
    evidence["canary"] |= {"anomalies": 0, "outcomes": 0}
    production_evidence["canary"] = write_json(tmp_path / "c.json", evidence)
    status, reason = production_status(tmp_path, production_evidence, "canary-no-regression")
    assert status is Status.NOT_RUN and "no tool results observed" in reason


def test_rollback_target_not_loaded_fails(tmp_path: Path, production_evidence: dict[str, Path]) -> None:
    production_evidence["registry"] = write_json(tmp_path / "r.json", registry([CANDIDATE]))
    status, reason = production_status(tmp_path, production_evidence, "rollback-ready")
    assert status is Status.FAIL and "'recovery-v1' is NOT loaded" in reason


def test_shadow_and_live_replay_regressions_fail(tmp_path: Path, production_evidence: dict[str, Path]) -> None:
    production_evidence["shadow"] = outcomes_file(tmp_path / "s.json", "correct", [BOTH] * 90 + [LOSS] * 10)
    live = [LOSS] + [BOTH] * 19
    production_evidence["isolated_live_replay"] = outcomes_file(tmp_path / "l.json", "live_replay_passed", live)
    verdict = production_verdict(tmp_path, production_evidence)
    assert verdict.status("shadow-improves") is Status.FAIL
    assert verdict.status("isolated-live-replay") is Status.FAIL


# ── verdict files ───────────────────────────────────────────────────────────


def test_verdict_is_written_into_the_run_dir_and_reads_back(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", e13_results())
    verdict = evaluate_gate(SERIOUS, run, BASE, Q_ONLY)
    path = write_verdict(run, verdict)
    assert path == run / "gate-serious-candidate-q-only.json"
    again = read_verdict(path)
    assert again == verdict
    assert json.loads(path.read_text())["predicate"]["verdict"]["conditions"][1]["status"] == "pass"
    assert again.evaluated_at <= datetime.now(UTC)


# ── every condition kind on each side of its boundary (issue 14) ────────────


def _stats(points: float | None, ci_low: float | None = None, p: float = 0.5) -> PairedComparison:
    low = points if ci_low is None else ci_low
    return PairedComparison(n=100, baseline_correct=50, candidate_correct=50, wins=5, losses=5, p_value=p,
                            points=points, ci_low=low, ci_high=None if points is None else points + 10)


def crafted(points: float | None = 0.0, ci_low: float | None = None, p: float = 0.5,
            relative: float | None = 0.25, repeat_p: float = 0.5, tokens: float = 1.0, latency: float = 1.0,
            p50: float = 1.0) -> Comparison:
    """A comparison whose every row has the given numbers (the statistics are tested in tests/replay/stats/)."""
    rows = [CorrectnessRow(measure="joint", scope=scope, stats=_stats(points, ci_low, p))
            for scope in ("all_positive", "verified_recovery", "clean_trajectory_action", "verified_action")]
    repeat = RepeatComparison(n=100, baseline_repeats=20, candidate_repeats=15, fixes=6, regressions=1,
                              p_value=repeat_p, relative_reduction=relative, points=-5.0, ci_low=-9.0, ci_high=-1.0)
    cost = Overhead(n=100, baseline_mean_tokens=100.0, candidate_mean_tokens=100.0 * tokens, token_ratio=tokens,
                    baseline_mean_latency_s=1.0, candidate_mean_latency_s=latency, latency_ratio=latency,
                    baseline_p50_latency_s=1.0, candidate_p50_latency_s=p50, p50_latency_ratio=p50)
    return Comparison(baseline=BASE, candidate=CANDIDATE, decisions=100, correctness=rows,
                      repeats=[RepeatRow(level="exact", stratum="known_failure", stats=repeat)], overhead=cost,
                      comparisons_made=1)


def judged(condition: dict[str, object], comparison: Comparison, evidence: dict[str, Path] | None = None) -> Status:
    """The condition's status on a crafted comparison; evidence runs are bound to a judged run of the same suite
    made beside them (its results are not read: the comparison stands for them)."""
    policy = GatePolicy.model_validate({"name": "t", "version": "1",
                                        "conditions": [{"id": "c", "description": "d", **condition}]})
    return evaluate(policy, comparison, evidence, run_dir=judged_beside(evidence)).conditions[0].status


P, F, N = Status.PASS, Status.FAIL, Status.NOT_RUN
ROW_BOUNDARIES = [
    # paired gain on the point estimate: ≥ min passes
    ({"kind": "paired_gain", "min_points": 5.0}, {"points": 5.0}, P),
    ({"kind": "paired_gain", "min_points": 5.0}, {"points": 4.99}, F),
    ({"kind": "paired_gain", "min_points": 5.0}, {"points": None}, F),
    # ... and on the CI lower bound: the point estimate does not count then
    ({"kind": "paired_gain", "min_points": 5.0, "basis": "ci_low"}, {"points": 9.0, "ci_low": 5.0}, P),
    ({"kind": "paired_gain", "min_points": 5.0, "basis": "ci_low"}, {"points": 9.0, "ci_low": 4.99}, F),
    # ... and the exact sign test at the policy's α when it sets max_p (`worker-replay plan` plans for it)
    ({"kind": "paired_gain", "min_points": 5.0, "max_p": 0.05}, {"points": 9.0, "p": 0.05}, P),
    ({"kind": "paired_gain", "min_points": 5.0, "max_p": 0.05}, {"points": 9.0, "p": 0.0501}, F),
    ({"kind": "paired_gain", "min_points": 5.0, "max_p": 0.05}, {"points": 4.99, "p": 0.001}, F),
    # non-inferiority: no worse than the margin
    ({"kind": "non_inferiority", "scope": "clean_trajectory_action", "min_points": -2.0}, {"points": -2.0}, P),
    ({"kind": "non_inferiority", "scope": "clean_trajectory_action", "min_points": -2.0}, {"points": -2.01}, F),
    # targeted CI: the lower bound, strictly above the threshold; never the point estimate
    ({"kind": "targeted_ci", "stratum": "verified_recovery"}, {"points": 9.0, "ci_low": 0.01}, P),
    ({"kind": "targeted_ci", "stratum": "verified_recovery"}, {"points": 9.0, "ci_low": 0.0}, F),
    ({"kind": "targeted_ci", "stratum": "verified_recovery"}, {"points": 6.85, "ci_low": -1.4}, F),
    ({"kind": "targeted_ci", "stratum": "verified_recovery", "ci_low_above": 2.0}, {"points": 9.0, "ci_low": 2.0}, F),
    ({"kind": "targeted_ci", "stratum": "verified_recovery", "ci_low_above": 2.0}, {"points": 9.0, "ci_low": 2.5}, P),
    # repeat reduction: ≥ min relative reduction, and p ≤ max_p when the policy sets it
    ({"kind": "repeat_reduction", "min_relative_reduction": 0.25}, {"relative": 0.25}, P),
    ({"kind": "repeat_reduction", "min_relative_reduction": 0.25}, {"relative": 0.2499}, F),
    ({"kind": "repeat_reduction", "min_relative_reduction": 0.25}, {"relative": None}, F),
    ({"kind": "repeat_reduction", "min_relative_reduction": 0.25, "max_p": 0.05}, {"repeat_p": 0.05}, P),
    ({"kind": "repeat_reduction", "min_relative_reduction": 0.25, "max_p": 0.05}, {"repeat_p": 0.0501}, F),
    ({"kind": "repeat_reduction", "min_relative_reduction": 0.25}, {"repeat_p": 0.9}, P),
    # overhead: ratio − 1 ≤ max; the latency basis picks mean or p50; compensation ≥ min points
    ({"kind": "overhead", "max_token_overhead": 0.25, "max_latency_overhead": 0.5}, {"tokens": 1.25}, P),
    ({"kind": "overhead", "max_token_overhead": 0.25, "max_latency_overhead": 0.5}, {"tokens": 1.2501}, F),
    ({"kind": "overhead", "max_token_overhead": 0.25, "max_latency_overhead": 0.5}, {"latency": 1.5}, P),
    ({"kind": "overhead", "max_token_overhead": 0.25, "max_latency_overhead": 0.5}, {"latency": 1.5001}, F),
    ({"kind": "overhead", "max_token_overhead": 0.25, "max_latency_overhead": 0.5, "latency": "p50"},
     {"latency": 3.0, "p50": 1.5}, P),
    ({"kind": "overhead", "max_token_overhead": 0.25, "max_latency_overhead": 0.5, "latency": "p50"},
     {"latency": 1.0, "p50": 1.5001}, F),
    # a ratio of exactly 1 + allowance, as the runner computes it (110 / 100 tokens: 1.1 − 1 > 0.1 in floats)
    ({"kind": "overhead", "max_token_overhead": 0.1, "max_latency_overhead": 0.15}, {"tokens": 110 / 100}, P),
    ({"kind": "overhead", "max_token_overhead": 0.1, "max_latency_overhead": 0.15}, {"latency": 115 / 100}, P),
    ({"kind": "overhead", "max_token_overhead": 0.1, "max_latency_overhead": 0.15},
     {"tokens": math.nextafter(110 / 100, 2)}, F),
    ({"kind": "overhead", "max_token_overhead": 0.25, "max_latency_overhead": 0.5, "compensating_min_points": 5.0},
     {"tokens": 2.0, "points": 5.0}, P),
    ({"kind": "overhead", "max_token_overhead": 0.25, "max_latency_overhead": 0.5, "compensating_min_points": 5.0},
     {"tokens": 2.0, "points": 4.99}, F),
]


@pytest.mark.parametrize(("condition", "numbers", "expected"), ROW_BOUNDARIES)
def test_conditions_on_the_run_itself_at_their_boundaries(condition: dict, numbers: dict, expected: Status) -> None:
    assert judged(condition, crafted(**numbers)) is expected


def test_targeted_ci_fails_the_e13_mixed_arm_whose_point_estimate_is_positive() -> None:
    """E13: mixed recovery 31 → 36 of 73, +6.85 points, 95% CI [−1.4, +14.9]: not a targeted gain."""
    verdict = evaluate(load_policy(SERIOUS), compare(e13_results((BASE, MIXED)), BASE, MIXED))
    result = next(c for c in verdict.conditions if c.id == "targeted-ci")
    assert result.evidence["points"] == pytest.approx(6.85, abs=0.005)
    assert result.evidence["ci_low"] == pytest.approx(-1.4, abs=0.05)
    assert result.evidence["ci_high"] == pytest.approx(14.9, abs=0.05)
    assert result.status is Status.FAIL


EVIDENCE_BOUNDARIES = [
    # critical failures: new = baseline clean, candidate failing; ≤ max_new passes
    ({"kind": "no_new_critical_failures", "max_new": 1}, "critical_failure", [WIN, LOSS, BOTH], P),
    ({"kind": "no_new_critical_failures", "max_new": 1}, "critical_failure", [WIN, WIN, LOSS], F),
    ({"kind": "no_new_critical_failures"}, "critical_failure", [LOSS, BOTH], P),
    # unsupported completions: the rise in points ≤ max (1 of 100 = +1 point)
    ({"kind": "no_unsupported_completion_increase", "max_increase_points": 1.0}, "unsupported_completion",
     [WIN] + [NEITHER] * 99, P),
    ({"kind": "no_unsupported_completion_increase", "max_increase_points": 0.99}, "unsupported_completion",
     [WIN] + [NEITHER] * 99, F),
    # isolated replay completion: points ≥ min (one loss of 100 = −1 point)
    ({"kind": "isolated_replay_completion", "min_points": -1.0}, "task_completed", [LOSS] + [BOTH] * 99, P),
    ({"kind": "isolated_replay_completion", "min_points": -0.99}, "task_completed", [LOSS] + [BOTH] * 99, F),
    # isolated live replay: pass rate ≥ min and regressions ≤ max (19 of 20 = 95%)
    ({"kind": "isolated_live_replay", "min_pass_rate": 0.95, "max_regressions": 1}, "live_replay_passed",
     [LOSS] + [BOTH] * 19, P),
    ({"kind": "isolated_live_replay", "min_pass_rate": 0.951, "max_regressions": 1}, "live_replay_passed",
     [LOSS] + [BOTH] * 19, F),
    ({"kind": "isolated_live_replay", "min_pass_rate": 0.9, "max_regressions": 0}, "live_replay_passed",
     [LOSS] + [BOTH] * 19, F),
    # shadow: at least min_items, points strictly above, p ≤ max_p when set (+1 of 10 = +10 points, p = 1)
    ({"kind": "shadow_improves", "min_items": 10}, "correct", [WIN] + [BOTH] * 9, P),
    ({"kind": "shadow_improves", "min_items": 11}, "correct", [WIN] + [BOTH] * 9, N),
    ({"kind": "shadow_improves", "min_items": 10, "points_above": 10.0}, "correct", [WIN] + [BOTH] * 9, F),
    ({"kind": "shadow_improves", "min_items": 10, "max_p": 1.0}, "correct", [WIN] + [BOTH] * 9, P),
    ({"kind": "shadow_improves", "min_items": 10, "max_p": 0.99}, "correct", [WIN] + [BOTH] * 9, F),
]


@pytest.mark.parametrize(("condition", "measure", "pairs", "expected"), EVIDENCE_BOUNDARIES)
def test_conditions_on_paired_evidence_at_their_boundaries(
    tmp_path: Path, condition: dict, measure: str, pairs: list[tuple[bool, bool]], expected: Status
) -> None:
    key = {"no_new_critical_failures": "critical_failures", "no_unsupported_completion_increase": "unsupported_completion",
           "isolated_replay_completion": "isolated_replay", "isolated_live_replay": "isolated_live_replay",
           "shadow_improves": "shadow"}[str(condition["kind"])]
    evidence = {key: outcomes_file(tmp_path / "e.json", measure, pairs)}
    assert judged(condition, crafted(), evidence) is expected


@pytest.mark.parametrize(("errors", "requests", "limit", "expected"), [
    (10, 1000, 0.005, P),  # control 0.50% → canary 1.00%: +0.50 points allowed
    (11, 1000, 0.005, F),
    # 0.50% → 3.50% is a rise of exactly 0.03, though 7/200 − 5/1000 is 0.030000000000000002 in floats
    (7, 200, 0.03, P),
    (7, 200, math.nextafter(0.03, 0), F),
    (0, 99, 0.0, N),  # a cohort below min_requests proves nothing
    (0, 100, 0.0, P),
])
def test_canary_at_its_boundaries(tmp_path: Path, errors: int, requests: int, limit: float, expected: Status) -> None:
    data = {"adapter": CANDIDATE, "control": {"requests": 1000, "errors": 5, "anomalies": 0},
            "canary": {"requests": requests, "errors": errors, "anomalies": 0}, "subject": SUBJECT}
    condition = {"kind": "canary_no_regression", "min_requests": 100, "max_error_rate_increase": limit}
    assert judged(condition, crafted(), {"canary": write_json(tmp_path / "c.json", data)}) is expected


@pytest.mark.parametrize(("state", "expected"), [
    ({"production": CANDIDATE, "rollback_target": "recovery-v1", "loaded": ["recovery-v1", CANDIDATE]}, P),
    ({"production": CANDIDATE, "rollback_target": "recovery-v1", "loaded": [CANDIDATE]}, F),
    ({"production": CANDIDATE, "rollback_target": None, "loaded": [CANDIDATE]}, F),
    # rolling back to production itself is no rollback, loaded or not
    ({"production": CANDIDATE, "rollback_target": CANDIDATE, "loaded": [CANDIDATE]}, F),
])
def test_rollback_ready_at_its_boundaries(tmp_path: Path, state: dict, expected: Status) -> None:
    evidence = {"registry": write_json(tmp_path / "r.json", state)}
    assert judged({"kind": "rollback_ready"}, crafted(), evidence) is expected


def paired_run(run_dir: Path, pairs: list[tuple[bool, bool]]) -> Path:
    """A run directory whose verified_action decisions score `pairs` (baseline, candidate)."""
    records = []
    for i, (baseline, candidate) in enumerate(pairs):
        records.append(positive_record(BASE, "verified_action", f"d{i}", i, baseline, baseline))
        records.append(positive_record(CANDIDATE, "verified_action", f"d{i}", i, candidate, candidate))
    return write_run(run_dir, records)


TWO_WINS = [WIN, WIN] + [BOTH] * 18  # +10.00 points of 20, p = 0.5
THREE_WINS = [WIN] * 3 + [BOTH] * 17  # +15.00 points


@pytest.mark.parametrize(("condition", "expected"), [
    ({"min_points": 10.0}, P),
    ({"min_points": 10.01}, F),
    ({"min_points": 10.0, "max_p": 0.5}, P),
    ({"min_points": 10.0, "max_p": 0.49}, F),
])
def test_confirmation_run_at_its_boundaries(tmp_path: Path, condition: dict, expected: Status) -> None:
    evidence = {"confirmation": paired_run(tmp_path / "confirm", TWO_WINS)}
    assert judged({"kind": "confirmation_run", **condition}, crafted(), evidence) is expected


@pytest.mark.parametrize(("condition", "expected"), [
    ({"min_points": 10.0, "max_drop_points": 5.0}, P),  # +15 here, +10 quantised: a drop of exactly 5
    ({"min_points": 10.0, "max_drop_points": 4.99}, F),
    ({"min_points": 10.01, "max_drop_points": 5.0}, F),
    ({"min_points": 10.0, "max_drop_points": 5.0, "max_p": 0.49}, F),
])
def test_quantisation_survives_at_its_boundaries(tmp_path: Path, condition: dict, expected: Status) -> None:
    here = compare_run(paired_run(tmp_path / "precise", THREE_WINS), BASE, CANDIDATE)
    evidence = {"quantised": quantised(paired_run(tmp_path / "quantised", TWO_WINS))}
    condition = {"kind": "quantisation_survives", "scope": "verified_action", **condition}
    assert judged(condition, here, evidence) is expected


@pytest.mark.parametrize(("max_drop_points", "expected"), [(2.0, P), (math.nextafter(2.0, 0), F)])
def test_quantisation_allows_a_drop_of_exactly_max_drop_points(tmp_path: Path, max_drop_points: float,
                                                               expected: Status) -> None:
    """7 → 4 wins of 150 is a drop of exactly 2 points (the shipped allowance), though 100·7/150 − 100·4/150
    is 2.0000000000000004 in floats."""
    here = compare_run(paired_run(tmp_path / "precise", [WIN] * 7 + [BOTH] * 143), BASE, CANDIDATE)
    evidence = {"quantised": quantised(paired_run(tmp_path / "quantised", [WIN] * 4 + [BOTH] * 146))}
    condition = {"kind": "quantisation_survives", "scope": "verified_action", "min_points": 2.0,
                 "max_drop_points": max_drop_points}
    assert judged(condition, here, evidence) is expected


@pytest.mark.parametrize(("captured_at", "points_above", "expected"), [
    ("2026-09-20T00:00:01Z", 0.0, P),
    ("2026-09-20T00:00:00Z", 0.0, F),  # on the cut-off is not after it
    ("2026-09-19T23:59:59Z", 0.0, F),
    ("2026-09-20T00:00:01Z", 10.0, F),  # the direction must hold strictly: +10 is not above +10
    ("2026-09-20T00:00:01Z", 9.99, P),
])
def test_fresh_chronological_at_its_boundaries(tmp_path: Path, captured_at: str, points_above: float,
                                               expected: Status) -> None:
    run = paired_run(tmp_path / "fresh", TWO_WINS)
    suite = write_suite(tmp_path / "fresh-suite", load_results(run), captured_at)
    condition = {"kind": "fresh_chronological", "scope": "verified_action", "captured_after": "2026-09-20T00:00:00Z",
                 "points_above": points_above}
    assert judged(condition, crafted(), {"fresh": run, "fresh_suite": suite}) is expected


def test_every_condition_kind_has_boundary_tests() -> None:
    covered = {str(c["kind"]) for c, *_ in ROW_BOUNDARIES + EVIDENCE_BOUNDARIES}
    covered |= {"canary_no_regression", "rollback_ready", "confirmation_run", "quantisation_survives",
                "fresh_chronological", "reviewer_agreement"}  # the last: tests/replay/qa/test_gate.py
    assert covered == set(CONDITION_KINDS)


SERIOUS_TOML = (Path(__file__).resolve().parents[3] / "configs" / "gates" / "serious-candidate.toml").read_bytes()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=hostile_bytes([SERIOUS_TOML, b"[[conditions]]", b'kind = "paired_noninferiority"', b'name = "x"']))
def test_any_policy_bytes_are_a_policy_or_one_error_naming_the_file(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "policy.toml"
    path.write_bytes(data)
    try:
        load_policy(path)
    except GateError as exc:
        assert str(exc).startswith(str(path))

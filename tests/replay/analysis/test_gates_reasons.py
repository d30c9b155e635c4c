"""What a verdict tells the person who reads it: each condition's reason text (the observed values,
the threshold and its comparator) and the evidence it records, on numbers chosen here."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.records import ResultRecord
from replay.analysis.compare import Comparison, CorrectnessRow, NoiseFloor, NoiseRow, RepeatRow
from replay.analysis.gates import (
    GatePolicy,
    Status,
    evaluate,
    evaluate_gate,
    format_verdict,
    read_verdict,
    verdict_filename,
    write_verdict,
)
from replay.analysis.gates.policy import ConditionResult
from replay.run.directory import load_results
from replay.stats import Overhead, PairedComparison, RepeatComparison
from tests.replay.analysis.test_gates import (
    BOTH,
    CANDIDATE,
    LOSS,
    NEITHER,
    SUBJECT,
    TWO_WINS,
    WIN,
    outcomes_file,
    write_json,
    write_run,
    write_suite,
)
from tests.support.e13 import BASE, positive_record
from tests.support.runs import judged_beside, quantised, seal

# 6 wins, 2 losses in 40: 17 → 21 correct, +10 points; the exact sign test's p = 2 · 37/256.
STATS = PairedComparison(n=40, baseline_correct=17, candidate_correct=21, wins=6, losses=2, p_value=74 / 256,
                         points=10.0, ci_low=-1.3, ci_high=21.4)
ROW = "joint: 17 → 21 of 40, +10.00 points (+6/−2, p = 0.2891, 95% CI [−1.3, +21.4])"
# known-failure repeats 12 → 8 of 30: 5 fixes, 1 regression, p = 2 · 7/64, a third fewer.
REPEATS = RepeatComparison(n=30, baseline_repeats=12, candidate_repeats=8, fixes=5, regressions=1,
                           p_value=14 / 64, relative_reduction=1 / 3, points=-40 / 3, ci_low=-25.0, ci_high=-1.0)
COST = Overhead(n=40, baseline_mean_tokens=100.0, candidate_mean_tokens=130.0, token_ratio=1.3,
                baseline_mean_latency_s=2.0, candidate_mean_latency_s=2.2, latency_ratio=1.1,
                baseline_p50_latency_s=1.0, candidate_p50_latency_s=1.6, p50_latency_ratio=1.6)
SCOPES = ("all_positive", "verified_recovery", "clean_trajectory_action", "verified_action")


def comparison(stats: PairedComparison = STATS, *, repeats: RepeatComparison = REPEATS, cost: Overhead = COST,
               scopes: tuple[str, ...] = SCOPES, rule_ids: list[str] | None = None,
               noise: NoiseFloor | None = None) -> Comparison:
    """Every joint and tool row has `stats`; `rule_ids` are disputed rules the rows (and the run) carried."""
    rows = [CorrectnessRow(measure=measure, scope=scope, stats=stats, tainted_results=len(rule_ids or []),
                           tainted_rule_ids=rule_ids or []) for measure in ("joint", "tool") for scope in scopes]
    repeat = RepeatRow(level="exact", stratum="known_failure", stats=repeats, tainted_rule_ids=rule_ids or [])
    return Comparison(baseline=BASE, candidate=CANDIDATE, decisions=40, correctness=rows, repeats=[repeat],
                      overhead=cost, comparisons_made=3, tainted_rule_ids=rule_ids or [], noise=noise)


def judge(condition: dict[str, object], against: Comparison | None = None,
          evidence: dict[str, Path] | None = None, tainted: tuple[str, ...] = ()) -> ConditionResult:
    """The condition's result; evidence runs are bound to a judged run of the same suite made beside them (its
    results are not read: the comparison stands for them), and a fresh run to its fresh suite."""
    policy = GatePolicy.model_validate({"name": "t", "version": "1",
                                        "conditions": [{"id": "c", "description": "d", **condition}]})
    run_dir = judged_beside(evidence)
    return evaluate(policy, comparison() if against is None else against, evidence, tainted,
                    run_dir=run_dir).conditions[0]


def row_evidence(scope: str, stats: PairedComparison = STATS, measure: str = "joint", tainted_results: int = 0,
                 **extra: object) -> dict[str, object]:
    return {"scope": scope, "measure": measure, **asdict(stats), "tainted_results": tainted_results, **extra}


def ci(evidence: dict) -> str:
    """The CI as a reason prints it, from the values the evidence records (one decimal, true minus)."""
    return f"[{evidence['ci_low']:+.1f}, {evidence['ci_high']:+.1f}]".replace("-", "−")


# ── conditions on the run's own rows ────────────────────────────────────────


def test_paired_gain_names_the_row_the_threshold_and_the_test() -> None:
    result = judge({"kind": "paired_gain", "min_points": 5.0, "max_p": 0.05})
    assert result.status is Status.FAIL  # +10 points, but p = 0.29
    assert result.reason == f"all_positive {ROW}; needs points ≥ +5.00 and p ≤ 0.05"
    assert result.evidence == row_evidence("all_positive", threshold=5.0, basis="point")
    without_p = judge({"kind": "paired_gain", "min_points": 12.0})
    assert without_p.status is Status.FAIL and without_p.reason == f"all_positive {ROW}; needs points ≥ +12.00"


def test_a_gain_on_the_ci_lower_bound_says_so() -> None:
    result = judge({"kind": "non_inferiority", "scope": "verified_action", "min_points": -2.0, "basis": "ci_low"})
    assert result.status is Status.PASS  # −1.3 ≥ −2
    assert result.reason == f"verified_action {ROW}; needs the CI lower bound ≥ −2.00"
    assert result.evidence == row_evidence("verified_action", threshold=-2.0, basis="ci_low")


def test_a_gain_on_the_tool_measure_reads_the_tool_row() -> None:
    tool_only = comparison().model_copy(update={"correctness": [
        r for r in comparison().correctness if r.measure == "tool"]})
    result = judge({"kind": "paired_gain", "measure": "tool", "min_points": 5.0}, tool_only)
    assert result.status is Status.PASS and result.reason.startswith("all_positive tool: 17 → 21 of 40")
    assert result.evidence["measure"] == "tool"


def test_targeted_ci_names_its_strict_threshold() -> None:
    result = judge({"kind": "targeted_ci", "stratum": "verified_recovery", "ci_low_above": -2.0})
    assert result.status is Status.PASS
    assert result.reason == f"verified_recovery {ROW}; needs the CI lower bound > −2.00"
    assert result.evidence == row_evidence("verified_recovery", threshold=-2.0)
    default = judge({"kind": "targeted_ci", "stratum": "verified_recovery"})
    assert default.status is Status.FAIL and default.reason.endswith("needs the CI lower bound > +0.00")


@pytest.mark.parametrize(("condition", "status"), [
    ({"kind": "paired_gain", "min_points": 5.0}, Status.PASS),
    ({"kind": "non_inferiority", "scope": "verified_action", "min_points": -2.0}, Status.PASS),
    ({"kind": "targeted_ci", "stratum": "verified_recovery", "ci_low_above": -2.0}, Status.PASS),
    ({"kind": "repeat_reduction", "min_relative_reduction": 0.3}, Status.PASS),
    ({"kind": "overhead", "max_token_overhead": 0.5, "max_latency_overhead": 0.5}, Status.PASS),
    ({"kind": "overhead", "max_token_overhead": 0.25, "max_latency_overhead": 0.5}, Status.FAIL),
    ({"kind": "overhead", "max_token_overhead": 0.25, "max_latency_overhead": 0.5, "compensating_min_points": 5.0},
     Status.PASS),
])
def test_a_condition_on_disputed_results_carries_their_rules(condition: dict[str, object], status: Status) -> None:
    result = judge(condition, comparison(rule_ids=["lc:a", "lc:b"]))
    assert result.status is status and result.tainted_rule_ids == ["lc:a", "lc:b"]
    if "scope" in result.evidence:
        assert result.evidence["tainted_results"] == 2


def test_a_row_the_results_do_not_have_is_not_run() -> None:
    result = judge({"kind": "targeted_ci", "stratum": "verified_action"}, comparison(scopes=("all_positive",)))
    assert result.status is Status.NOT_RUN
    assert result.reason == "no joint-scored decisions in 'verified_action' in these results"


# ── repeats ─────────────────────────────────────────────────────────────────

REPEAT_TEXT = ("known_failure exact repeats: 12 → 8 of 30, relative reduction 33.3% (5 fixes / 1 regression, "
               "p = 0.2188)")


def test_repeat_reduction_names_the_counts_the_reduction_and_the_threshold() -> None:
    result = judge({"kind": "repeat_reduction", "min_relative_reduction": 0.3, "max_p": 0.25})
    assert result.status is Status.PASS
    assert result.reason == f"{REPEAT_TEXT}; needs ≥ 30% and p ≤ 0.25"
    assert result.evidence == {"stratum": "known_failure", "level": "exact", **asdict(REPEATS), "threshold": 0.3}
    strict = judge({"kind": "repeat_reduction", "min_relative_reduction": 0.9})
    assert strict.status is Status.FAIL and strict.reason == f"{REPEAT_TEXT}; needs ≥ 90%"


def test_repeat_reduction_reads_the_row_of_its_own_stratum() -> None:
    none_fewer = replace(REPEATS, candidate_repeats=12, fixes=3, regressions=3, p_value=1.0, relative_reduction=0.0)
    run = comparison().model_copy(update={"repeats": [
        *comparison().repeats, RepeatRow(level="exact", stratum="verified_recovery", stats=none_fewer)]})
    result = judge({"kind": "repeat_reduction", "stratum": "verified_recovery", "min_relative_reduction": 0.3}, run)
    assert result.status is Status.FAIL  # known_failure's row would pass
    assert result.reason.startswith("verified_recovery exact repeats: 12 → 12 of 30, relative reduction 0.0%")


def test_repeat_counts_are_pluralised() -> None:
    one_fix = replace(REPEATS, candidate_repeats=13, fixes=1, regressions=2, relative_reduction=-1 / 12)
    result = judge({"kind": "repeat_reduction", "min_relative_reduction": 0.0}, comparison(repeats=one_fix))
    assert result.status is Status.FAIL
    assert "12 → 13 of 30, relative reduction −8.3% (1 fix / 2 regressions, " in result.reason.replace("-", "−")


def test_no_repeats_in_the_baseline_fail_with_the_reason() -> None:
    never = replace(REPEATS, baseline_repeats=0, candidate_repeats=0, fixes=0, regressions=0, p_value=1.0,
                    relative_reduction=None)
    result = judge({"kind": "repeat_reduction", "min_relative_reduction": 0.0}, comparison(repeats=never))
    assert result.status is Status.FAIL
    assert result.reason == ("known_failure exact repeats: 0 → 0 of 30, relative reduction undefined (0 fixes / "
                             "0 regressions, p = 1.0000): the baseline never repeated, so no reduction can be shown")
    assert result.evidence["relative_reduction"] is None and result.evidence["threshold"] == 0.0


def test_a_repeat_level_the_results_do_not_have_is_not_run() -> None:
    result = judge({"kind": "repeat_reduction", "level": "shape", "min_relative_reduction": 0.3})
    assert result.status is Status.NOT_RUN
    assert result.reason == "no shape-repeat scores on 'known_failure' in these results"


# ── overhead ────────────────────────────────────────────────────────────────

OVERHEAD = {"kind": "overhead", "max_token_overhead": 0.25, "max_latency_overhead": 0.5}
COST_EVIDENCE = {**asdict(COST), "latency_basis": "mean", "max_token_overhead": 0.25, "max_latency_overhead": 0.5}


def test_overhead_names_each_ratio_and_its_allowance() -> None:
    result = judge(OVERHEAD)
    assert result.status is Status.FAIL  # tokens ×1.3 > ×1.25
    assert result.reason == ("tokens ×1.300 (allows ×1.25), mean latency ×1.100 (allows ×1.50); "
                             "tokens over the limit and the policy allows no compensation")
    assert result.evidence == COST_EVIDENCE
    within = judge({**OVERHEAD, "max_token_overhead": 0.3125})
    assert within.status is Status.PASS
    assert within.reason == "tokens ×1.300 (allows ×1.31), mean latency ×1.100 (allows ×1.50)"


def test_overhead_on_the_median_latency_names_every_ratio_over_its_limit() -> None:
    result = judge({**OVERHEAD, "latency": "p50"})
    assert result.status is Status.FAIL  # p50 ×1.6 > ×1.5
    assert result.reason == ("tokens ×1.300 (allows ×1.25), p50 latency ×1.600 (allows ×1.50); "
                             "tokens, p50 latency over the limit and the policy allows no compensation")
    assert result.evidence == {**COST_EVIDENCE, "latency_basis": "p50"}


def test_overhead_compensation_names_the_gain_it_needs() -> None:
    result = judge({**OVERHEAD, "compensating_scope": "verified_recovery", "compensating_min_points": 10.0})
    assert result.status is Status.PASS  # +10 ≥ +10
    assert result.reason == ("tokens ×1.300 (allows ×1.25), mean latency ×1.100 (allows ×1.50); tokens over the "
                             f"limit, compensation needs ≥ +10.00 points: verified_recovery {ROW}")
    assert result.evidence == {**COST_EVIDENCE, "compensation": row_evidence("verified_recovery", threshold=10.0)}
    unknown = judge({**OVERHEAD, "compensating_min_points": 5.0}, comparison(replace(STATS, points=None)))
    assert unknown.status is Status.FAIL


def test_overhead_without_a_baseline_measurement_is_not_run() -> None:
    for unmeasured in (replace(COST, token_ratio=None), replace(COST, latency_ratio=None)):
        result = judge(OVERHEAD, comparison(cost=unmeasured))
        assert result.status is Status.NOT_RUN
        assert result.reason == "these results carry no completion-token or latency measurements for the baseline"
    assert judge({**OVERHEAD, "latency": "p50"}, comparison(cost=replace(COST, p50_latency_ratio=None))).status \
        is Status.NOT_RUN


# ── paired-outcome evidence ─────────────────────────────────────────────────


def test_new_critical_failures_are_counted_listed_and_categorised(tmp_path: Path) -> None:
    """12 new (t0–t11, t0 and t1 privacy), one the baseline had too, one only the baseline had."""
    pairs = [WIN] * 12 + [BOTH, LOSS]
    data = {"measure": "critical_failure", "items": [
        {"id": f"t{i:02}", "baseline": b, "candidate": c} | ({"category": "privacy"} if i < 2 else {})
        for i, (b, c) in enumerate(pairs)]}
    evidence = {"critical_failures": write_json(tmp_path / "c.json", data)}
    result = judge({"kind": "no_new_critical_failures", "max_new": 11}, evidence=evidence)
    assert result.status is Status.FAIL
    first_ten = ", ".join(f"t{i:02}" for i in range(10))
    assert result.reason == f"12 new critical failure(s) in 14 checks: {first_ten}; allows ≤ 11"
    assert result.evidence == {
        "checks": 14, "baseline_failures": 2, "candidate_failures": 13, "new": [f"t{i:02}" for i in range(12)],
        "new_by_category": {"privacy": 2, "uncategorised": 10}, "threshold": 11,
    }
    judge_12 = judge({"kind": "no_new_critical_failures", "max_new": 12}, evidence=evidence)
    assert judge_12.status is Status.PASS


def test_no_new_critical_failure_lists_none(tmp_path: Path) -> None:
    evidence = {"critical_failures": outcomes_file(tmp_path / "c.json", "critical_failure", [BOTH, LOSS, NEITHER])}
    result = judge({"kind": "no_new_critical_failures"}, evidence=evidence)
    assert result.status is Status.PASS and result.reason == "0 new critical failure(s) in 3 checks; allows ≤ 0"
    assert result.evidence["new"] == [] and result.evidence["new_by_category"] == {}


def test_unsupported_completions_name_the_rise_and_its_allowance(tmp_path: Path) -> None:
    """3 new, 1 removed, 6 in both, 10 in neither: 7 → 9 of 20, +10 points; p = 2 · 5/16."""
    pairs = [WIN] * 3 + [LOSS] + [BOTH] * 6 + [NEITHER] * 10
    evidence = {"unsupported_completion": outcomes_file(tmp_path / "u.json", "unsupported_completion", pairs)}
    result = judge({"kind": "no_unsupported_completion_increase", "max_increase_points": 12.5}, evidence=evidence)
    assert result.status is Status.PASS
    assert result.reason == ("unsupported completions 7 → 9 of 20 (+10.00 points, 3 new / 1 removed, p = 0.6250); "
                             "allows ≤ +12.50 points")
    assert {k: result.evidence[k] for k in ("n", "baseline_repeats", "candidate_repeats", "fixes", "regressions",
                                            "p_value", "threshold")} == {
        "n": 20, "baseline_repeats": 7, "candidate_repeats": 9, "fixes": 1, "regressions": 3, "p_value": 0.625,
        "threshold": 12.5}
    assert result.evidence["points"] == pytest.approx(10.0)
    tighter = judge({"kind": "no_unsupported_completion_increase", "max_increase_points": 9.5}, evidence=evidence)
    assert tighter.status is Status.FAIL and tighter.reason.endswith("allows ≤ +9.50 points")


def test_isolated_replay_completion_names_the_loss_and_its_margin(tmp_path: Path) -> None:
    """2 wins, 3 losses, 15 both: 18 → 17 of 20, −5 points; p = 1."""
    pairs = [WIN] * 2 + [LOSS] * 3 + [BOTH] * 15
    evidence = {"isolated_replay": outcomes_file(tmp_path / "i.json", "task_completed", pairs)}
    result = judge({"kind": "isolated_replay_completion", "min_points": -6.0}, evidence=evidence)
    assert result.status is Status.PASS
    assert result.reason == ("isolated replay completion 18 → 17 of 20, −5.00 points (+2/−3, p = 1.0000, "
                             f"95% CI {ci(result.evidence)}); needs ≥ −6.00")
    assert result.evidence["ci_low"] < -5 < result.evidence["ci_high"]
    assert (result.evidence["wins"], result.evidence["losses"], result.evidence["threshold"]) == (2, 3, -6.0)
    assert judge({"kind": "isolated_replay_completion", "min_points": -4.0}, evidence=evidence).status is Status.FAIL


def test_isolated_live_replay_names_the_pass_rate_and_the_regressions(tmp_path: Path) -> None:
    pairs = [LOSS] + [WIN] * 2 + [BOTH] * 16 + [NEITHER]  # 18 of 20 pass, 1 regression
    evidence = {"isolated_live_replay": outcomes_file(tmp_path / "l.json", "live_replay_passed", pairs)}
    result = judge({"kind": "isolated_live_replay", "min_pass_rate": 0.875, "max_regressions": 1}, evidence=evidence)
    assert result.status is Status.PASS
    assert result.reason == ("candidate passed 18 of 20 (90.0%, needs ≥ 87.5%); "
                             "1 regression(s) against the baseline (allows ≤ 1)")
    assert {k: result.evidence[k] for k in ("pass_rate", "min_pass_rate", "max_regressions", "losses")} == {
        "pass_rate": 0.9, "min_pass_rate": 0.875, "max_regressions": 1, "losses": 1}


def test_shadow_names_its_gain_and_its_threshold(tmp_path: Path) -> None:
    """3 wins, 1 loss, 6 both, 2 neither: 7 → 9 of 12, +16.67 points; p = 2 · 5/16."""
    pairs = [WIN] * 3 + [LOSS] + [BOTH] * 6 + [NEITHER] * 2
    evidence = {"shadow": outcomes_file(tmp_path / "s.json", "correct", pairs)}
    result = judge({"kind": "shadow_improves", "min_items": 12, "points_above": 16.0, "max_p": 0.7},
                   evidence=evidence)
    assert result.status is Status.PASS
    assert result.reason == "shadow 7 → 9 of 12, +16.67 points (+3/−1, p = 0.6250); needs points > +16.00 and p ≤ 0.7"
    assert (result.evidence["n"], result.evidence["threshold"]) == (12, 16.0)
    too_few = judge({"kind": "shadow_improves", "min_items": 13}, evidence=evidence)
    assert too_few.status is Status.NOT_RUN
    assert too_few.reason == "shadow evidence has 12 paired tasks, the policy needs ≥ 13"
    plain = judge({"kind": "shadow_improves", "min_items": 1}, evidence=evidence)
    assert plain.status is Status.PASS and plain.reason.endswith("; needs points > +0.00")


MISSING = [
    ({"kind": "no_new_critical_failures"},
     'no evidence \'critical_failures\' given (a paired-outcomes JSON with "measure": "critical_failure")'),
    ({"kind": "no_unsupported_completion_increase"},
     'no evidence \'unsupported_completion\' given (a paired-outcomes JSON with "measure": "unsupported_completion")'),
    ({"kind": "isolated_replay_completion"},
     'no evidence \'isolated_replay\' given (a paired-outcomes JSON with "measure": "task_completed")'),
    ({"kind": "isolated_live_replay", "min_pass_rate": 0.9},
     'no evidence \'isolated_live_replay\' given (a paired-outcomes JSON with "measure": "live_replay_passed")'),
    ({"kind": "shadow_improves", "min_items": 1},
     'no evidence \'shadow\' given (a paired-outcomes JSON with "measure": "correct")'),
    ({"kind": "confirmation_run", "min_points": 0.0},
     "no evidence 'confirmation' given (a run directory of a second seed or checkpoint)"),
    ({"kind": "quantisation_survives", "min_points": 0.0, "max_drop_points": 1.0},
     "no evidence 'quantised' given (a run directory of the same arms on the quantised endpoint)"),
    ({"kind": "fresh_chronological", "captured_after": "2026-09-20T00:00:00Z"},
     "no evidence 'fresh' given (a run directory on decisions captured after the cut-off)"),
    ({"kind": "canary_no_regression", "min_requests": 1}, "no evidence 'canary' given (a canary export JSON)"),
    ({"kind": "rollback_ready"}, "no evidence 'registry' given (a registry state JSON)"),
]


@pytest.mark.parametrize(("condition", "reason"), MISSING)
def test_missing_evidence_names_its_key_and_what_it_should_be(condition: dict[str, object], reason: str) -> None:
    result = judge(condition)
    assert result.status is Status.NOT_RUN and result.reason == reason


def test_an_absent_or_unreadable_evidence_file_is_named(tmp_path: Path) -> None:
    absent = tmp_path / "absent.json"
    result = judge({"kind": "rollback_ready"}, evidence={"registry": absent})
    assert result.status is Status.NOT_RUN and result.reason == f"evidence 'registry': {absent} does not exist"
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    result = judge({"kind": "rollback_ready"}, evidence={"registry": broken})
    assert result.status is Status.NOT_RUN and result.reason.startswith(f"evidence 'registry': {broken}")
    assert "invalid JSON" in result.reason


def test_paired_outcomes_for_another_measure_or_candidate_are_not_used(tmp_path: Path) -> None:
    condition = {"kind": "no_new_critical_failures"}
    other = {"critical_failures": outcomes_file(tmp_path / "m.json", "task_completed", [BOTH])}
    assert judge(condition, evidence=other).reason == (
        "evidence 'critical_failures' measures 'task_completed', this condition needs 'critical_failure'")
    stranger = {"critical_failures": outcomes_file(tmp_path / "o.json", "critical_failure", [BOTH], candidate="x")}
    assert judge(condition, evidence=stranger).reason == (
        f"evidence 'critical_failures' is for candidate 'x', not {CANDIDATE!r}")
    empty = {"critical_failures": write_json(tmp_path / "e.json", {"measure": "critical_failure", "items": []})}
    assert judge(condition, evidence=empty).reason == "evidence 'critical_failures' has no items"
    named = {"critical_failures": outcomes_file(tmp_path / "n.json", "critical_failure", [BOTH], candidate=CANDIDATE)}
    assert judge(condition, evidence=named).status is Status.PASS


# ── canary and registry ─────────────────────────────────────────────────────


def canary_file(path: Path, canary: dict[str, int], adapter: str | None = CANDIDATE) -> Path:
    return write_json(path, {"adapter": adapter, "control": {"requests": 1000, "errors": 5, "anomalies": 9},
                             "canary": {"requests": 200} | canary, "subject": SUBJECT})


def test_canary_names_each_rate_and_its_allowance(tmp_path: Path) -> None:
    """Errors 0.5% → 1% (+0.5 points, allowed); anomalies 0.9% → 0.5%."""
    evidence = {"canary": canary_file(tmp_path / "c.json", {"errors": 2, "anomalies": 1})}
    result = judge({"kind": "canary_no_regression", "min_requests": 200, "max_error_rate_increase": 0.005},
                   evidence=evidence)
    assert result.status is Status.PASS
    assert result.reason == ("canary 200 vs control 1000 requests: errors 0.50% → 1.00% (allows +0.50 points); "
                             "anomalies 0.90% → 0.50% (allows +0.00 points)")
    assert result.evidence == {
        "control": {"requests": 1000, "errors": 5, "anomalies": 9, "outcomes": None},
        "canary": {"requests": 200, "errors": 2, "anomalies": 1, "outcomes": None},
        "limits": {"errors": 0.005, "anomalies": 0.0},
    }


@pytest.mark.parametrize(("limit", "expected"), [(0.007, Status.PASS), (0.005, Status.FAIL)])
def test_canary_anomalies_have_their_own_allowance(tmp_path: Path, limit: float, expected: Status) -> None:
    """Anomalies 0.9% → 1.5%: +0.6 points; errors unchanged."""
    evidence = {"canary": canary_file(tmp_path / "c.json", {"errors": 1, "anomalies": 3})}
    condition = {"kind": "canary_no_regression", "min_requests": 1, "max_anomaly_rate_increase": limit}
    assert judge(condition, evidence=evidence).status is expected


def test_a_canary_of_another_adapter_or_too_few_requests_is_not_run(tmp_path: Path) -> None:
    other = {"canary": canary_file(tmp_path / "o.json", {"errors": 0, "anomalies": 0}, adapter="x")}
    result = judge({"kind": "canary_no_regression", "min_requests": 1}, evidence=other)
    assert result.status is Status.NOT_RUN and result.reason == f"canary evidence is for 'x', not {CANDIDATE!r}"
    small = {"canary": canary_file(tmp_path / "s.json", {"errors": 0, "anomalies": 0}, adapter=None)}
    result = judge({"kind": "canary_no_regression", "min_requests": 201}, evidence=small)
    assert result.status is Status.NOT_RUN
    assert result.reason == "canary cohorts have 200 requests, the policy needs ≥ 201 each"


def test_a_canary_without_observed_tool_results_names_the_missing_rate(tmp_path: Path) -> None:
    evidence = {"canary": canary_file(tmp_path / "c.json", {"errors": 0, "anomalies": 0, "outcomes": 0})}
    result = judge({"kind": "canary_no_regression", "min_requests": 1}, evidence=evidence)
    assert result.status is Status.NOT_RUN
    assert result.reason == ("no tool results observed in a cohort, so no anomalies rate "
                             "(is capture on for the canary's workspaces?)")


def test_rollback_names_the_target_and_production(tmp_path: Path) -> None:
    state = {"production": CANDIDATE, "rollback_target": "recovery-v1", "loaded": ["recovery-v1"]}
    result = judge({"kind": "rollback_ready"}, evidence={"registry": write_json(tmp_path / "r.json", state)})
    assert result.status is Status.PASS
    assert result.reason == f"rollback target 'recovery-v1' is loaded (production: {CANDIDATE!r})"
    assert result.evidence == state
    state["rollback_target"] = None
    result = judge({"kind": "rollback_ready"}, evidence={"registry": write_json(tmp_path / "r.json", state)})
    assert result.status is Status.FAIL and result.reason == "the registry names no rollback target"
    assert result.evidence == state


# ── other runs ──────────────────────────────────────────────────────────────


def two_win_run(run_dir: Path, arms: tuple[str, ...] = (BASE, CANDIDATE), rule: str | None = None) -> Path:
    """20 verified_action decisions d0–d19, the candidate right on all, the baseline wrong on d0 and d1:
    +10 points, p = 1/2. `rule`: a rule every answer carried."""
    records: list[ResultRecord] = []
    for i, (baseline, candidate) in enumerate(TWO_WINS):
        rules = {f"d{i}": [rule]} if rule else None
        for arm in arms:
            right = baseline if arm == BASE else candidate
            records.append(positive_record(arm, "verified_action", f"d{i}", i, right, right, rules=rules))
    return write_run(run_dir, records)


TWO_WIN_ROW = "all_positive joint: 18 → 20 of 20, +10.00 points (+2/−0, p = 0.5000, 95% CI "


def test_a_confirmation_run_names_the_run_and_its_gain(tmp_path: Path) -> None:
    run = two_win_run(tmp_path / "confirm")
    result = judge({"kind": "confirmation_run", "min_points": 10.0, "max_p": 0.5}, evidence={"confirmation": run})
    assert result.status is Status.PASS
    assert result.reason == f"confirmation run {run}: {TWO_WIN_ROW}{ci(result.evidence)}); needs points ≥ +10.00 " \
                            "and p ≤ 0.5"
    assert result.evidence["run_dir"] == str(run) and result.evidence["scope"] == "all_positive"
    assert (result.evidence["wins"], result.evidence["losses"], result.evidence["n"]) == (2, 0, 20)


def test_a_confirmation_run_on_disputed_rules_carries_them(tmp_path: Path) -> None:
    run = two_win_run(tmp_path / "confirm", rule="lc:x")
    result = judge({"kind": "confirmation_run", "min_points": 10.0}, evidence={"confirmation": run},
                   tainted=("lc:x",))
    assert result.status is Status.PASS and result.tainted_rule_ids == ["lc:x"]
    assert result.evidence["tainted_results"] == 40


def test_a_confirmation_directory_without_results_is_not_run(tmp_path: Path) -> None:
    result = judge({"kind": "confirmation_run", "min_points": 0.0}, evidence={"confirmation": tmp_path})
    assert result.status is Status.NOT_RUN
    assert result.reason.startswith(f"evidence 'confirmation': {tmp_path / 'results.jsonl'}: not found")


# the drop is taken from the counts, so these agree with their points
PLUS_15 = replace(STATS, candidate_correct=23, wins=8, points=15.0)
MINUS_50 = replace(STATS, baseline_correct=30, candidate_correct=10, wins=0, losses=20, points=-50.0)


def test_quantisation_names_the_drop_from_high_precision(tmp_path: Path) -> None:
    """+15 points here (+8/−2 of 40), +10 quantised: a drop of 5."""
    run = quantised(two_win_run(tmp_path / "quantised", rule="lc:q"))
    here = comparison(PLUS_15, rule_ids=["lc:here"])
    condition = {"kind": "quantisation_survives", "min_points": 10.0, "max_drop_points": 5.0}
    result = judge(condition, here, {"quantised": run}, tainted=("lc:q",))
    assert result.status is Status.PASS
    assert result.reason == (f"quantised run {run}: {TWO_WIN_ROW}{ci(result.evidence)}); needs points ≥ +10.00; "
                             "drop from high precision +5.00 points (allows ≤ 5.00)")
    assert (result.evidence["high_precision_points"], result.evidence["drop_points"]) == (15.0, 5.0)
    assert result.evidence["run_dir"] == str(run) and result.tainted_rule_ids == ["lc:q"]  # the quantised run's rows


def test_quantisation_without_a_high_precision_gain_fails(tmp_path: Path) -> None:
    condition = {"kind": "quantisation_survives", "min_points": 0.0, "max_drop_points": 100.0}
    result = judge(condition, comparison(replace(STATS, points=None)), {"quantised": quantised(two_win_run(tmp_path / "q"))})
    assert result.status is Status.FAIL and "drop from high precision n/a points" in result.reason
    assert result.evidence["drop_points"] is None


def test_quantisation_judges_its_scope_and_measure_on_both_runs(tmp_path: Path) -> None:
    """The high-precision row of the condition's own scope: verified_action is +15 here, the rest −50."""
    here = comparison().model_copy(update={"correctness": [
        r.model_copy(update={"stats": PLUS_15 if (r.scope, r.measure) == ("verified_action", "tool") else MINUS_50})
        for r in comparison().correctness]})
    condition = {"kind": "quantisation_survives", "scope": "verified_action", "measure": "tool", "min_points": 10.0,
                 "max_drop_points": 5.0}
    result = judge(condition, here, {"quantised": quantised(two_win_run(tmp_path / "q"))})
    assert result.status is Status.PASS and result.evidence["high_precision_points"] == 15.0
    assert result.reason.startswith(f"quantised run {tmp_path / 'q'}: verified_action tool: 18 → 20 of 20")


CUTOFF = {"kind": "fresh_chronological", "captured_after": "2026-09-20T00:00:00Z"}


def test_a_fresh_run_names_its_decisions_and_the_cutoff(tmp_path: Path) -> None:
    run = two_win_run(tmp_path / "fresh")
    suite = write_suite(tmp_path / "suite", load_results(run), "2026-09-20T00:00:01Z")
    result = judge(CUTOFF, evidence={"fresh": run, "fresh_suite": suite})
    assert result.status is Status.PASS
    assert result.reason == (f"fresh run {run} (20 decisions captured after 2026-09-20): {TWO_WIN_ROW}"
                             f"{ci(result.evidence)}); needs points > +0.00")
    assert result.evidence["run_dir"] == str(run)
    assert result.evidence["captured_after"] == "2026-09-20T00:00:00+00:00"


def test_a_naive_cutoff_and_capture_dates_are_utc(tmp_path: Path) -> None:
    run = two_win_run(tmp_path / "fresh")
    suite = write_suite(tmp_path / "suite", load_results(run), "2026-09-20T00:00:00")
    on = judge({**CUTOFF, "captured_after": "2026-09-20T00:00:00"}, evidence={"fresh": run, "fresh_suite": suite})
    assert on.status is Status.FAIL
    assert on.evidence == {"stale": sorted(f"d{i}" for i in range(20)), "captured_after": "2026-09-20T00:00:00+00:00"}
    first_ten = ", ".join(sorted(f"d{i}" for i in range(20))[:10])
    assert on.reason == f"20 decision(s) captured on or before 2026-09-20T00:00:00+00:00: {first_ten}"
    before = judge({**CUTOFF, "captured_after": "2026-09-19T23:59:59"}, evidence={"fresh": run, "fresh_suite": suite})
    assert before.status is Status.PASS


def test_capture_dates_and_the_cutoff_are_compared_as_instants(tmp_path: Path) -> None:
    """01:00 at +02:00 is 23:00 UTC the day before; a cutoff of 02:00 at +02:00 is midnight UTC."""
    run = two_win_run(tmp_path / "fresh")
    east = write_suite(tmp_path / "east", load_results(run), "2026-09-20T01:00:00+02:00")
    result = judge(CUTOFF, evidence={"fresh": run, "fresh_suite": east})
    assert result.status is Status.FAIL and len(result.evidence["stale"]) == 20
    utc = write_suite(tmp_path / "utc", load_results(run), "2026-09-20T01:00:00Z")
    result = judge({**CUTOFF, "captured_after": "2026-09-20T02:00:00+02:00"}, evidence={"fresh": run, "fresh_suite": utc})
    assert result.status is Status.PASS and result.evidence["captured_after"] == "2026-09-20T02:00:00+02:00"


def test_fresh_decisions_missing_from_the_suite_are_named(tmp_path: Path) -> None:
    run = two_win_run(tmp_path / "fresh")
    suite = write_suite(tmp_path / "suite", load_results(run)[:2], "2026-10-01T00:00:00Z")  # d0 only
    result = judge(CUTOFF, evidence={"fresh": run, "fresh_suite": suite})
    unknown = sorted(f"d{i}" for i in range(1, 20))
    assert result.status is Status.FAIL and result.evidence == {"unknown": unknown}
    assert result.reason == f"19 fresh decision(s) are not in suite {suite}: {', '.join(unknown[:10])}"


def test_a_fresh_run_is_judged_on_the_baselines_decisions(tmp_path: Path) -> None:
    """A third arm's answers to decisions outside the suite do not make the fresh run unknown."""
    run = two_win_run(tmp_path / "fresh")
    suite = write_suite(tmp_path / "suite", load_results(run), "2026-10-01T00:00:00Z")
    extra = positive_record("other", "verified_action", "x0", 0, True, True)
    (run / "results.jsonl").write_text((run / "results.jsonl").read_text() + extra.model_dump_json() + "\n")
    seal(run)
    assert judge(CUTOFF, evidence={"fresh": run, "fresh_suite": suite}).status is Status.PASS


def test_fresh_evidence_that_cannot_be_read_is_not_run(tmp_path: Path) -> None:
    run = two_win_run(tmp_path / "fresh")
    result = judge(CUTOFF, evidence={"fresh": run, "fresh_suite": tmp_path})
    assert result.status is Status.NOT_RUN and result.reason.startswith("fresh evidence: ")
    result = judge(CUTOFF, evidence={"fresh": run})
    assert result.reason == "no evidence 'fresh_suite' given (the fresh run's suite directory, to check capture dates)"


def test_a_fresh_run_on_disputed_rules_carries_them(tmp_path: Path) -> None:
    run = two_win_run(tmp_path / "fresh", rule="lc:x")
    suite = write_suite(tmp_path / "suite", load_results(run), "2026-10-01T00:00:00Z")
    result = judge(CUTOFF, evidence={"fresh": run, "fresh_suite": suite}, tainted=("lc:x",))
    assert result.status is Status.PASS and result.tainted_rule_ids == ["lc:x"]
    assert result.evidence["tainted_results"] == 40


def test_other_runs_are_compared_on_the_verdicts_arms(tmp_path: Path) -> None:
    """A run directory with a third arm: only baseline and candidate are compared."""
    run = two_win_run(tmp_path / "r", arms=(BASE, CANDIDATE, "other"))
    assert json.loads((run / "results.jsonl").read_text().splitlines()[2])["arm"] == "other"
    result = judge({"kind": "confirmation_run", "min_points": 10.0}, evidence={"confirmation": run})
    assert result.status is Status.PASS and result.evidence["n"] == 20


# ── the verdict ─────────────────────────────────────────────────────────────


def two_conditions() -> GatePolicy:
    return GatePolicy.model_validate({"name": "p", "version": "2", "conditions": [
        {"id": "gain", "kind": "paired_gain", "description": "d", "min_points": 5.0},
        {"id": "fresh", "kind": "fresh_chronological", "description": "d", "captured_after": "2026-09-20T00:00:00Z"},
    ]})


def test_a_verdict_records_its_inputs_and_the_evidence_no_condition_used(tmp_path: Path) -> None:
    moment = datetime(2026, 10, 3, 12, tzinfo=UTC)
    given = {"zeta": tmp_path / "z", "fresh": tmp_path / "f", "fresh_suite": tmp_path / "s", "alpha": str(tmp_path / "a")}
    verdict = evaluate(two_conditions(), comparison(), given, run_dir=tmp_path, policy_path="gates/p.toml",
                       policy_sha256="ab12", now=lambda: moment)
    assert (verdict.policy, verdict.policy_version, verdict.baseline, verdict.candidate) == ("p", "2", BASE, CANDIDATE)
    assert (verdict.run_dir, verdict.policy_path, verdict.policy_sha256) == (str(tmp_path), "gates/p.toml", "ab12")
    assert verdict.evidence_paths == {key: str(value) for key, value in given.items()}
    assert verdict.unused_evidence == ["alpha", "zeta"]  # fresh and fresh_suite are the fresh condition's
    assert verdict.evaluated_at == moment and verdict.comparisons_made == 3
    assert [(c.id, c.kind, c.status) for c in verdict.conditions] == [
        ("gain", "paired_gain", Status.PASS), ("fresh", "fresh_chronological", Status.NOT_RUN)]
    assert verdict.passed is False and verdict.counts() == {Status.PASS: 1, Status.FAIL: 0, Status.NOT_RUN: 1}


def test_a_verdict_without_paths_names_none_and_is_stamped_now() -> None:
    before = datetime.now(UTC)
    verdict = evaluate(two_conditions(), comparison())
    assert (verdict.run_dir, verdict.policy_path, verdict.policy_sha256) == (None, None, None)
    assert verdict.evidence_paths == {} and verdict.unused_evidence == []
    assert before <= verdict.evaluated_at <= datetime.now(UTC)


def test_a_verdict_lists_every_disputed_rule_once_in_order() -> None:
    """The rows' rules and the run's own (here a rule only the run as a whole carried)."""
    run = comparison(rule_ids=["lc:b", "lc:a"]).model_copy(update={"tainted_rule_ids": ["lc:z", "lc:a"]})
    verdict = evaluate(two_conditions(), run)
    assert verdict.tainted_rule_ids == ["lc:a", "lc:b", "lc:z"]
    assert verdict.conditions[0].tainted_rule_ids == ["lc:b", "lc:a"]


def test_asking_for_a_condition_the_policy_lacks_names_both() -> None:
    verdict = evaluate(two_conditions(), comparison())
    assert verdict.status("gain") is Status.PASS
    with pytest.raises(KeyError, match="no condition 'gane' in policy 'p'"):
        verdict.status("gane")


def noise(*rows: tuple[str, str, int, int]) -> NoiseFloor:
    """A/A rows (measure, scope, wins, losses) of 40 decisions."""
    return NoiseFloor(arm=BASE, replicate="base-aa", decisions=40, rows=[
        NoiseRow(measure=measure, scope=scope, stats=replace(STATS, wins=wins, losses=losses))
        for measure, scope, wins, losses in rows])


@pytest.mark.parametrize(("condition", "floor"), [
    ({"kind": "paired_gain", "min_points": 5.0}, (1, 3)),
    ({"kind": "paired_gain", "min_points": 5.0, "measure": "tool", "scope": "verified_action"}, (2, 0)),
    ({"kind": "paired_gain", "min_points": 5.0, "measure": "tool"}, None),  # no A/A row of that measure
    ({"kind": "targeted_ci", "stratum": "verified_recovery"}, None),  # nor of that scope
    ({"kind": "repeat_reduction", "min_relative_reduction": 0.3}, None),  # repeats have none
])
def test_a_row_condition_carries_the_noise_floor_of_its_own_row(condition: dict, floor: tuple | None) -> None:
    floors = noise(("joint", "all_positive", 1, 3), ("tool", "verified_action", 2, 0), ("joint", "verified_action", 5, 5))
    evidence = judge(condition, comparison(noise=floors)).evidence
    if floor is None:
        assert "noise_floor" not in evidence
    else:
        wins, losses = floor
        assert evidence["noise_floor"] == {"arm": BASE, "replicate": "base-aa", "decisions": 40,
                                           "discordant": wins + losses, "wins": wins, "losses": losses}


def test_the_verdict_text_names_the_noise_floor() -> None:
    verdict = evaluate(two_conditions(), comparison(noise=noise(("joint", "all_positive", 1, 3))))
    assert format_verdict(verdict).splitlines()[-2] == (
        "noise floor: 4 of 40 held-out positives change with nothing changed (base-aa replicates base); "
        "no condition of this policy judges it")
    without = evaluate(two_conditions(), comparison(noise=noise(("tool", "all_positive", 1, 3))))
    assert format_verdict(without).splitlines()[-2] == (
        "noise floor: no held-out positives change with nothing changed (base-aa replicates base); "
        "no condition of this policy judges it")


def test_a_verdict_file_is_named_for_the_policy_and_a_safe_candidate(tmp_path: Path) -> None:
    assert verdict_filename("serious", "ckpt/a b:c.d_e-F9") == "gate-serious-ckpt_a_b_c.d_e-F9.json"
    verdict = evaluate(two_conditions(), comparison())
    path = write_verdict(tmp_path, verdict)
    assert path == tmp_path / f"gate-p-{CANDIDATE}.json"
    text = path.read_text(encoding="utf-8")
    assert text.startswith('{\n  "_type": "https://in-toto.io/Statement/v1",\n') and text.endswith("}\n")  # indented
    assert read_verdict(path) == verdict


def test_a_verdict_file_is_the_same_utf8_under_an_ascii_locale(tmp_path: Path) -> None:
    """Reasons carry →, ≥ and −; the file must not depend on the locale of the machine that wrote it."""
    verdict = evaluate(two_conditions(), comparison(), now=lambda: datetime(2026, 10, 3, tzinfo=UTC))
    (tmp_path / "here").mkdir()
    here = write_verdict(tmp_path / "here", verdict)
    env = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    script = ("import sys; from replay.analysis.gates import read_verdict, write_verdict; "
              "write_verdict(sys.argv[1], read_verdict(sys.argv[2]))")
    (tmp_path / "ascii").mkdir()
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "ascii"), str(here)], env=env,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    written = (tmp_path / "ascii" / f"gate-p-{CANDIDATE}.json").read_bytes()
    assert written == here.read_bytes() and "(+6/−2".encode() in written


def test_evaluate_gate_hashes_the_policy_file_and_taints_the_run(tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text('name = "p"\nversion = "1"\n[[conditions]]\nid = "g"\nkind = "paired_gain"\n'
                      'description = "d"\nmin_points = 5.0\nscope = "verified_action"\n[[conditions]]\n'
                      'id = "again"\nkind = "confirmation_run"\ndescription = "d"\nmin_points = 5.0\n', encoding="utf-8")
    run = two_win_run(tmp_path / "run", rule="lc:x")
    confirmation = two_win_run(tmp_path / "confirmation", rule="lc:x")
    verdict = evaluate_gate(policy, run, BASE, CANDIDATE, {"confirmation": confirmation}, tainted={"lc:x"})
    assert verdict.policy_sha256 == hashlib.sha256(policy.read_bytes()).hexdigest()
    assert (verdict.policy_path, verdict.run_dir) == (str(policy), str(run))
    assert verdict.tainted_rule_ids == ["lc:x"] and not verdict.passed  # every condition passed: the dispute refuses
    assert {c.status for c in verdict.conditions} == {Status.PASS}
    assert [(c.tainted_rule_ids, c.evidence["tainted_results"]) for c in verdict.conditions] == [(["lc:x"], 40)] * 2

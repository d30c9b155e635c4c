"""The lesson gate at each of its boundaries: p exactly α (exact fractions), points exactly at a margin,
leave-one-out lift exactly at ±margin, the forced verdict at exactly `max_trials`, and which arms the
leave-one-out baseline may use."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime
from fractions import Fraction
from pathlib import Path

import pytest

from core.records import DecisionScore, ParsedResponse, ParseOutcome, ResultRecord
from replay.memory.files import LC_FILE, LOG_FILE
from replay.memory.ledger import Ledger
from replay.memory.lessons import (
    HARMFUL,
    HELPFUL,
    INCONCLUSIVE,
    AblationEvidence,
    AblationPolicy,
    LessonError,
    LessonOutcome,
    LessonVerdict,
    LiftEvidence,
    LiftPolicy,
    RuleVerdict,
    Trial,
    _read_for_edit,
    apply_edits,
    apply_plan,
    causal_verdicts,
    leave_one_out_verdicts,
    lesson_verdicts,
    lift_verdicts,
    outcomes_from_trials,
    plan_lessons,
    propose_edits,
    record_verdicts,
)
from replay.stats import paired_comparison, rejects, sign_test

RULE = "lc:r"


def paired(wins: int, losses: int, ties: int = 0) -> list[Trial]:
    """`workspace` vs `workspace-minus:lc:r` on wins + losses + ties decisions: a win is a decision only the
    full memory got right, a tie one both got right."""
    outcomes = [(True, False)] * wins + [(False, True)] * losses + [(True, True)] * ties
    trials = []
    for i, (full, ablated) in enumerate(outcomes):
        trials.append(Trial("m", "workspace", f"d{i}", "ws", full, frozenset({RULE, "lc:other"})))
        trials.append(Trial("m", f"workspace-minus:{RULE}", f"d{i}", "ws", ablated, frozenset({"lc:other"})))
    return trials


def causal(trials: list[Trial], policy: AblationPolicy) -> LessonVerdict:
    [verdict] = causal_verdicts(trials, policy)
    return verdict.verdict


def test_the_shared_rule_rejects_at_equality_only() -> None:
    assert rejects(0.05, 0.05) and rejects(0.04, 0.05) and not rejects(math.nextafter(0.05, 1), 0.05)


def test_a_7_0_split_at_alpha_exactly_its_p_value_is_judged() -> None:
    """7/0 is p = 2/2⁷ = 1/64 exactly; at α = 1/64 it rejects (p ≤ α), one ulp below it holds."""
    assert Fraction(sign_test(7, 0)) == Fraction(1, 64)
    at, below, above = 1 / 64, math.nextafter(1 / 64, 0), math.nextafter(1 / 64, 1)
    assert causal(paired(7, 0), AblationPolicy(alpha=at)) is LessonVerdict.PROMOTE
    assert causal(paired(0, 7), AblationPolicy(alpha=at)) is LessonVerdict.EVICT
    assert causal(paired(7, 0), AblationPolicy(alpha=below)) is LessonVerdict.HOLD
    assert causal(paired(0, 7), AblationPolicy(alpha=below)) is LessonVerdict.HOLD
    assert causal(paired(7, 0), AblationPolicy(alpha=above)) is LessonVerdict.PROMOTE


def test_points_exactly_at_the_evict_and_promote_margins() -> None:
    """7 losses in 10 decisions is exactly −70 points; 7 wins in 10, +70. A margin equal to the effect
    passes, one ulp more does not."""
    harmful, helpful = paired(0, 7, ties=3), paired(7, 0, ties=3)
    [v] = causal_verdicts(harmful, AblationPolicy())
    assert v.evidence.comparison.points == -70.0  # type: ignore[union-attr]
    assert causal(harmful, AblationPolicy(evict_margin_points=70.0)) is LessonVerdict.EVICT
    assert causal(harmful, AblationPolicy(evict_margin_points=math.nextafter(70.0, 100))) is LessonVerdict.HOLD
    assert causal(helpful, AblationPolicy(promote_margin_points=70.0)) is LessonVerdict.PROMOTE
    assert causal(helpful, AblationPolicy(promote_margin_points=math.nextafter(70.0, 100))) is LessonVerdict.HOLD
    # a margin on the other side never matters
    assert causal(harmful, AblationPolicy(promote_margin_points=1000.0)) is LessonVerdict.EVICT
    assert causal(helpful, AblationPolicy(evict_margin_points=1000.0)) is LessonVerdict.PROMOTE


def test_no_effect_at_all_holds_even_at_a_zero_margin() -> None:
    assert causal(paired(0, 0, ties=12), AblationPolicy(alpha=0.999)) is LessonVerdict.HOLD


def lift_world(carried: list[float], absent: list[float]) -> list[LessonOutcome]:
    return ([LessonOutcome(f"c{i}", "ws", s, frozenset({RULE})) for i, s in enumerate(carried)]
            + [LessonOutcome(f"a{i}", "ws", s, frozenset({"lc:other"})) for i, s in enumerate(absent)])


def lift_of(outcomes: list[LessonOutcome], policy: LiftPolicy) -> tuple[LessonVerdict, str, bool]:
    verdict = next(v for v in lift_verdicts(outcomes, policy) if v.rule_id == RULE)
    return verdict.verdict, verdict.reason, verdict.forced


def test_leave_one_out_lift_exactly_at_minus_and_plus_the_margin() -> None:
    """Carried mean 0 against absent mean 1/4: lift −0.25 exactly (all binary fractions)."""
    harmful = lift_world([0.0, 0.0], [1.0, 0.0, 0.0, 0.0])
    helpful = lift_world([1.0, 1.0], [1.0, 1.0, 1.0, 0.0])
    assert lift_of(harmful, LiftPolicy(evict_margin=0.25)) == (LessonVerdict.EVICT, HARMFUL, False)
    assert lift_of(harmful, LiftPolicy(evict_margin=math.nextafter(0.25, 1)))[:2] == (LessonVerdict.HOLD,
                                                                                      "lift within the margins")
    assert lift_of(helpful, LiftPolicy(promote_margin=0.25)) == (LessonVerdict.PROMOTE, HELPFUL, False)
    assert lift_of(helpful, LiftPolicy(promote_margin=math.nextafter(0.25, 1)))[0] is LessonVerdict.HOLD


def test_a_lift_of_exactly_the_default_margin_promotes_or_evicts() -> None:
    """10 of 20 against 9 of 20 is a lift of exactly 0.05, the default margins, though 0.5 − 0.45 is
    0.04999999999999999 as a difference of float means."""
    ten, nine = [1.0] * 10 + [0.0] * 10, [1.0] * 9 + [0.0] * 11
    assert lift_of(lift_world(ten, nine), LiftPolicy()) == (LessonVerdict.PROMOTE, HELPFUL, False)
    assert lift_of(lift_world(nine, ten), LiftPolicy()) == (LessonVerdict.EVICT, HARMFUL, False)
    above = math.nextafter(0.05, 1)
    assert lift_of(lift_world(ten, nine), LiftPolicy(promote_margin=above))[0] is LessonVerdict.HOLD
    assert lift_of(lift_world(nine, ten), LiftPolicy(evict_margin=above))[0] is LessonVerdict.HOLD


def test_min_trials_is_inclusive() -> None:
    harmful = lift_world([0.0, 0.0, 0.0], [1.0])
    assert lift_of(harmful, LiftPolicy(min_trials=3))[0] is LessonVerdict.EVICT
    assert lift_of(harmful, LiftPolicy(min_trials=4))[:2] == (LessonVerdict.HOLD, "fewer than 4 trials")


@pytest.mark.parametrize("max_trials, forced", [(3, True), (2, True), (4, False), (None, False)])
def test_a_zero_lift_rule_is_forced_out_at_exactly_max_trials(max_trials: int | None, forced: bool) -> None:
    """Lift exactly 0 (never shown to help): held below `max_trials`, evicted as inconclusive at it."""
    flat = lift_world([1.0, 0.0, 1.0], [1.0, 0.0, 1.0])
    got = lift_of(flat, LiftPolicy(max_trials=max_trials))
    assert got == ((LessonVerdict.EVICT, INCONCLUSIVE, True) if forced else (LessonVerdict.HOLD, "lift within the margins", False))


def test_a_forced_verdict_promotes_any_positive_lift_and_evicts_a_rule_never_absent() -> None:
    small_gain = lift_world([1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0])  # 0.75 − 0.625
    assert lift_of(small_gain, LiftPolicy(promote_margin=0.5)) == (LessonVerdict.HOLD, "lift within the margins", False)
    assert lift_of(small_gain, LiftPolicy(promote_margin=0.5, max_trials=4)) == (LessonVerdict.PROMOTE, HELPFUL, True)
    never_absent = [LessonOutcome(f"c{i}", "ws", 1.0, frozenset({RULE})) for i in range(3)]
    assert lift_of(never_absent, LiftPolicy())[:2] == (LessonVerdict.HOLD, "never absent: no leave-one-out baseline")
    assert lift_of(never_absent, LiftPolicy(max_trials=3)) == (LessonVerdict.EVICT, INCONCLUSIVE, True)


def test_ablation_arms_do_not_leak_into_the_leave_one_out_baseline() -> None:
    """Plain arms: lc:r carried on d0–d3 (all right); its absence is seen only on d4–d5 of another rule's
    arm. The ablation arm workspace-minus:lc:r (all wrong) must not count as "runs without lc:r"."""
    plain = [Trial("m", "workspace", f"d{i}", "ws", True, frozenset({RULE})) for i in range(4)]
    plain += [Trial("m", "rules:lc:other", f"d{i}", "ws", i == 4, frozenset({"lc:other"})) for i in (4, 5)]
    ablated = [Trial("m", f"workspace-minus:{RULE}", f"d{i}", "ws", False, frozenset()) for i in range(4)]
    [loo] = [v for v in leave_one_out_verdicts(plain + ablated) if v.rule_id == RULE]
    assert loo.evidence == LiftEvidence(carried=4, absent=2, carried_mean=1.0, absent_mean=0.5, lift=0.5)
    # lesson_verdicts judges lc:r causally (it has ablation pairs) and lc:other by leave-one-out on plain arms
    verdicts = {v.rule_id: v for v in lesson_verdicts(plain + ablated)}
    assert verdicts[RULE].method == "ablation" and verdicts["lc:other"].method == "leave-one-out"
    other = verdicts["lc:other"].evidence
    assert isinstance(other, LiftEvidence) and (other.carried, other.absent) == (2, 4)


def test_the_policies_given_reach_both_methods() -> None:
    """A 7/0 ablation (p = 1/64) promotes at the default α = 0.05 and holds at α = 0.01; lc:x's leave-one-out
    lift (about +0.27) promotes at the default margin and holds at a margin of 0.9."""
    causal_trials = paired(7, 0)
    plain = [Trial("m", "workspace", f"e{i}", "ws", True, frozenset({"lc:x"})) for i in range(2)]
    plain += [Trial("m", "rules:lc:y", f"e{i}", "ws", i == 2, frozenset({"lc:y"})) for i in (2, 3, 4, 5)]
    trials = causal_trials + plain
    default = {v.rule_id: v.verdict for v in lesson_verdicts(trials)}
    assert default[RULE] is LessonVerdict.PROMOTE and default["lc:x"] is LessonVerdict.PROMOTE
    strict = {v.rule_id: v.verdict for v in lesson_verdicts(trials, AblationPolicy(alpha=0.01),
                                                            LiftPolicy(promote_margin=0.9))}
    assert strict[RULE] is LessonVerdict.HOLD and strict["lc:x"] is LessonVerdict.HOLD
    loo = {v.rule_id: v.verdict for v in leave_one_out_verdicts(trials, LiftPolicy(promote_margin=0.9))}
    assert loo["lc:x"] is LessonVerdict.HOLD


def test_leave_one_out_verdicts_depend_on_every_rule_in_the_baseline() -> None:
    outcomes = lift_world([1.0, 1.0], [0.0, 0.0])
    for verdict in lift_verdicts(outcomes):
        assert verdict.depends_on == frozenset({("ws", RULE), ("ws", "lc:other")})


def test_outcomes_are_keyed_by_model_memory_and_decision() -> None:
    [outcome] = outcomes_from_trials([Trial("m1", "workspace", "d7", "ws", True, frozenset({RULE}))])
    assert outcome == LessonOutcome("m1|workspace|d7", "ws", 1.0, frozenset({RULE}))


def record(workspace: str, memory: str, decision: str, correct: bool, rules: list[str]) -> ResultRecord:
    return ResultRecord(
        arm=memory, decision_id=decision, stratum="verified_recovery", cluster="c", workspace=workspace, model="m",
        memory=memory, parsed=ParsedResponse(outcome=ParseOutcome.OK), score=DecisionScore(joint_correct=correct),
        injected_rule_ids=rules, finished_at=datetime(2026, 8, 21, tzinfo=UTC))


def ablated_records(workspace: str, helps: bool) -> list[ResultRecord]:
    """8 decisions where lc:brief decides every answer: right with it when it `helps`, wrong otherwise."""
    return [r for i in range(8) for r in (record(workspace, "workspace", f"{workspace}-d{i}", helps, ["lc:brief"]),
                                          record(workspace, "workspace-minus:lc:brief", f"{workspace}-d{i}", not helps,
                                                 []))]


def test_a_plan_edits_every_workspace_with_evictions_and_only_those(tmp_path: Path) -> None:
    roots = {}
    for workspace in ("ws1", "ws2"):
        root = tmp_path / workspace
        (root / "rules").mkdir(parents=True)
        (root / LC_FILE).write_text("## Rules\n- Be brief. <!-- lc:brief evidence:user-explicit -->\n")
        roots[workspace] = root
    records = ablated_records("ws1", False) + ablated_records("ws2", False) + ablated_records("ws3", True)
    today = date(2026, 8, 21)
    plan = plan_lessons(records, roots, today)  # ws3 (a promotion only) needs no memory directory
    assert sorted(plan.diffs) == ["ws1", "ws2"]
    assert {v.workspace: v.verdict for v in plan.verdicts} == {"ws1": LessonVerdict.EVICT, "ws2": LessonVerdict.EVICT,
                                                               "ws3": LessonVerdict.PROMOTE}
    changed = apply_plan(plan, roots, today)
    assert changed == [roots["ws1"] / LC_FILE, roots["ws1"] / LOG_FILE, roots["ws2"] / LC_FILE, roots["ws2"] / LOG_FILE]
    held = plan_lessons(records, roots, today, AblationPolicy(alpha=0.001), LiftPolicy())
    assert held.diffs == {} and {v.verdict for v in held.verdicts} == {LessonVerdict.HOLD}


def test_a_plan_uses_the_lift_policy_for_rules_without_ablations() -> None:
    """lc:a: right twice, lift +0.5; lc:b: once right once wrong, lift −0.5. With evictions out of reach
    (margin 2) lc:a promotes at the default promote margin and holds at 2 (nothing to edit either way)."""
    records = [record("ws", "workspace", f"d{i}", i != 3, ["lc:a"] if i < 2 else ["lc:b"]) for i in range(4)]
    today = date(2026, 8, 21)
    loose = plan_lessons(records, {}, today, lift=LiftPolicy(evict_margin=2.0))
    assert {v.rule_id: v.verdict for v in loose.verdicts} == {"lc:a": LessonVerdict.PROMOTE, "lc:b": LessonVerdict.HOLD}
    strict = plan_lessons(records, {}, today, lift=LiftPolicy(promote_margin=2.0, evict_margin=2.0))
    assert {v.verdict for v in strict.verdicts} == {LessonVerdict.HOLD}


# ── soft eviction: the exact bytes of each edit ─────────────────────────────

BRIEF = "- Be brief. <!-- lc:brief evidence:user-explicit -->"
EVICT_BRIEF = RuleVerdict("lc:brief", "ws", LessonVerdict.EVICT, "leave-one-out", HARMFUL,
                          LiftEvidence(4, 6, 0.25, 0.75, -0.5))
TODAY = date(2026, 8, 21)


def memory(tmp_path: Path, rules: bytes, log: bytes | None = None) -> Path:
    (tmp_path / LC_FILE).parent.mkdir(parents=True)
    (tmp_path / LC_FILE).write_bytes(rules)
    if log is not None:
        (tmp_path / LOG_FILE).parent.mkdir(parents=True)
        (tmp_path / LOG_FILE).write_bytes(log)
    return tmp_path


def log_line(newline: str = "\n") -> str:
    return f"- lc:brief: retired ({HARMFUL}; {EVICT_BRIEF.evidence.summary()}), 2026-08-21{newline}"


def test_a_file_without_a_final_newline_gets_one_before_the_new_section(tmp_path: Path) -> None:
    root = memory(tmp_path, f"## Rules\n{BRIEF}\n## Pending\n- x".encode())
    apply_edits([EVICT_BRIEF], root, TODAY)
    assert (root / LC_FILE).read_text() == f"## Rules\n## Pending\n- x\n\n## Retired\n{BRIEF}\n"


def test_a_moved_last_line_without_a_newline_gets_one(tmp_path: Path) -> None:
    root = memory(tmp_path, f"## Rules\n{BRIEF}".encode())
    apply_edits([EVICT_BRIEF], root, TODAY)
    assert (root / LC_FILE).read_text() == f"## Rules\n\n## Retired\n{BRIEF}\n"


def test_crlf_logs_get_crlf_lines_and_lf_logs_lf(tmp_path: Path) -> None:
    root = memory(tmp_path, f"## Rules\r\n{BRIEF}\r\n".encode(), b"# Log\r\n## Retired\r\n- lc:old: retired\r\n")
    apply_edits([EVICT_BRIEF], root, TODAY)
    assert (root / LOG_FILE).read_bytes().decode() == "# Log\r\n## Retired\r\n- lc:old: retired\r\n" + log_line("\r\n")
    assert (root / LC_FILE).read_bytes().decode() == f"## Rules\r\n\r\n## Retired\r\n{BRIEF}\r\n"


def test_new_retirements_go_after_the_sections_last_entry_before_blank_lines_and_the_next_heading(
        tmp_path: Path) -> None:
    rules = f"## Rules\n{BRIEF}\n## Retired  \n- Old. <!-- lc:old evidence:user-explicit -->\n\n\n## Notes\nn\n"
    root = memory(tmp_path, rules.encode(), b"## Retired\n## Other\n")
    apply_edits([EVICT_BRIEF], root, TODAY)
    assert (root / LC_FILE).read_text() == (
        f"## Rules\n## Retired  \n- Old. <!-- lc:old evidence:user-explicit -->\n{BRIEF}\n\n\n## Notes\nn\n")
    assert (root / LOG_FILE).read_text() == "## Retired\n" + log_line() + "## Other\n"


def test_an_empty_retired_section_right_before_blank_lines(tmp_path: Path) -> None:
    root = memory(tmp_path, f"## Retired\n\n\n## Rules\n{BRIEF}\n".encode())
    apply_edits([EVICT_BRIEF], root, TODAY)
    assert (root / LC_FILE).read_text() == f"## Retired\n{BRIEF}\n\n\n## Rules\n"


def test_files_that_cannot_be_edited_say_why(tmp_path: Path) -> None:
    root = memory(tmp_path, b"## Rules\n- Caf\xe9. <!-- lc:brief evidence:user-explicit -->\n")
    with pytest.raises(LessonError, match=r"learned-corrections.md: not valid UTF-8 \(byte 14\); fix it before editing"):
        apply_edits([EVICT_BRIEF], root, TODAY)
    (root / LC_FILE).write_text(f"## Rules\n{BRIEF}\n")
    (root / LOG_FILE).parent.mkdir(parents=True)
    (root / LOG_FILE).write_bytes(b"\xff")
    with pytest.raises(LessonError, match="corrections-log.md: not valid UTF-8"):
        apply_edits([EVICT_BRIEF], root, TODAY)


def test_a_tie_never_promotes_even_where_every_p_rejects() -> None:
    """3/3 has points 0: at α = 1 the test 'rejects', but a rule with no effect is held."""
    assert causal(paired(3, 3), AblationPolicy(alpha=1.0)) is LessonVerdict.HOLD


def test_the_causal_interval_is_at_the_policys_confidence() -> None:
    [wide] = causal_verdicts(paired(6, 1, ties=5), AblationPolicy(confidence=0.99))
    [usual] = causal_verdicts(paired(6, 1, ties=5), AblationPolicy())
    assert isinstance(wide.evidence, AblationEvidence) and isinstance(usual.evidence, AblationEvidence)
    expected = paired_comparison([(False, True)] * 6 + [(True, False)] + [(True, True)] * 5, 0.99)
    assert wide.evidence.comparison == expected
    assert wide.evidence.comparison.ci_low < usual.evidence.comparison.ci_low  # type: ignore[operator]


def test_recorded_verdicts_carry_their_evidence_and_every_rule(tmp_path: Path) -> None:
    verdicts = causal_verdicts(paired(7, 0)) + lift_verdicts(lift_world([1.0, 1.0], [0.0, 0.0]))
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        ids = record_verdicts(ledger, "run-1", verdicts)
        assert len(ids) == 3
        uses = {u.subject: u for u in ledger.trace(RULE, "ws").verdicts}
        assert set(uses) == {f"ws/{RULE}@m", f"ws/{RULE}", "ws/lc:other"}  # leave-one-out: every rule
        causal_use = uses[f"ws/{RULE}@m"].evidence
        assert (causal_use["method"], causal_use["reason"], causal_use["forced"]) == ("ablation", HELPFUL, False)
        assert causal_use["summary"] == verdicts[0].summary() and causal_use["model"] == "m"
        loo = uses[f"ws/{RULE}"].evidence
        assert (loo["method"], loo["forced"], loo["lift"]) == ("leave-one-out", False, 1.0)
        assert ledger.trace(RULE, "elsewhere").verdicts == ()


def test_a_verdict_always_depends_on_its_own_rule(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        [verdict_id] = record_verdicts(ledger, "run-1", [EVICT_BRIEF])  # depends_on left empty
        [use] = ledger.trace("lc:brief", "ws").verdicts
        assert (use.id, use.subject, use.verdict) == (verdict_id, "ws/lc:brief", "evict")


def test_an_effect_of_less_than_one_point_still_promotes_at_a_zero_margin() -> None:
    """10 wins in 2000 decisions: +0.5 points, and 10/0 rejects (p = 2/2¹⁰) at the default α."""
    [verdict] = causal_verdicts(paired(10, 0, ties=1990), AblationPolicy())
    assert verdict.evidence.comparison.points == 0.5  # type: ignore[union-attr]
    assert (verdict.verdict, verdict.reason) == (LessonVerdict.PROMOTE, HELPFUL)
    [held] = causal_verdicts(paired(4, 3), AblationPolicy())
    assert (held.verdict, held.reason) == (LessonVerdict.HOLD, "no significant effect beyond the margin")


def test_a_causal_verdict_depends_on_every_rule_any_of_its_pairs_carried() -> None:
    minus = f"workspace-minus:{RULE}"
    trials = [Trial("m", "workspace", "d0", "ws", True, frozenset({RULE, "lc:a"})),
              Trial("m", minus, "d0", "ws", False, frozenset({"lc:a"})),
              Trial("m", "workspace", "d1", "ws", True, frozenset({RULE, "lc:b"})),
              Trial("m", minus, "d1", "ws", False, frozenset({"lc:b"}))]
    [verdict] = causal_verdicts(trials)
    assert verdict.depends_on == {("ws", RULE), ("ws", "lc:a"), ("ws", "lc:b")}


def test_two_trials_of_one_arm_on_one_decision_are_refused_naming_it() -> None:
    twice = paired(1, 0) + [Trial("m", f"workspace-minus:{RULE}", "d0", "ws", True, frozenset({"lc:other"}))]
    with pytest.raises(LessonError, match=rf"^decision d0: two 'workspace-minus:{RULE}' trials for model m; "
                                          "judge each pair of arms separately$"):
        causal_verdicts(twice)
    with pytest.raises(LessonError, match=r"^decision d0: "):
        causal_verdicts([Trial("m", "workspace-plus:x", "d0", "ws", True, frozenset())])


def test_summaries_say_what_the_evidence_was_and_whether_the_verdict_was_forced() -> None:
    assert EVICT_BRIEF.summary() == ("ws lc:brief: evict, eval-gate:harmful; leave-one-out: mean 0.250 over 4 trials "
                                     "with it vs 0.750 over 6 without, lift -0.500")
    never_absent = RuleVerdict("lc:brief", "ws", LessonVerdict.EVICT, "leave-one-out", INCONCLUSIVE,
                               LiftEvidence(5, 0, 1.0, None, None), forced=True)
    assert never_absent.summary() == ("ws lc:brief: evict (forced at max trials), eval-gate:inconclusive; "
                                      "leave-one-out: mean 1.000 over 5 trials, never absent")


def test_an_eviction_after_one_already_retired_is_still_made(tmp_path: Path) -> None:
    root = memory(tmp_path, f"## Rules\n{BRIEF}\n## Retired\n- Old. <!-- lc:old evidence:user-explicit -->\n".encode())
    old = RuleVerdict("lc:old", "ws", LessonVerdict.EVICT, "leave-one-out", HARMFUL, EVICT_BRIEF.evidence)
    apply_edits([old, EVICT_BRIEF], root, TODAY)
    assert (root / LC_FILE).read_text() == (
        f"## Rules\n## Retired\n- Old. <!-- lc:old evidence:user-explicit -->\n{BRIEF}\n")


def test_lf_files_get_lf_lines_and_one_blank_line_before_the_next_heading_stays(tmp_path: Path) -> None:
    rules = f"## Rules\n{BRIEF}\n## Retired\n- Old. <!-- lc:old evidence:user-explicit -->\n\n## Notes\n"
    root = memory(tmp_path, rules.encode(), b"## Retired\n- lc:old: retired\n\n## Other\n")
    apply_edits([EVICT_BRIEF], root, TODAY)
    assert (root / LC_FILE).read_bytes().decode() == (
        f"## Rules\n## Retired\n- Old. <!-- lc:old evidence:user-explicit -->\n{BRIEF}\n\n## Notes\n")
    assert (root / LOG_FILE).read_bytes().decode() == "## Retired\n- lc:old: retired\n" + log_line() + "\n## Other\n"


def test_only_real_headings_open_or_end_the_retired_section(tmp_path: Path) -> None:
    """An indented `## …` line continues the rule above it: it is not a heading."""
    continued = "- Old. <!-- lc:old evidence:user-explicit -->\n  ## Retired (not a heading)\n"
    root = memory(tmp_path, f"## Rules\n{BRIEF}\n## Pending\n{continued}".encode())
    apply_edits([EVICT_BRIEF], root, TODAY)
    assert (root / LC_FILE).read_text() == f"## Rules\n## Pending\n{continued}\n## Retired\n{BRIEF}\n"
    inside = f"## Retired\n{continued}- Older. <!-- lc:older evidence:user-explicit -->\n"
    root = memory(tmp_path / "second", f"## Rules\n{BRIEF}\n{inside}".encode())
    apply_edits([EVICT_BRIEF], root, TODAY)
    assert (root / LC_FILE).read_text() == f"## Rules\n{inside}{BRIEF}\n"


def test_the_proposed_diff_creates_a_missing_log_from_dev_null(tmp_path: Path) -> None:
    root = memory(tmp_path, f"## Rules\n{BRIEF}\n".encode())
    assert propose_edits([EVICT_BRIEF], root, TODAY) == (
        f"--- a/{LC_FILE}\n+++ b/{LC_FILE}\n@@ -1,2 +1,4 @@\n ## Rules\n+\n+## Retired\n {BRIEF}\n"
        f"--- /dev/null\n+++ b/{LOG_FILE}\n@@ -0,0 +1,2 @@\n+## Retired\n+{log_line()}")
    assert not (root / LOG_FILE).exists()  # proposing writes nothing


def test_a_file_gone_before_its_edit_is_named(tmp_path: Path) -> None:
    with pytest.raises(LessonError, match=r"^\S*gone\.md: not found$"):
        _read_for_edit(tmp_path / "gone.md")

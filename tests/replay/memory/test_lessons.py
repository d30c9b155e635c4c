"""The lesson gate on synthetic data with known effects, and soft eviction as file edits."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections import Counter
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.records import DecisionScore, ParsedResponse, ParseOutcome, ResultRecord
from replay.memory.contract import check_memory
from replay.memory.files import LC_FILE, LOG_FILE, load_memory
from replay.memory.ledger import Ledger
from replay.memory.lessons import (
    HARMFUL,
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
    acceptable,
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
    trials_from_results,
)
from tests.support.hostile import special_files, within

FIXTURES = Path(__file__).parent / "fixtures" / "memory"
TODAY = date(2026, 8, 21)
RULES = frozenset({"lc:helpful", "lc:harmful", "lc:neutral"})


def trial(memory: str, decision: str, correct: bool, rules: frozenset[str] | set[str], workspace: str = "ws-a") -> Trial:
    return Trial("worker-base", memory, decision, workspace, correct, frozenset(rules))


def ablation_world() -> list[Trial]:
    """20 decisions of ws-a; the full memory gets d0–d9 right. Each ablation flips chosen pairs:

    * without lc:helpful: 9 wins for the rule (d0–d8 turn wrong), 1 loss (d10 turns right);
    * without lc:harmful: 0 wins, 7 losses (d10–d16 turn right);
    * without lc:neutral: 3 wins (d0–d2 turn wrong), 7 losses (d10–d16 turn right).
    """
    full = [i < 10 for i in range(20)]
    flips = {"lc:helpful": {*range(9), 10}, "lc:harmful": set(range(10, 17)), "lc:neutral": {0, 1, 2, *range(10, 17)}}
    trials = [trial("workspace", f"d{i}", full[i], RULES) for i in range(20)]
    for rule, flipped in flips.items():
        trials += [trial(f"workspace-minus:{rule}", f"d{i}", full[i] != (i in flipped), RULES - {rule}) for i in range(20)]
    return trials


def by_rule(verdicts: list[RuleVerdict]) -> dict[str, RuleVerdict]:
    return {v.rule_id: v for v in verdicts}


class TestCausal:
    def test_known_effects(self) -> None:
        verdicts = by_rule(causal_verdicts(ablation_world()))
        helpful, harmful, neutral = verdicts["lc:helpful"], verdicts["lc:harmful"], verdicts["lc:neutral"]
        assert (helpful.verdict, harmful.verdict, neutral.verdict) == (LessonVerdict.PROMOTE, LessonVerdict.EVICT, LessonVerdict.HOLD)
        assert harmful.reason == HARMFUL
        # Sign-test p-values published in DESIGN §4: 9/1, 0/7, 3/7.
        assert helpful.evidence.comparison.p_value == 0.021484375
        assert harmful.evidence.comparison.p_value == 0.015625
        assert neutral.evidence.comparison.p_value == 0.34375
        assert (helpful.evidence.comparison.wins, helpful.evidence.comparison.losses) == (9, 1)
        assert helpful.evidence.comparison.points == 100 * 8 / 20
        assert harmful.evidence.comparison.points == -100 * 7 / 20
        assert helpful.evidence.comparison.ci_low > 0 > harmful.evidence.comparison.ci_high
        assert all(v.method == "ablation" and v.workspace == "ws-a" for v in verdicts.values())

    def test_margin_holds_a_significant_but_small_effect(self) -> None:
        verdicts = by_rule(causal_verdicts(ablation_world(), AblationPolicy(promote_margin_points=50, evict_margin_points=50)))
        assert verdicts["lc:helpful"].verdict is LessonVerdict.HOLD
        assert verdicts["lc:harmful"].verdict is LessonVerdict.HOLD

    def test_stricter_alpha_holds(self) -> None:
        verdicts = by_rule(causal_verdicts(ablation_world(), AblationPolicy(alpha=0.01)))
        assert {v.verdict for v in verdicts.values()} == {LessonVerdict.HOLD}

    def test_only_decisions_whose_full_arm_carried_the_rule_are_paired(self) -> None:
        world = ablation_world()
        other_ws = [trial("workspace", "e1", True, {"lc:other"}, "ws-b"), trial("workspace-minus:lc:helpful", "e1", False, {"lc:other"}, "ws-b")]
        verdicts = causal_verdicts(world + other_ws)
        assert by_rule(verdicts)["lc:helpful"].evidence.comparison.n == 20
        assert {v.workspace for v in verdicts} == {"ws-a"}

    def test_ablation_arm_that_carried_its_rule_is_an_error(self) -> None:
        with pytest.raises(LessonError, match="carried the rule it should leave out"):
            causal_verdicts([trial("workspace", "d0", True, RULES), trial("workspace-minus:lc:helpful", "d0", True, RULES)])

    def test_ambiguous_pairs_are_an_error(self) -> None:
        with pytest.raises(LessonError, match="two 'workspace' trials"):
            causal_verdicts([trial("workspace", "d0", True, RULES), trial("workspace", "d0", False, RULES)])


class TestLeaveOneOut:
    # The shape of 000: a cold start, clean learning, a poisoned run, recovery.
    RUNS = [
        LessonOutcome("r1", "ws", 0.00, frozenset()),
        LessonOutcome("r2", "ws", 1.00, frozenset({"lc:l1"})),
        LessonOutcome("r3", "ws", 0.92, frozenset({"lc:l1", "lc:l2"})),
        LessonOutcome("r4", "ws", 0.50, frozenset({"lc:l1", "lc:l2", "lc:p1"})),
        LessonOutcome("r5", "ws", 0.60, frozenset({"lc:l2", "lc:p1"})),
        LessonOutcome("r6", "ws", 0.97, frozenset({"lc:l1", "lc:l2"})),
    ]

    def test_seed_000_poison_evicted_genuine_promoted_innocent_blamed(self) -> None:
        verdicts = by_rule(lift_verdicts(self.RUNS, LiftPolicy(min_trials=2, promote_margin=0.05, evict_margin=0.05)))
        p1, l1, l2 = verdicts["lc:p1"], verdicts["lc:l1"], verdicts["lc:l2"]
        assert p1.verdict is LessonVerdict.EVICT and p1.reason == HARMFUL
        assert p1.evidence == LiftEvidence(2, 3, pytest.approx(0.55), pytest.approx(2.89 / 3), pytest.approx(0.55 - 2.89 / 3))
        assert l1.verdict is LessonVerdict.PROMOTE
        assert l1.evidence.carried_mean == pytest.approx(3.39 / 4) and l1.evidence.absent_mean == pytest.approx(0.60)
        # lc:l2 is genuine but shared the crater run: leave-one-out blames it (000's asterisk).
        assert l2.verdict is LessonVerdict.EVICT
        assert l2.evidence.lift == pytest.approx(2.99 / 4 - 1.00)

    def test_runs_without_any_rule_are_not_recorded(self) -> None:
        without_cold_start = lift_verdicts(self.RUNS[1:])
        assert lift_verdicts(self.RUNS) == without_cold_start
        l1 = by_rule(without_cold_start)["lc:l1"]
        assert l1.evidence.absent == 1

    def test_min_trials_holds(self) -> None:
        verdicts = by_rule(lift_verdicts(self.RUNS, LiftPolicy(min_trials=3)))
        assert verdicts["lc:p1"].verdict is LessonVerdict.HOLD
        assert verdicts["lc:p1"].reason == "fewer than 3 trials"

    def test_within_margins_holds(self) -> None:
        runs = [LessonOutcome("a", "ws", 0.80, frozenset({"lc:x", "lc:y"})), LessonOutcome("b", "ws", 0.82, frozenset({"lc:x", "lc:y"})),
                LessonOutcome("c", "ws", 0.80, frozenset({"lc:y"}))]
        assert by_rule(lift_verdicts(runs))["lc:x"].verdict is LessonVerdict.HOLD

    def test_never_absent_holds_until_max_trials_forces_a_verdict(self) -> None:
        runs = [LessonOutcome(f"r{i}", "ws", 0.9, frozenset({"lc:always"})) for i in range(5)]
        (held,) = lift_verdicts(runs, LiftPolicy(max_trials=6))
        assert held.verdict is LessonVerdict.HOLD and held.reason == "never absent: no leave-one-out baseline"
        (forced,) = lift_verdicts(runs, LiftPolicy(max_trials=5))
        assert forced.forced and forced.verdict is LessonVerdict.EVICT and forced.reason == INCONCLUSIVE

    def test_max_trials_forces_promotion_of_a_small_positive_lift(self) -> None:
        runs = [LessonOutcome(f"r{i}", "ws", 0.81, frozenset({"lc:x", "lc:y"})) for i in range(4)] + [LessonOutcome("z", "ws", 0.80, frozenset({"lc:y"}))]
        verdict = by_rule(lift_verdicts(runs, LiftPolicy(max_trials=4)))["lc:x"]
        assert verdict.forced and verdict.verdict is LessonVerdict.PROMOTE

    def test_same_id_in_two_workspaces_is_two_rules(self) -> None:
        runs = [LessonOutcome("a", "ws-a", 1.0, frozenset({"lc:x"})), LessonOutcome("b", "ws-a", 1.0, frozenset({"lc:x"})),
                LessonOutcome("c", "ws-b", 0.0, frozenset({"lc:x"})), LessonOutcome("d", "ws-b", 0.0, frozenset({"lc:x"}))]
        verdicts = {(v.workspace, v.rule_id): v.verdict for v in lift_verdicts(runs)}
        assert verdicts == {("ws-a", "lc:x"): LessonVerdict.PROMOTE, ("ws-b", "lc:x"): LessonVerdict.EVICT}


class TestCoInjection:
    """ws-a always injects lc:poison and lc:innocent together; only lc:poison hurts."""

    @staticmethod
    def world() -> list[Trial]:
        trials = []
        for i in range(10):
            trials.append(trial("withheld", f"a{i}", False, set()))
            trials.append(trial("workspace", f"a{i}", False, {"lc:poison", "lc:innocent"}))
            trials.append(trial("workspace-minus:lc:poison", f"a{i}", True, {"lc:innocent"}))
            trials.append(trial("workspace-minus:lc:innocent", f"a{i}", False, {"lc:poison"}))
            trials.append(trial("workspace", f"b{i}", True, {"lc:good"}, "ws-b"))
        return trials

    def test_leave_one_out_blames_the_innocent_rule(self) -> None:
        plain = [t for t in self.world() if not t.memory.startswith("workspace-minus")]
        verdicts = by_rule(lift_verdicts(outcomes_from_trials(plain)))
        assert verdicts["lc:poison"].verdict is LessonVerdict.EVICT
        assert verdicts["lc:innocent"].verdict is LessonVerdict.EVICT
        assert verdicts["lc:good"].verdict is LessonVerdict.PROMOTE

    def test_paired_ablation_does_not(self) -> None:
        verdicts = by_rule(causal_verdicts(self.world()))
        assert verdicts["lc:poison"].verdict is LessonVerdict.EVICT
        assert verdicts["lc:poison"].evidence.comparison.p_value == 2 / 2**10
        assert verdicts["lc:innocent"].verdict is LessonVerdict.HOLD
        assert verdicts["lc:innocent"].evidence.comparison.wins + verdicts["lc:innocent"].evidence.comparison.losses == 0

    def test_combined_gate_is_causal_where_it_can_be(self) -> None:
        verdicts = by_rule(lesson_verdicts(self.world()))
        assert {k: (v.method, v.verdict) for k, v in verdicts.items()} == {
            "lc:poison": ("ablation", LessonVerdict.EVICT),
            "lc:innocent": ("ablation", LessonVerdict.HOLD),
            "lc:good": ("leave-one-out", LessonVerdict.PROMOTE),
        }


def _result(decision: str, stratum: str, score: DecisionScore, memory: str = "workspace",
            rules: frozenset[str] = frozenset({"lc:a"})) -> ResultRecord:
    return ResultRecord(
        arm=memory, decision_id=decision, stratum=stratum, cluster="c", workspace="ws-a", model="m", memory=memory,
        parsed=ParsedResponse(outcome=ParseOutcome.OK), score=score, injected_rule_ids=sorted(rules),
        finished_at=datetime(2026, 8, 21, tzinfo=UTC),
    )


def test_trials_judge_targets_by_joint_correctness_and_known_failures_by_shape_repeats() -> None:
    recovery, failure = "verified_recovery", "known_failure"
    records = [
        _result("d1", recovery, DecisionScore(joint_correct=True)),
        _result("d2", recovery, DecisionScore(joint_correct=False)),
        # Known failures: acceptable unless the failed tool is called again with its key set.
        _result("k1", failure, DecisionScore(tool_repeat=True, shape_repeat=True, exact_repeat=None)),
        _result("k2", failure, DecisionScore(tool_repeat=True, shape_repeat=False, exact_repeat=False)),
        _result("k3", failure, DecisionScore(tool_repeat=False, shape_repeat=False, exact_repeat=False)),
        _result("u1", recovery, DecisionScore()),  # nothing scored: nothing to judge
    ]
    assert [(t.decision_id, t.acceptable) for t in trials_from_results(records)] == [
        ("d1", True), ("d2", False), ("k1", False), ("k2", True), ("k3", True)]
    assert acceptable(_result("b", recovery, DecisionScore(joint_correct=True, shape_repeat=True))) is True


def test_a_rule_that_makes_known_failures_repeat_is_evicted_causally() -> None:
    # Six known failures: without lc:a no repeat, with it the failed call again each time (0/6, p = 0.03125).
    records = []
    for i in range(6):
        records.append(_result(f"k{i}", "known_failure", DecisionScore(tool_repeat=True, shape_repeat=True)))
        records.append(_result(f"k{i}", "known_failure", DecisionScore(tool_repeat=False, shape_repeat=False),
                               memory="workspace-minus:lc:a", rules=frozenset()))
    trials = trials_from_results(records)
    (verdict,) = causal_verdicts(trials)
    assert (verdict.rule_id, verdict.verdict) == ("lc:a", LessonVerdict.EVICT)
    assert isinstance(verdict.evidence, AblationEvidence)
    assert (verdict.evidence.comparison.wins, verdict.evidence.comparison.losses) == (0, 6)
    # Leave-one-out is scored on the same outcome: the plain arm always carried lc:a, so it is held.
    (loo,) = leave_one_out_verdicts(trials)
    assert isinstance(loo.evidence, LiftEvidence) and loo.evidence.carried == 6 and loo.evidence.carried_mean == 0.0


class TestEdits:
    @pytest.fixture
    def workspace(self, tmp_path: Path) -> Path:
        return Path(shutil.copytree(FIXTURES / "ws-a", tmp_path / "ws-a"))

    @staticmethod
    def evict(rule_id: str, workspace: str = "ws-a") -> RuleVerdict:
        return RuleVerdict(rule_id, workspace, LessonVerdict.EVICT, "leave-one-out", HARMFUL, LiftEvidence(4, 6, 0.25, 0.75, -0.5))

    def test_propose_writes_nothing(self, workspace: Path) -> None:
        before = {p: p.read_bytes() for p in workspace.rglob("*.md")}
        diff = propose_edits([self.evict("lc:anchor-placement")], workspace, TODAY)
        assert diff.startswith(f"--- a/{LC_FILE}\n+++ b/{LC_FILE}\n")
        assert f"--- a/{LOG_FILE}\n+++ b/{LOG_FILE}\n" in diff
        assert "-- Never place an anchor inside a bulleted list item." in diff
        assert "+- Never place an anchor inside a bulleted list item." in diff
        assert {p: p.read_bytes() for p in workspace.rglob("*.md")} == before

    def test_apply_moves_rules_to_retired_and_logs_them(self, workspace: Path) -> None:
        lc, log = workspace / LC_FILE, workspace / LOG_FILE
        lc_before, log_before = lc.read_text().splitlines(), log.read_text().splitlines()
        verdicts = [self.evict("lc:anchor-placement"), self.evict("lc:invoice-date-filter")]
        changed = apply_edits(verdicts, workspace, TODAY)
        assert changed == [lc, log]
        lc_after, log_after = lc.read_text().splitlines(), log.read_text().splitlines()
        assert Counter(lc_after) == Counter(lc_before)  # a move: every line kept, none added
        retired_at = lc_after.index("## Retired")
        assert lc_after[retired_at + 1 :] == [
            "- Search invoices by customer name. <!-- lc:invoice-by-name evidence:user-explicit -->",
            "- Never place an anchor inside a bulleted list item. <!-- lc:anchor-placement evidence:user-explicit -->",
            "- Always pass filter.date.from when listing invoices. <!-- lc:invoice-date-filter evidence:user-explicit -->",
            '  Wrong: list_invoices({}) · Right: list_invoices({"filter": {"date": {"from": "2026-01-01"}}})',
        ]
        added = [line for line in log_after if line not in log_before]
        assert len(log_after) == len(log_before) + 2
        assert added[0].startswith("- lc:anchor-placement: retired (eval-gate:harmful; leave-one-out: mean 0.250")
        assert added[0].endswith("), 2026-08-21")
        memory = load_memory(workspace)
        assert [r.id for r in memory.authorised_rules()] == ["lc:invoice-by-id"]
        assert {t.id: t.on for t in memory.retirements}["lc:anchor-placement"] == TODAY
        assert not any("retired" in p.message for p in check_memory(workspace))

    def test_diff_is_a_patch_that_applies(self, workspace: Path, tmp_path: Path) -> None:
        diff = propose_edits([self.evict("lc:invoice-by-id")], workspace, TODAY)
        expected = Path(shutil.copytree(workspace, tmp_path / "expected"))
        apply_edits([self.evict("lc:invoice-by-id")], expected, TODAY)
        subprocess.run(["patch", "-p1", "--quiet"], input=diff, text=True, cwd=workspace, check=True)
        for path in expected.rglob("*.md"):
            assert (workspace / path.relative_to(expected)).read_text() == path.read_text()

    def test_idempotent(self, workspace: Path) -> None:
        apply_edits([self.evict("lc:anchor-placement")], workspace, TODAY)
        assert propose_edits([self.evict("lc:anchor-placement")], workspace, TODAY) == ""

    def test_only_evictions_of_file_rules_edit(self, workspace: Path) -> None:
        promote = RuleVerdict("lc:invoice-by-id", "ws-a", LessonVerdict.PROMOTE, "leave-one-out", "eval-gate:helpful", LiftEvidence(4, 6, 0.9, 0.5, 0.4))
        synthetic = self.evict("rule:0123456789ab")
        assert propose_edits([promote, synthetic], workspace, TODAY) == ""

    def test_unknown_rule_is_an_error(self, workspace: Path) -> None:
        with pytest.raises(LessonError, match="lc:nope is not a rule in force"):
            propose_edits([self.evict("lc:nope")], workspace, TODAY)

    def test_retired_sections_are_created_when_absent(self, tmp_path: Path) -> None:
        (tmp_path / "rules").mkdir()
        (tmp_path / LC_FILE).write_text("## Rules\n- Be brief. <!-- lc:brief evidence:user-explicit -->\n\n## Pending\n")
        apply_edits([self.evict("lc:brief")], tmp_path, TODAY)
        assert (tmp_path / LC_FILE).read_text() == "## Rules\n\n## Pending\n\n## Retired\n- Be brief. <!-- lc:brief evidence:user-explicit -->\n"
        log = (tmp_path / LOG_FILE).read_text().splitlines()
        assert log[0] == "## Retired" and log[1].startswith("- lc:brief: retired (eval-gate:harmful;")
        assert [t.id for t in load_memory(tmp_path).retirements] == ["lc:brief"]

    def test_crlf_files_keep_their_line_endings(self, tmp_path: Path) -> None:
        (tmp_path / "rules").mkdir()
        (tmp_path / LC_FILE).write_bytes(b"## Rules\r\n- Be brief. <!-- lc:brief evidence:user-explicit -->\r\n## Pending\r\n## Retired\r\n")
        apply_edits([self.evict("lc:brief")], tmp_path, TODAY)
        assert (tmp_path / LC_FILE).read_bytes() == b"## Rules\r\n## Pending\r\n## Retired\r\n- Be brief. <!-- lc:brief evidence:user-explicit -->\r\n"


    def test_a_file_to_edit_that_is_no_regular_file_is_an_error_never_waited_on(self, tmp_path: Path) -> None:
        """The tenant writes its memory: a corrections log that is a FIFO would hold the edit for good."""
        (tmp_path / "rules").mkdir()
        (tmp_path / LC_FILE).write_text("## Rules\n- Be brief. <!-- lc:brief evidence:user-explicit -->\n")
        special_files([tmp_path / LOG_FILE])
        with pytest.raises(LessonError, match=r"corrections-log.md: not a regular file \(a FIFO\); not edited"):
            within(20, lambda: propose_edits([self.evict("lc:brief")], tmp_path, TODAY))


class TestRunEntryPoints:
    """From a run's results to verdicts, ledger rows and per-workspace diffs."""

    FULL = ["lc:anchor-placement", "lc:invoice-by-id", "lc:invoice-date-filter"]

    @classmethod
    def records(cls) -> list[ResultRecord]:
        def record(memory: str, decision: str, correct: bool, rules: list[str]) -> ResultRecord:
            return ResultRecord(
                arm=memory, decision_id=decision, stratum="verified_recovery", cluster="c", workspace="ws-a", model="m",
                memory=memory, parsed=ParsedResponse(outcome=ParseOutcome.OK), score=DecisionScore(joint_correct=correct),
                injected_rule_ids=rules, finished_at=datetime(2026, 8, 21, tzinfo=UTC),
            )

        minus = [r for r in cls.FULL if r != "lc:anchor-placement"]
        records = []
        for i in range(8):
            records.append(record("workspace", f"d{i}", False, cls.FULL))
            records.append(record("workspace-minus:lc:anchor-placement", f"d{i}", True, minus))
        return records

    def test_plan_and_apply(self, tmp_path: Path) -> None:
        root = Path(shutil.copytree(FIXTURES / "ws-a", tmp_path / "ws-a"))
        plan = plan_lessons(self.records(), {"ws-a": root}, TODAY)
        verdict = by_rule(list(plan.verdicts))["lc:anchor-placement"]
        assert (verdict.verdict, verdict.method) == (LessonVerdict.EVICT, "ablation")
        # The other rules were never absent from a plain arm: leave-one-out holds them.
        assert {(v.rule_id, v.verdict, v.method) for v in plan.verdicts if v is not verdict} == {
            ("lc:invoice-by-id", LessonVerdict.HOLD, "leave-one-out"),
            ("lc:invoice-date-filter", LessonVerdict.HOLD, "leave-one-out"),
        }
        assert verdict.evidence.comparison.p_value == 2 / 2**8
        assert list(plan.diffs) == ["ws-a"] and "+- lc:anchor-placement: retired (eval-gate:harmful; ablation on 8" in plan.diffs["ws-a"]
        assert load_memory(root).find("lc:anchor-placement")[0].authorised
        assert apply_plan(plan, {"ws-a": root}, TODAY) == [root / LC_FILE, root / LOG_FILE]
        assert not load_memory(root).find("lc:anchor-placement")[0].authorised

    def test_eviction_in_an_unmapped_workspace_is_an_error(self) -> None:
        with pytest.raises(LessonError, match="no memory directory known for workspace 'ws-a'"):
            plan_lessons(self.records(), {}, TODAY)

    def test_verdicts_in_the_ledger_depend_on_co_injected_rules(self, tmp_path: Path) -> None:
        verdicts = causal_verdicts(trials_from_results(self.records()))
        with Ledger(tmp_path / "ledger.sqlite") as ledger:
            (verdict_id,) = record_verdicts(ledger, "run-1", verdicts)
            (use,) = ledger.trace("lc:anchor-placement", "ws-a").verdicts
            assert (use.id, use.kind, use.subject, use.verdict) == (verdict_id, "lesson", "ws-a/lc:anchor-placement@m", "evict")
            assert use.evidence["comparison"]["losses"] == 8
            ledger.dispute("lc:invoice-by-id", "never said by a user")
            assert ledger.trace("lc:anchor-placement").verdicts[0].needs_rerun


RULE_FILE_BITS = st.sampled_from(
    ["## Rules", "## Pending", "## Retired", "## Pending — x", "# T", "## Other", "- ", "  ", "<!-- lc:a evidence:user-explicit -->",
     "<!-- lc:b evidence:user-explicit -->", "<!-- lc:a -->", "- lc:a: retired, 2026-01-01", "\n", "\r\n", "\u2028", "x"]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules=st.lists(RULE_FILE_BITS, max_size=40).map("".join), log=st.lists(RULE_FILE_BITS, max_size=20).map("".join))
def test_eviction_of_any_file_is_a_move(rules: str, log: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / LC_FILE).parent.mkdir(parents=True)
        (root / LC_FILE).write_text(rules, encoding="utf-8", newline="")
        (root / LOG_FILE).parent.mkdir(parents=True)
        (root / LOG_FILE).write_text(log, encoding="utf-8", newline="")
        evict = [TestEdits.evict(r.id) for r in load_memory(root).authorised_rules() if r.id]
        before = (root / LC_FILE).read_bytes().decode("utf-8").splitlines()
        apply_edits(evict, root, TODAY)
        after = (root / LC_FILE).read_bytes().decode("utf-8").splitlines()
        assert not load_memory(root).authorised_rules()
        assert not Counter(before) - Counter(after)  # nothing lost
        assert set(Counter(after) - Counter(before)) <= {"", "## Retired"}  # only a new section heading
        assert propose_edits(evict, root, TODAY) == ""

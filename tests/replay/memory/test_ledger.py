"""The outcome ledger: provenance of results, comparisons and verdicts; disputes."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.records import DecisionScore, ParsedResponse, ParseOutcome, ResultRecord
from replay.memory.ledger import Dispute, Ledger, LedgerError, RuleRef

NOW = datetime(2026, 8, 21, 12, 0, tzinfo=UTC)


def result(arm: str, decision: str, rules: list[str], correct: bool | None = True, workspace: str = "ws-a") -> ResultRecord:
    return ResultRecord(
        arm=arm,
        decision_id=decision,
        stratum="verified_recovery" if correct is not None else "known_failure",
        cluster="c1",
        workspace=workspace,
        model="worker-base",
        memory="workspace" if rules else "withheld",
        parsed=ParsedResponse(outcome=ParseOutcome.OK),
        score=DecisionScore(joint_correct=correct),
        injected_rule_ids=rules,
        finished_at=NOW,
    )


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    with Ledger(tmp_path / "ledger.sqlite") as opened:
        opened.ingest_results(
            "run-1",
            [
                result("base", "d1", [], correct=False),
                result("mem", "d1", ["lc:a", "lc:b"]),
                result("mem", "d2", ["lc:b"], correct=None),
                result("mem", "d3", ["lc:a"], workspace="ws-b"),
            ],
        )
        yield opened


class TestIngest:
    def test_wal_mode(self, ledger: Ledger) -> None:
        mode = sqlite3.connect(ledger.path).execute("PRAGMA journal_mode").fetchone()[0]
        assert mode == "wal"

    def test_reingesting_does_not_duplicate(self, ledger: Ledger) -> None:
        again = [result("mem", "d1", ["lc:a", "lc:b"]), result("mem", "d3", ["lc:a"], workspace="ws-b")]
        assert ledger.ingest_results("run-1", again) == 2
        assert len(ledger.trace("lc:a").results) == 2

    def test_reingesting_replaces_the_rules_a_result_carried(self, ledger: Ledger) -> None:
        ledger.ingest_results("run-1", [result("mem", "d1", ["lc:b"], correct=False)])
        assert [r.decision_id for r in ledger.trace("lc:a").results] == ["d3"]
        assert [r.correct for r in ledger.trace("lc:b").results] == [False, None]

    def test_a_run_is_ingested_once_per_seal_and_named_with_its_directory(self, tmp_path: Path) -> None:
        with Ledger(tmp_path / "l.sqlite") as ledger:
            assert not ledger.knows_run("r", "a" * 64)
            assert ledger.ingest_run("r", tmp_path / "run", "a" * 64, [result("mem", "d1", ["lc:c"])]) == 1
            assert ledger.knows_run("r", "a" * 64) and not ledger.knows_run("r", "b" * 64)
            ledger.ingest_run("r", tmp_path / "run", "b" * 64, [result("mem", "d2", ["lc:c"])])  # resumed
            trace = ledger.trace("lc:c")
            assert [r.decision_id for r in trace.results] == ["d1", "d2"] and ledger.knows_run("r", "b" * 64)
            assert trace.runs == {"r": str(tmp_path / "run")}
            assert f"run r ({tmp_path / 'run'}): 2 result(s) in arm(s) mem (2)" in trace.format()

    def test_rules_of_a_runs_arms(self, ledger: Ledger) -> None:
        assert ledger.rules_of("run-1", ["mem"]) == {RuleRef("ws-a", "lc:a"), RuleRef("ws-a", "lc:b"),
                                                     RuleRef("ws-b", "lc:a")}
        assert ledger.rules_of("run-1", ["base"]) == frozenset() == ledger.rules_of("run-2", ["mem"])


class TestTrace:
    def test_trace_lists_results_comparisons_and_verdicts(self, ledger: Ledger) -> None:
        comparison = ledger.record_comparison("run-1", "base", "mem", {"points": 50.0})
        other = ledger.record_comparison("run-1", "base", "base2", {"points": 0.0})
        gate = ledger.record_verdict("run-1", "gate", "serious-candidate", "fail", {"failed": [1, 5]}, comparison_ids=[comparison])
        lesson = ledger.record_verdict("run-1", "lesson", "ws-a/lc:b", "hold", {"pairs": 3}, rules=[RuleRef("ws-a", "lc:b")])
        trace = ledger.trace("lc:a")
        assert [(r.arm, r.decision_id, r.workspace) for r in trace.results] == [("mem", "d1", "ws-a"), ("mem", "d3", "ws-b")]
        assert [c.id for c in trace.comparisons] == [comparison]
        assert trace.comparisons[0].summary == {"points": 50.0}
        assert [v.id for v in trace.verdicts] == [gate]
        assert [v.id for v in ledger.trace("lc:b").verdicts] == [gate, lesson]
        assert other not in [c.id for c in ledger.trace("lc:b").comparisons]

    def test_trace_in_one_workspace(self, ledger: Ledger) -> None:
        assert [r.decision_id for r in ledger.trace("lc:a", workspace="ws-b").results] == ["d3"]

    def test_recording_again_replaces(self, ledger: Ledger) -> None:
        first = ledger.record_comparison("run-1", "base", "mem", {"points": 1})
        second = ledger.record_comparison("run-1", "base", "mem", {"points": 2})
        assert first == second
        assert [c.summary for c in ledger.trace("lc:a").comparisons] == [{"points": 2}]
        v1 = ledger.record_verdict("run-1", "gate", "g", "fail", {}, rules=[RuleRef("ws-a", "lc:a")])
        v2 = ledger.record_verdict("run-1", "gate", "g", "pass", {}, rules=[RuleRef("ws-a", "lc:a")])
        assert v1 == v2 and [v.verdict for v in ledger.trace("lc:a").verdicts] == ["pass"]

    def test_verdict_on_unknown_comparison_is_an_error(self, ledger: Ledger) -> None:
        with pytest.raises(LedgerError, match="unknown comparison 99"):
            ledger.record_verdict("run-1", "gate", "g", "fail", {}, comparison_ids=[99])

    def test_unused_rule_has_empty_trace(self, ledger: Ledger) -> None:
        trace = ledger.trace("lc:zzz")
        assert (trace.results, trace.comparisons, trace.verdicts, trace.disputes, trace.reviews) == ((),) * 5


class TestDispute:
    def test_dispute_marks_everything_that_used_the_rule(self, ledger: Ledger) -> None:
        comparison = ledger.record_comparison("run-1", "base", "mem", {})
        ledger.record_verdict("run-1", "gate", "serious-candidate", "fail", {}, comparison_ids=[comparison])
        assert ledger.trace("lc:a").needs_rerun == 0
        trace = ledger.dispute("lc:a", "vendor claim, not a user instruction", at=NOW)
        assert trace.needs_rerun == 2 + 1 + 1
        assert all(item.needs_rerun for item in (*trace.results, *trace.comparisons, *trace.verdicts))
        assert trace.disputes[0].reason == "vendor claim, not a user instruction"
        assert trace.disputes[0].disputed_at == NOW

    def test_dispute_taints_what_shares_an_item_with_the_rule(self, ledger: Ledger) -> None:
        comparison = ledger.record_comparison("run-1", "base", "mem", {})
        ledger.dispute("lc:a", "bad")
        b = ledger.trace("lc:b")
        assert {(r.decision_id, r.needs_rerun) for r in b.results} == {("d1", True), ("d2", False)}
        assert [(c.id, c.needs_rerun) for c in b.comparisons] == [(comparison, True)]

    def test_dispute_in_one_workspace_leaves_the_other(self, ledger: Ledger) -> None:
        trace = ledger.dispute("lc:a", "bad", workspace="ws-b")
        assert [r.decision_id for r in trace.results] == ["d3"]
        assert {(r.decision_id, r.needs_rerun) for r in ledger.trace("lc:a").results} == {("d1", False), ("d3", True)}
        assert [d.ref for d in ledger.disputes()] == [RuleRef("ws-b", "lc:a")]
        assert ledger.trace("lc:a", workspace="ws-a").disputes == ()

    def test_disputes_now(self, ledger: Ledger) -> None:
        assert ledger.disputes() == ()
        ledger.dispute("lc:b", "bad", at=NOW)
        assert ledger.disputes() == (Dispute("lc:b", None, "bad", NOW),)
        assert ledger.disputes()[0].ref == "lc:b"

    def test_dispute_needs_a_reason(self, ledger: Ledger) -> None:
        with pytest.raises(LedgerError, match="needs a reason"):
            ledger.dispute("lc:a", "  ")
        ledger.dispute("lc:a", "bad")
        with pytest.raises(LedgerError, match="restoring lc:a needs a reason"):
            ledger.undispute("lc:a", "")


class TestUndispute:
    def test_a_restored_rule_needs_no_re_run_and_its_dispute_stays_in_the_history(self, ledger: Ledger) -> None:
        comparison = ledger.record_comparison("run-1", "base", "mem", {})
        ledger.dispute("lc:a", "vendor claim", at=NOW)
        trace = ledger.undispute("lc:a", "the user confirmed it", at=NOW + timedelta(hours=1))
        assert trace.needs_rerun == 0 and trace.disputes == () and ledger.disputes() == ()
        assert [(r.action, r.reason) for r in trace.reviews] == [("dispute", "vendor claim"),
                                                                 ("undispute", "the user confirmed it")]
        assert "disputed 2026-08-21 12:00: vendor claim\nrestored 2026-08-21 13:00: the user confirmed it" in trace.format()
        assert [c.id for c in trace.comparisons] == [comparison]

    def test_disputed_again_after_a_restoration(self, ledger: Ledger) -> None:
        ledger.dispute("lc:a", "first")
        ledger.undispute("lc:a", "fine")
        trace = ledger.dispute("lc:a", "wrong after all")
        assert trace.needs_rerun == 2 and [d.reason for d in trace.disputes] == ["wrong after all"]
        assert [r.action for r in trace.reviews] == ["dispute", "undispute", "dispute"]

    def test_only_the_dispute_of_the_same_scope_is_restored(self, ledger: Ledger) -> None:
        with pytest.raises(LedgerError, match="lc:a is not disputed in every workspace$"):
            ledger.undispute("lc:a", "fine")
        ledger.dispute("lc:a", "bad", workspace="ws-b")
        with pytest.raises(LedgerError, match="lc:a is not disputed in every workspace; its dispute to restore: "
                                              "--workspace ws-b"):
            ledger.undispute("lc:a", "fine")
        with pytest.raises(LedgerError, match="not disputed in ws-a alone"):
            ledger.undispute("lc:a", "fine", workspace="ws-a")
        ledger.undispute("lc:a", "fine", workspace="ws-b")
        assert ledger.disputes() == ()

    def test_a_ledger_from_before_undispute_keeps_its_disputes(self, tmp_path: Path) -> None:
        path = tmp_path / "old.sqlite"
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE disputes (rule_id TEXT NOT NULL, workspace TEXT NOT NULL, reason TEXT NOT NULL, "
                       "disputed_at TEXT NOT NULL, PRIMARY KEY (rule_id, workspace))")
            db.execute("INSERT INTO disputes VALUES ('lc:a', 'ws-a', 'old reason', ?)", (NOW.isoformat(),))
        db.close()
        with Ledger(path) as ledger:
            assert ledger.disputes() == (Dispute("lc:a", "ws-a", "old reason", NOW),)
        with Ledger(path) as ledger:  # moved once
            assert len(ledger.trace("lc:a").reviews) == 1

    def test_dispute_survives_reopening(self, tmp_path: Path) -> None:
        with Ledger(tmp_path / "l.sqlite") as ledger:
            ledger.ingest_results("r", [result("mem", "d1", ["lc:a"])])
            ledger.dispute("lc:a", "bad")
        with Ledger(tmp_path / "l.sqlite") as ledger:
            assert ledger.trace("lc:a").results[0].needs_rerun


def test_a_ledger_in_a_new_directory_is_created(tmp_path):
    with Ledger(tmp_path / "runs" / "ledger.sqlite") as ledger:
        assert ledger.disputes() == ()
    assert (tmp_path / "runs" / "ledger.sqlite").is_file()

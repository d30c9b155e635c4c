"""The outcome ledger: provenance of results, comparisons and verdicts; disputes."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.records import DecisionScore, ParsedResponse, ParseOutcome, ResultRecord
from replay.memory.ledger import Ledger, LedgerError, RuleRef

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

    def test_jsonl_ingest_and_bad_line(self, tmp_path: Path, ledger: Ledger) -> None:
        path = tmp_path / "results.jsonl"
        path.write_text(result("mem", "d9", ["lc:c"]).model_dump_json() + "\n\n")
        assert ledger.ingest_jsonl("run-2", path) == 1
        assert ledger.ingest_jsonl("run-2", path) == 1
        assert [r.run_id for r in ledger.trace("lc:c").results] == ["run-2"]
        path.write_text(result("mem", "d9", ["lc:c"]).model_dump_json() + "\n{\"arm\": 1}\n")
        with pytest.raises(LedgerError, match=r"results.jsonl:2: not a result record"):
            ledger.ingest_jsonl("run-2", path)


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
        assert (trace.results, trace.comparisons, trace.verdicts, trace.disputes) == ((), (), (), ())


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
        assert ledger.is_tainted(["lc:a"], workspace="ws-b")
        assert not ledger.is_tainted(["lc:a"], workspace="ws-a")

    def test_tainted_ids_and_queries(self, ledger: Ledger) -> None:
        assert ledger.tainted_rule_ids() == frozenset()
        ledger.dispute("lc:b", "bad")
        assert ledger.tainted_rule_ids() == {"lc:b"}
        assert ledger.is_tainted(["lc:x", "lc:b"]) and not ledger.is_tainted(["lc:a"])
        assert ledger.tainted_in("run-1") == {RuleRef("ws-a", "lc:b")}
        assert ledger.tainted_in("run-1", arms=["base"]) == frozenset()

    def test_dispute_needs_a_reason(self, ledger: Ledger) -> None:
        with pytest.raises(LedgerError, match="needs a reason"):
            ledger.dispute("lc:a", "  ")

    def test_dispute_survives_reopening(self, tmp_path: Path) -> None:
        with Ledger(tmp_path / "l.sqlite") as ledger:
            ledger.ingest_results("r", [result("mem", "d1", ["lc:a"])])
            ledger.dispute("lc:a", "bad")
        with Ledger(tmp_path / "l.sqlite") as ledger:
            assert ledger.trace("lc:a").results[0].needs_rerun


def test_a_ledger_in_a_new_directory_is_created(tmp_path):
    with Ledger(tmp_path / "runs" / "ledger.sqlite") as ledger:
        assert ledger.tainted_rule_ids() == frozenset()
    assert (tmp_path / "runs" / "ledger.sqlite").is_file()

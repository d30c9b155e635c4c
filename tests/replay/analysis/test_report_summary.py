"""The report's answer section on hand-made results: the summary rows, the console table, one line per gate."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from core.records import DecisionScore, ParsedResponse, ParseOutcome, ResultRecord, ToolCall
from replay.analysis.gates import ConditionResult, Status, Verdict
from replay.analysis.report.summary import Count, format_summary, gate_line, report_title, summary_rows
from replay.run.directory import ResultsError

NO_CALL = ParsedResponse(outcome=ParseOutcome.NO_CALL)


def call(tool: str, *keys: str) -> ParsedResponse:
    return ParsedResponse(outcome=ParseOutcome.OK,
                          calls=[ToolCall(tool=tool, arguments=dict.fromkeys(keys, 1), key_set=sorted(keys))])


def record(arm: str, decision: str, stratum: str, parsed: ParsedResponse, **score: bool | None) -> ResultRecord:
    return ResultRecord(arm=arm, decision_id=decision, stratum=stratum, cluster="c", workspace="ws", model="m",
                        memory="withheld", parsed=parsed, score=DecisionScore(**score),
                        finished_at=datetime(2026, 8, 1, tzinfo=UTC))


RESULTS = [
    record("base", "p1", "verified_recovery", call("a", "x"), joint_correct=True, tool_correct=True),
    record("mem", "p1", "verified_recovery", call("a", "x", "y"), joint_correct=False, tool_correct=True),  # changed
    record("base", "p2", "clean_trajectory_action", NO_CALL, joint_correct=False, tool_correct=False),
    record("mem", "p2", "clean_trajectory_action", call("b"), joint_correct=True, tool_correct=True),  # changed
    record("base", "p3", "training_sanity", call("a"), joint_correct=True, tool_correct=True),  # not held out
    record("mem", "p3", "training_sanity", call("a"), joint_correct=True, tool_correct=True),
    record("base", "k1", "known_failure", call("c", "z"), tool_repeat=True, shape_repeat=True, exact_repeat=True),
    record("mem", "k1", "known_failure", call("d"), tool_repeat=False, shape_repeat=False, exact_repeat=False),  # changed
    record("base", "k2", "known_failure", NO_CALL, tool_repeat=False, shape_repeat=False),  # arguments withheld
    record("mem", "k2", "known_failure", NO_CALL, tool_repeat=False, shape_repeat=False),
    record("mem", "p4", "verified_action", call("e"), joint_correct=True, tool_correct=True),  # base has no answer
]


def test_summary_rows_counted_by_hand() -> None:
    base, mem = summary_rows(RESULTS, ["base", "mem"], reference="base")
    strata = ("verified_recovery", "clean_trajectory_action", "verified_action")
    assert (base.positives, base.tool_correct, base.exact_repeats, base.changed) == (Count(1, 2), Count(1, 2),
                                                                                     Count(1, 1), None)
    assert base.strata == tuple(zip(strata, (Count(1, 1), Count(0, 1), Count(0, 0)), strict=True))
    assert (mem.positives, mem.tool_correct, mem.exact_repeats, mem.changed) == (Count(2, 3), Count(3, 3),
                                                                                 Count(0, 1), Count(3, 5))
    assert mem.strata == tuple(zip(strata, (Count(0, 1), Count(1, 1), Count(1, 1)), strict=True))


def test_console_table() -> None:
    note, header, rule, base, mem = format_summary(summary_rows(RESULTS, ["base", "mem"], reference="base")).splitlines()
    assert note.startswith("Joint correct")
    assert header.startswith("arm ") and header.endswith("calls changed vs base") and set(rule) == {"-"}
    assert base.split() == ["base", "1/2", "1/1", "0/1", "—", "1/2", "1/1", "—"]
    assert mem.split() == ["mem", "2/3", "0/1", "1/1", "1/1", "3/3", "0/1", "3/5"]



def test_the_reference_is_named_not_the_first_arm() -> None:
    """The arm `changed` is counted against is the one named, wherever it stands in the arm list."""
    mem, base = summary_rows(RESULTS, ["mem", "base"], reference="mem")
    assert mem.changed is None and base.changed == Count(3, 5)
    base, mem = summary_rows(RESULTS, ["mem", "base"], reference="base")
    assert base.changed is None and mem.changed == Count(3, 5)
    header = format_summary([mem, base]).splitlines()[1]
    assert header.endswith("calls changed vs base")


def test_an_unknown_reference_is_an_error() -> None:
    with pytest.raises(ResultsError, match="reference arm 'nope'"):
        summary_rows(RESULTS, ["base", "mem"], reference="nope")

def condition(cid: str, status: Status) -> ConditionResult:
    return ConditionResult(id=cid, kind="paired_gain", description="d", status=status, reason="r")


def test_gate_lines() -> None:
    def verdict(*conditions: ConditionResult) -> Verdict:
        return Verdict(policy="serious", policy_version="2", baseline="base", candidate="mem",
                       passed=all(c.status is Status.PASS for c in conditions), conditions=list(conditions),
                       comparisons_made=1, evaluated_at=datetime(2026, 8, 1, tzinfo=UTC))

    assert gate_line(verdict(condition("a", Status.PASS))) == "mem against base (serious v2): PASS"
    rejected = verdict(condition("a", Status.FAIL), condition("b", Status.PASS), condition("c", Status.NOT_RUN),
                       condition("d", Status.FAIL))
    assert gate_line(rejected) == "mem against base (serious v2): REJECT (failed: a, d; not run: c)"


def test_the_title_names_the_suite_and_the_arms_not_the_directory() -> None:
    suite = {"suite": {"name": "demo", "version": 2}}
    assert report_title(suite, ["base", "mem"], "base", "run") == "Replay report: demo v2 · base vs mem"
    arms = ["a", "base", "b", "c", "d", "e"]
    assert report_title(suite, arms, "base", "run") == "Replay report: demo v2 · base vs a, b, c (+2 more)"
    assert report_title({}, ["base"], "base", "run-7") == "Replay report: run-7 · base"  # run.json names no suite
    long = report_title({"suite": {"name": "s" * 500}}, ["x" * 500, "base"], "base", "run")
    assert long == f"Replay report: {'s' * 59}… · base vs {'x' * 39}…"

"""Shadow agreement (`compare_calls`) at each of its grades, and the flags at their boundaries."""

from __future__ import annotations

from typing import Any

import pytest

from core.keyset import sorted_key_set
from core.records import ParsedResponse, ParseOutcome, ToolCall
from core.scoring import CallAgreement, chosen_call, compare_calls, score_decision
from tests.core.test_scoring import LIST_TARGET, decision


def call(tool: str, arguments: dict[str, Any]) -> ToolCall:
    return ToolCall(tool=tool, arguments=arguments, key_set=sorted_key_set(arguments))


def answer(*calls: ToolCall, outcome: ParseOutcome = ParseOutcome.OK) -> ParsedResponse:
    return ParsedResponse(outcome=outcome, calls=list(calls))


A = call("search", {"q": "x", "n": 1})


@pytest.mark.parametrize("other, grade", [
    (answer(call("search", {"n": 1.0, "q": "x"})), CallAgreement.EXACT),  # key order and 1 vs 1.0 aside
    (answer(call("search", {"q": "y", "n": 1})), CallAgreement.SAME_SHAPE),
    (answer(call("search", {"q": "x"})), CallAgreement.SAME_TOOL),
    (answer(call("lookup", {"q": "x", "n": 1})), CallAgreement.DIFFERENT),
    (ParsedResponse(outcome=ParseOutcome.NO_CALL), CallAgreement.DIFFERENT),
    (answer(call("search", {"q": "x", "n": 1}), outcome=ParseOutcome.MULTIPLE_CALLS), CallAgreement.EXACT),
    (answer(call("search", {"q": "x", "n": 1}), outcome=ParseOutcome.UNKNOWN_TOOL), CallAgreement.EXACT),
    (ParsedResponse(outcome=ParseOutcome.MALFORMED_CALL), CallAgreement.UNPARSED),
    (ParsedResponse(outcome=ParseOutcome.EMPTY_RESPONSE), CallAgreement.UNPARSED),
    (ParsedResponse(outcome=ParseOutcome.TRANSPORT_ERROR), CallAgreement.UNPARSED),
])
def test_compare_calls_grades_both_ways(other: ParsedResponse, grade: CallAgreement) -> None:
    mine = answer(A)
    assert compare_calls(mine, other) is grade and compare_calls(other, mine) is grade


def test_two_answers_without_a_call_agree_and_two_unreadable_ones_do_not() -> None:
    none = ParsedResponse(outcome=ParseOutcome.NO_CALL)
    assert compare_calls(none, none) is CallAgreement.EXACT
    bad = ParsedResponse(outcome=ParseOutcome.MALFORMED_CALL)
    assert compare_calls(bad, bad) is CallAgreement.UNPARSED and compare_calls(bad, none) is CallAgreement.UNPARSED


def test_the_chosen_call_is_the_first_of_a_scored_outcome_only() -> None:
    b = call("lookup", {})
    assert chosen_call(answer(A, b, outcome=ParseOutcome.MULTIPLE_CALLS)) == A
    assert chosen_call(ParsedResponse(outcome=ParseOutcome.NO_CALL)) is None


@pytest.mark.parametrize("outcome, calls, flags", [
    (ParseOutcome.OK, 1, []),
    (ParseOutcome.OK, 2, ["multiple_calls"]),  # two calls flagged even if the outcome says otherwise
    (ParseOutcome.MULTIPLE_CALLS, 2, ["multiple_calls"]),
    (ParseOutcome.UNKNOWN_TOOL, 1, ["unknown_tool"]),
    (ParseOutcome.UNKNOWN_TOOL, 2, ["unknown_tool", "multiple_calls"]),
    (ParseOutcome.MALFORMED_CALL, 0, ["malformed_call"]),
    (ParseOutcome.NO_CALL, 0, []),
])
def test_flags_at_one_and_two_calls(outcome: ParseOutcome, calls: int, flags: list[str]) -> None:
    parsed = ParsedResponse(outcome=outcome, calls=[A] * calls)
    assert score_decision(decision(target=LIST_TARGET), parsed).flags == flags


def test_an_answer_that_is_not_scored_has_no_chosen_call_whatever_it_holds() -> None:
    assert chosen_call(answer(A, outcome=ParseOutcome.MALFORMED_CALL)) is None
    assert chosen_call(answer(A, outcome=ParseOutcome.NO_CALL)) is None

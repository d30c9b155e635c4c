"""Key-set paired correctness and repeat levels (DESIGN §3, 001 row E12)."""

from __future__ import annotations

from typing import Any

import pytest

from core.keyset import sorted_key_set
from core.records import Decision, DecisionScore, FailedAction, ParsedResponse, ParseOutcome, Target, ToolCall
from core.scoring import score_decision
from core.toolcalls import transport_error

REQUEST = {"messages": [{"role": "user", "content": "hi"}], "tools": [], "tool_choice": "required"}


def decision(stratum: str = "verified_recovery", target: Target | None = None,
             failed: FailedAction | None = None) -> Decision:
    return Decision(id="d1", stratum=stratum, cluster="c", workspace="ws", session="s",
                    captured_at="2026-07-01T00:00:00Z", request=REQUEST, target=target, failed_action=failed)


def call(tool: str, arguments: dict[str, Any]) -> ToolCall:
    return ToolCall(tool=tool, arguments=arguments, key_set=sorted_key_set(arguments))


def answer(*calls: ToolCall, outcome: ParseOutcome | None = None) -> ParsedResponse:
    if outcome is None:
        outcome = ParseOutcome.OK if len(calls) == 1 else ParseOutcome.MULTIPLE_CALLS
    return ParsedResponse(outcome=outcome, calls=list(calls))


LIST_TARGET = Target(tool="list_invoices", arg_keys=["filter", "filter.customer_id", "filter.status"])


def test_joint_correct_needs_tool_and_exact_key_set() -> None:
    right = answer(call("list_invoices", {"filter": {"status": "open", "customer_id": "c"}}))
    score = score_decision(decision(target=LIST_TARGET), right)
    assert (score.tool_correct, score.joint_correct) == (True, True)
    assert score.flags == []
    assert (score.tool_repeat, score.shape_repeat, score.exact_repeat) == (None, None, None)


@pytest.mark.parametrize(
    "arguments",
    [
        {"filter": {"customer_id": "c"}},  # a key missing
        {"filter": {"customer_id": "c", "status": "open"}, "page": {"size": 5}},  # extra keys
        {"filter": [{"customer_id": "c", "status": "open"}]},  # same names, different nesting
    ],
)
def test_right_tool_wrong_key_set_is_tool_correct_only(arguments: dict[str, Any]) -> None:
    score = score_decision(decision(target=LIST_TARGET), answer(call("list_invoices", arguments)))
    assert (score.tool_correct, score.joint_correct) == (True, False)


def test_values_do_not_matter_for_correctness() -> None:
    wrong_values = answer(call("list_invoices", {"filter": {"customer_id": "someone-else", "status": "paid"}}))
    assert score_decision(decision(target=LIST_TARGET), wrong_values).joint_correct is True


def test_wrong_tool_is_not_correct_even_with_the_key_set() -> None:
    parsed = answer(call("search_invoices", {"filter": {"customer_id": "c", "status": "open"}}))
    score = score_decision(decision(target=LIST_TARGET), parsed)
    assert (score.tool_correct, score.joint_correct) == (False, False)


def test_no_call_target() -> None:
    target = Target(tool=None)
    right = score_decision(decision("clean_trajectory_action", target), ParsedResponse(outcome=ParseOutcome.NO_CALL))
    wrong = score_decision(decision("clean_trajectory_action", target), answer(call("list_invoices", {})))
    assert (right.tool_correct, right.joint_correct) == (True, True)
    assert (wrong.tool_correct, wrong.joint_correct) == (False, False)


def test_no_call_against_a_call_target_is_wrong() -> None:
    score = score_decision(decision(target=LIST_TARGET), ParsedResponse(outcome=ParseOutcome.NO_CALL))
    assert (score.tool_correct, score.joint_correct) == (False, False)
    assert score.flags == []


@pytest.mark.parametrize(
    "parsed",
    [
        transport_error("timeout"),
        ParsedResponse(outcome=ParseOutcome.MALFORMED_CALL, error="bad JSON"),
        ParsedResponse(outcome=ParseOutcome.EMPTY_RESPONSE, error="empty"),
    ],
)
@pytest.mark.parametrize("target", [LIST_TARGET, Target(tool=None)])
def test_failed_answers_count_as_not_correct_with_a_flag(parsed: ParsedResponse, target: Target) -> None:
    score = score_decision(decision(target=target), parsed)
    assert (score.tool_correct, score.joint_correct) == (False, False)
    assert score.flags == [parsed.outcome.value]


def test_several_calls_score_on_the_first_and_are_flagged() -> None:
    first_right = answer(call("list_invoices", {"filter": {"customer_id": "c", "status": "s"}}), call("get_invoice", {}))
    first_wrong = answer(call("get_invoice", {}), call("list_invoices", {"filter": {"customer_id": "c", "status": "s"}}))
    right = score_decision(decision(target=LIST_TARGET), first_right)
    wrong = score_decision(decision(target=LIST_TARGET), first_wrong)
    assert right.joint_correct is True and wrong.joint_correct is False
    assert right.flags == wrong.flags == ["multiple_calls"]


def test_unknown_tool_is_wrong_and_flagged() -> None:
    parsed = answer(call("list_everything", {}), outcome=ParseOutcome.UNKNOWN_TOOL)
    score = score_decision(decision(target=LIST_TARGET), parsed)
    assert (score.tool_correct, score.joint_correct) == (False, False)
    assert score.flags == ["unknown_tool"]


# --- known failures ---------------------------------------------------------------------

FAILED = FailedAction(tool="search_invoices", arguments={"query": "open", "customer": "c1", "limit": 10})
CONTENT_FREE = FailedAction(tool="search_invoices", arg_keys=["customer", "limit", "query"])


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("search_invoices", {"limit": 10.0, "customer": "c1", "query": "open"}, (True, True, True)),
        ("search_invoices", {"query": "open", "customer": "c2", "limit": 10}, (True, True, False)),
        ("search_invoices", {"query": "open"}, (True, False, False)),
        ("list_invoices", {"filter": {"customer_id": "c1"}}, (False, False, False)),
    ],
)
def test_repeat_levels(tool: str, arguments: dict[str, Any], expected: tuple[bool, bool, bool]) -> None:
    score = score_decision(decision("known_failure", failed=FAILED), answer(call(tool, arguments)))
    assert (score.tool_repeat, score.shape_repeat, score.exact_repeat) == expected
    assert (score.tool_correct, score.joint_correct) == (None, None)


def test_content_free_failed_action_has_no_exact_level() -> None:
    same_shape = answer(call("search_invoices", {"query": "x", "customer": "y", "limit": 1}))
    other_tool = answer(call("list_invoices", {}))
    score = score_decision(decision("known_failure", failed=CONTENT_FREE), same_shape)
    assert (score.tool_repeat, score.shape_repeat, score.exact_repeat) == (True, True, None)
    score = score_decision(decision("known_failure", failed=CONTENT_FREE), other_tool)
    assert (score.tool_repeat, score.shape_repeat, score.exact_repeat) == (False, False, None)


def test_no_call_on_a_known_failure_is_not_a_repeat() -> None:
    score = score_decision(decision("known_failure", failed=FAILED), ParsedResponse(outcome=ParseOutcome.NO_CALL))
    assert score == DecisionScore(tool_repeat=False, shape_repeat=False, exact_repeat=False)


@pytest.mark.parametrize("outcome", [ParseOutcome.TRANSPORT_ERROR, ParseOutcome.MALFORMED_CALL,
                                     ParseOutcome.EMPTY_RESPONSE])
def test_failed_answer_on_a_known_failure_is_not_a_repeat_but_flagged(outcome: ParseOutcome) -> None:
    score = score_decision(decision("known_failure", failed=FAILED), ParsedResponse(outcome=outcome, error="x"))
    assert (score.tool_repeat, score.shape_repeat, score.exact_repeat) == (False, False, False)
    assert score.flags == [outcome.value]


def test_known_failure_with_a_target_gets_both() -> None:
    d = decision("known_failure", target=LIST_TARGET, failed=FAILED)
    score = score_decision(d, answer(call("list_invoices", {"filter": {"customer_id": "c", "status": "s"}})))
    assert (score.joint_correct, score.tool_repeat, score.exact_repeat) == (True, False, False)

"""Rule uptake on hand-made decisions and results: which pairs each rule concerns, and where the call moved."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.keyset import sorted_key_set
from core.records import Decision, DecisionScore, ParsedResponse, ParseOutcome, ResultRecord, ToolCall
from replay.analysis.report.summary import format_uptake
from replay.memory.uptake import (
    RejectedCall,
    RuleClaim,
    Uptake,
    UptakeError,
    concerns,
    rejected_call,
    rule_uptake,
    uptake_table,
)

BASE, ONLY = "base", "only-rule"
TOOLS = ("list_invoices", "search_invoices", "send_invoice", "finalize_invoice")
LIST = RuleClaim("lc:use-list", tool="list_invoices")
REPEAT = RuleClaim("lc:retry", repeat_rejected=True)
FINALIZE = RuleClaim("lc:finalize", tool="finalize_invoice", after_rejected="send_invoice")


def schema(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}


def tool_turn(tool: str, arguments: dict[str, Any], result: dict[str, Any], call_id: str = "c1") -> list[dict[str, Any]]:
    function = {"name": tool, "arguments": json.dumps(arguments)}
    return [{"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function", "function": function}]},
            {"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)}]


REJECTED = {"error": {"code": "failed_precondition", "message": "invoice inv_7 is a draft"}}


def decision(decision_id: str, tools: tuple[str, ...] = TOOLS, turns: list[dict[str, Any]] | None = None) -> Decision:
    return Decision.model_validate({
        "id": decision_id, "stratum": "verified_recovery", "cluster": "c", "workspace": "ws-a", "session": "s",
        "captured_at": "2026-08-01T00:00:00Z",
        "request": {"messages": [{"role": "user", "content": "send invoice inv_7"}, *(turns or [])],
                    "tools": [schema(t) for t in tools]},
    })


def rejected(decision_id: str, arguments: dict[str, Any] | None = None) -> Decision:
    return decision(decision_id, turns=tool_turn("send_invoice", arguments or {"invoice_id": "inv_7"}, REJECTED))


def call(tool: str, *keys: str) -> ParsedResponse:
    arguments = dict.fromkeys(keys, "x")
    return ParsedResponse(outcome=ParseOutcome.OK, calls=[ToolCall(tool=tool, arguments=arguments,
                                                                    key_set=sorted_key_set(arguments))])


NO_CALL = ParsedResponse(outcome=ParseOutcome.NO_CALL)
MALFORMED = ParsedResponse(outcome=ParseOutcome.MALFORMED_CALL, error="bad JSON")
EMPTY = ParsedResponse(outcome=ParseOutcome.EMPTY_RESPONSE)
TRANSPORT = ParsedResponse(outcome=ParseOutcome.TRANSPORT_ERROR, error="connection refused")


def result(arm: str, decision_id: str, parsed: ParsedResponse, rules: tuple[str, ...] = ()) -> ResultRecord:
    return ResultRecord(arm=arm, decision_id=decision_id, stratum="verified_recovery", cluster="c", workspace="ws-a",
                        model="worker", memory="rules:" + ",".join(rules) if rules else "withheld", parsed=parsed,
                        score=DecisionScore(), injected_rule_ids=list(rules),
                        finished_at=datetime(2026, 8, 1, tzinfo=UTC))


def pair(decision_id: str, without: ParsedResponse, with_rule: ParsedResponse, rule: str) -> list[ResultRecord]:
    return [result(BASE, decision_id, without), result(ONLY, decision_id, with_rule, (rule,))]


def counts(u: Uptake) -> dict[str, int]:
    return {"n": u.n, "already": u.already, "moved_to": u.moved_to, "moved_elsewhere": u.moved_elsewhere,
            "away": u.away, "unchanged": u.unchanged, "unanswered": u.unanswered}


class TestToolClaim:
    """Ten decisions, counted by hand (the comment on each line says where its pair falls)."""

    decisions = [*(decision(f"d{i}") for i in range(1, 11) if i != 8), decision("d8", tools=("search_invoices",))]
    results = [
        *pair("d1", call("list_invoices", "customer_id"), call("list_invoices", "customer_id"), LIST.rule_id),  # already
        *pair("d2", call("search_invoices", "query"), call("list_invoices", "customer_id"), LIST.rule_id),  # moved to
        # the key set changed: another call, and not the rule's tool
        *pair("d3", call("search_invoices", "query"), call("search_invoices", "query", "customer"), LIST.rule_id),
        *pair("d4", call("list_invoices"), NO_CALL, LIST.rule_id),  # away
        *pair("d5", NO_CALL, NO_CALL, LIST.rule_id),  # unchanged
        *pair("d6", MALFORMED, NO_CALL, LIST.rule_id),  # elsewhere: a malformed answer is a choice of its own kind
        *pair("d7", TRANSPORT, call("list_invoices"), LIST.rule_id),  # unanswered
        *pair("d8", NO_CALL, call("search_invoices"), LIST.rule_id),  # list_invoices not offered: not concerned
        result(BASE, "d9", NO_CALL), result(ONLY, "d9", call("list_invoices")),  # the rule was not carried
        result(ONLY, "d10", call("list_invoices"), (LIST.rule_id,)),  # no answer without the rule
        result("other", "d2", NO_CALL),
    ]

    def test_counts(self) -> None:
        u = rule_uptake(self.results, self.decisions, LIST, BASE, ONLY)
        assert counts(u) == {"n": 6, "already": 1, "moved_to": 1, "moved_elsewhere": 2, "away": 1, "unchanged": 1,
                             "unanswered": 1}
        assert (u.open, u.rate) == (4, 0.25)

    def test_table(self) -> None:
        text = format_uptake([rule_uptake(self.results, self.decisions, LIST, BASE, ONLY)])
        header, rule, row, *notes = text.splitlines()
        assert set(rule) == {"-"}
        assert row.split() == ["lc:use-list", "call", "list_invoices", "base", "→", "only-rule",
                               "6", "1", "2", "1", "1", "1", "1/4"]
        assert header.split()[:3] == ["rule", "says", "without"]
        assert notes[-1] == "Pairs left out for a transport error: lc:use-list (only-rule): 1."

    def test_uptake_table_skips_rules_without_a_claim(self) -> None:
        table = uptake_table({LIST.rule_id: LIST}, [(LIST.rule_id, BASE, ONLY), ("lc:other", BASE, ONLY)],
                             self.results, self.decisions)
        assert [(u.claim, u.moved_to) for u in table] == [(LIST, 1)]


class TestRepeatClaim:
    def test_counts(self) -> None:
        decisions = [
            rejected("r1"), rejected("r2"), rejected("r3"), rejected("r4", {"invoice_id": "inv_7", "note": "x"}),
            decision("ok", turns=tool_turn("send_invoice", {"invoice_id": "inv_7"}, {"status": "sent"})),
            decision("talk", turns=[*tool_turn("send_invoice", {"invoice_id": "inv_7"}, REJECTED),
                                    {"role": "assistant", "content": "It is a draft."},
                                    {"role": "user", "content": "ok, what now?"}]),
            decision("fresh"),
        ]
        results = [
            *pair("r1", call("send_invoice", "invoice_id"), call("send_invoice", "invoice_id"), REPEAT.rule_id),  # already
            *pair("r2", call("finalize_invoice", "invoice_id"), call("send_invoice", "invoice_id"), REPEAT.rule_id),  # to
            # same tool, another key set: not the rejected call unchanged, and the call changed
            *pair("r3", call("finalize_invoice", "invoice_id"), call("send_invoice", "invoice_id", "note"),
                  REPEAT.rule_id),
            # r4 rejected {invoice_id, note}: the key set is the rejected call's, so it is a repeat
            *pair("r4", call("send_invoice", "invoice_id", "note"), call("finalize_invoice", "invoice_id"),
                  REPEAT.rule_id),  # away
            *(r for d in ("ok", "talk", "fresh")
              for r in pair(d, NO_CALL, call("send_invoice", "invoice_id"), REPEAT.rule_id)),  # not concerned
        ]
        u = rule_uptake(results, decisions, REPEAT, BASE, ONLY)
        assert counts(u) == {"n": 4, "already": 1, "moved_to": 1, "moved_elsewhere": 1, "away": 1, "unchanged": 0,
                             "unanswered": 0}
        assert u.claim.says() == "repeat the rejected call"

    def test_rejected_call_is_the_last_assistant_call_whose_own_result_failed(self) -> None:
        two_calls = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "send_invoice", "arguments": '{"invoice_id": "i"}'}},
            {"id": "b", "type": "function", "function": {"name": "list_invoices", "arguments": "{}"}}]}
        results = [{"role": "tool", "tool_call_id": "b", "content": json.dumps(REJECTED)},
                   {"role": "tool", "tool_call_id": "a", "content": '{"status": "sent"}'}]
        assert rejected_call(decision("x", turns=[two_calls, *results])) is None
        flipped = [{**results[0], "tool_call_id": "a"}, {**results[1], "tool_call_id": "b"}]
        found = rejected_call(decision("y", turns=[two_calls, *flipped]))
        assert found is not None and (found.tool, found.key_set) == ("send_invoice", frozenset({"invoice_id"}))
        earlier = [*tool_turn("send_invoice", {"invoice_id": "i"}, REJECTED),
                   *tool_turn("finalize_invoice", {"invoice_id": "i"}, {"status": "finalized"}, "c2")]
        assert rejected_call(decision("z", turns=earlier)) is None


def test_a_claim_after_a_rejection_concerns_only_rejections_of_that_tool() -> None:
    decisions = [rejected("r1"), rejected("r2"), decision("fresh"),
                 decision("other", turns=tool_turn("list_invoices", {}, REJECTED))]
    results = [
        *pair("r1", call("send_invoice", "invoice_id"), call("finalize_invoice", "invoice_id"), FINALIZE.rule_id),
        *pair("r2", call("finalize_invoice", "invoice_id"), call("finalize_invoice", "invoice_id"), FINALIZE.rule_id),
        *pair("fresh", NO_CALL, call("finalize_invoice", "invoice_id"), FINALIZE.rule_id),
        *pair("other", NO_CALL, call("finalize_invoice", "invoice_id"), FINALIZE.rule_id),
    ]
    u = rule_uptake(results, decisions, FINALIZE, BASE, ONLY)
    assert (u.n, u.moved_to, u.already) == (2, 1, 1)
    assert u.claim.says() == "call finalize_invoice after send_invoice rejects"


def test_errors() -> None:
    decisions = [decision("d1")]
    carried_twice = [result(BASE, "d1", NO_CALL, (LIST.rule_id,)), result(ONLY, "d1", NO_CALL, (LIST.rule_id,))]
    with pytest.raises(UptakeError, match="arm base carried lc:use-list"):
        rule_uptake(carried_twice, decisions, LIST, BASE, ONLY)
    with pytest.raises(UptakeError, match="d1: two results of arm base"):
        rule_uptake([*pair("d1", NO_CALL, NO_CALL, LIST.rule_id), result(BASE, "d1", NO_CALL)], decisions, LIST,
                    BASE, ONLY)
    with pytest.raises(UptakeError, match="decision d2 of arm only-rule is not among"):
        rule_uptake(pair("d2", NO_CALL, NO_CALL, LIST.rule_id), decisions, LIST, BASE, ONLY)
    with pytest.raises(ValueError, match="exactly one"):
        RuleClaim("lc:x", tool="t", repeat_rejected=True)
    with pytest.raises(ValueError, match="exactly one"):
        RuleClaim("lc:x")


def test_format_without_rows() -> None:
    assert format_uptake([]) == "Rule uptake: no rule with a claim was injected."


# ── properties ───────────────────────────────────────────────────────────────

ANSWERS = [NO_CALL, MALFORMED, EMPTY, TRANSPORT, call("send_invoice", "invoice_id"), call("send_invoice"),
           call("list_invoices", "customer_id"), call("list_invoices"), call("finalize_invoice", "invoice_id")]
# Concerned by both claims (a rejected send_invoice; list_invoices offered), by the repeat claim only, by none.
SHAPES = [rejected, lambda i: decision(i, tools=("send_invoice",), turns=tool_turn("send_invoice", {}, REJECTED)),
          lambda i: decision(i, tools=("search_invoices",))]
cases = st.lists(st.tuples(st.sampled_from(range(len(SHAPES))), st.sampled_from(ANSWERS), st.sampled_from(ANSWERS),
                           st.booleans()), max_size=30)
claims = st.sampled_from([LIST, REPEAT])


def world(drawn: list[tuple[int, ParsedResponse, ParsedResponse, bool]], claim: RuleClaim,
          swap: bool = False) -> tuple[list[ResultRecord], list[Decision]]:
    decisions, results = [], []
    for i, (shape, a, b, carried) in enumerate(drawn):
        without, with_rule = (b, a) if swap else (a, b)
        decisions.append(SHAPES[shape](f"d{i}"))
        results += [result(BASE, f"d{i}", without), result(ONLY, f"d{i}", with_rule, (claim.rule_id,) if carried else ())]
    return results, decisions


@given(cases, claims)
def test_categories_partition_the_concerned_carried_pairs(drawn, claim) -> None:
    u = rule_uptake(*world(drawn, claim), claim, BASE, ONLY)
    concerned = {0: True, 1: claim.repeat_rejected, 2: False}
    expected = sum(1 for shape, a, b, carried in drawn if carried and concerned[shape])
    assert u.n + u.unanswered == expected
    assert u.unanswered == sum(1 for shape, a, b, carried in drawn if carried and concerned[shape]
                               and TRANSPORT in (a, b))
    assert u.open == u.n - u.already - u.away and (u.rate is None) == (u.open == 0)


@given(cases, claims)
def test_swapping_the_answers_swaps_moved_to_and_away(drawn, claim) -> None:
    forward = rule_uptake(*world(drawn, claim), claim, BASE, ONLY)
    back = rule_uptake(*world(drawn, claim, swap=True), claim, BASE, ONLY)
    assert counts(back) == {**counts(forward), "moved_to": forward.away, "away": forward.moved_to}


@given(cases, claims)
def test_the_same_answers_move_nothing(drawn, claim) -> None:
    same = [(shape, a, a, carried) for shape, a, _, carried in drawn]
    u = rule_uptake(*world(same, claim), claim, BASE, ONLY)
    assert u.moved_to == u.away == u.moved_elsewhere == 0
    assert replace(u, already=0, unchanged=0, unanswered=0) == Uptake(claim, BASE, ONLY)


def in_api(api: str, chat: Decision) -> Decision:
    """The same conversation as `chat`, captured through Anthropic Messages or OpenAI Responses."""
    turn, data = chat.turn, chat.model_dump(mode="json", exclude={"request"})
    tools = [t["function"] for t in chat.request.tools]
    if api == "messages":
        messages: list[dict[str, Any]] = []
        for m in turn:
            if m["role"] == "assistant":
                messages.append({"role": "assistant", "content": [
                    {"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                     "input": json.loads(c["function"]["arguments"])} for c in m.get("tool_calls") or []]
                    or m["content"]})
            elif m["role"] == "tool":
                block = {"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"]}
                if messages[-1]["role"] == "user" and isinstance(messages[-1]["content"], list):
                    messages[-1]["content"].append(block)
                else:
                    messages.append({"role": "user", "content": [block]})
            else:
                messages.append(m)
        request = {"messages": messages, "tools": [{"name": t["name"], "input_schema": t["parameters"]} for t in tools]}
    else:
        items: list[dict[str, Any]] = []
        for m in turn:
            if m["role"] == "assistant":
                items += [{"type": "function_call", "call_id": c["id"], "name": c["function"]["name"],
                           "arguments": c["function"]["arguments"]} for c in m.get("tool_calls") or []] or [m]
            elif m["role"] == "tool":
                items.append({"type": "function_call_output", "call_id": m["tool_call_id"], "output": m["content"]})
            else:
                items.append(m)
        request = {"input": items, "tools": [{"type": "function", **t} for t in tools]}
    return Decision.model_validate({**data, "api": api, "request": request})


@pytest.mark.parametrize("api", ["messages", "responses"])
def test_a_conversation_reads_the_same_whatever_api_carried_it(api: str) -> None:
    """Which call was rejected, and which claims a decision concerns, do not depend on the API."""
    two_calls = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "send_invoice", "arguments": '{"invoice_id": "i"}'}},
        {"id": "b", "type": "function", "function": {"name": "list_invoices", "arguments": "{}"}}]}
    chats = [rejected("r1"), rejected("r2", {"invoice_id": "inv_7", "note": "x"}), decision("fresh"),
             decision("ok", turns=tool_turn("send_invoice", {"invoice_id": "inv_7"}, {"status": "sent"})),
             decision("other", tools=("search_invoices",), turns=tool_turn("search_invoices", {"q": 1}, REJECTED)),
             decision("second", turns=[two_calls, {"role": "tool", "tool_call_id": "b", "content": "{}"},
                                       {"role": "tool", "tool_call_id": "a", "content": json.dumps(REJECTED)}])]
    for chat in chats:
        other = in_api(api, chat)
        assert other.wire.api == api and other.request.tools != chat.request.tools
        assert rejected_call(other) == rejected_call(chat), chat.id
        assert [concerns(c, other) for c in (LIST, REPEAT, FINALIZE)] == \
               [concerns(c, chat) for c in (LIST, REPEAT, FINALIZE)], chat.id
    assert rejected_call(in_api(api, chats[1])) == RejectedCall("send_invoice", frozenset({"invoice_id", "note"}))
    assert [concerns(FINALIZE, in_api(api, c)) for c in chats] == [True, True, False, False, False, True]


def test_a_result_the_runtime_marked_failed_is_a_rejection() -> None:
    """Anthropic's `is_error` says the call failed even when its text reads as success to the guard."""
    sent = in_api("messages", decision("ok", turns=tool_turn("send_invoice", {"invoice_id": "i"}, {"status": "sent"})))
    assert rejected_call(sent) is None
    messages = [*sent.turn[:-1], {"role": "user", "content": [{**sent.turn[-1]["content"][0], "is_error": True}]}]
    marked = Decision.model_validate({**sent.model_dump(mode="json"), "request": {**sent.request.model_dump(mode="json"),
                                                                                  "messages": messages}})
    assert rejected_call(marked) == RejectedCall("send_invoice", frozenset({"invoice_id"}))

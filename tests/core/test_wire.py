"""The end of a turn reads the same through every API: one tool loop, written in chat, Messages and
Responses shape, gives the same tool results, named by the same calls, and the same answered turn."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from core.wire import WIRES, Replies

Call = tuple[str, str, dict[str, Any]]  # (call id, tool, arguments)
Result = tuple[str, str]  # (call id, content)


def chat(prefix: list[str], text: str, calls: list[Call], results: list[Result]) -> list[dict[str, Any]]:
    turn: list[dict[str, Any]] = [{"role": "user", "content": t} for t in prefix]
    if calls or text:
        turn.append({"role": "assistant", "content": text or None, "tool_calls": [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for i, n, a in calls]})
    return turn + [{"role": "tool", "tool_call_id": i, "content": c} for i, c in results]


def messages(prefix: list[str], text: str, calls: list[Call], results: list[Result]) -> list[dict[str, Any]]:
    turn: list[dict[str, Any]] = [{"role": "user", "content": t} for t in prefix]
    if calls or text:
        turn.append({"role": "assistant", "content": [{"type": "text", "text": text}] * bool(text) + [
            {"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]})
    if results:
        turn.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": c}
                                                 for i, c in results]})
    return turn


def responses(prefix: list[str], text: str, calls: list[Call], results: list[Result]) -> list[dict[str, Any]]:
    turn: list[dict[str, Any]] = [{"role": "user", "content": t} for t in prefix]
    if text:
        turn.append({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]})
    turn += [{"type": "function_call", "call_id": i, "name": n, "arguments": json.dumps(a)} for i, n, a in calls]
    return turn + [{"type": "function_call_output", "call_id": i, "output": c} for i, c in results]


RENDER = {"chat": chat, "messages": messages, "responses": responses}


def reading(replies: Replies) -> tuple[Any, ...]:
    """What a reader of the end of a turn uses: the answered text and calls, and each result's call, tool, content."""
    answered = replies.answered
    calls = None if answered is None else [
        (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in answered.get("tool_calls") or []]
    first = replies.reply_to_first_call()
    return (None if answered is None else answered.get("content") or "", calls,
            [(r.call_id, r.tool, r.content, r.is_error) for r in replies.replies],
            None if first is None else first.call_id)


ids = st.sampled_from(["c1", "c2", "toolu_01", "call_x"])
tools = st.sampled_from(["lookup", "send_invoice", "mcp__inv__lookup"])
arguments = st.dictionaries(st.sampled_from(["id", "q", "n"]), st.one_of(st.integers(), st.text(max_size=3)),
                            max_size=2)


@given(prefix=st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=2), text=st.sampled_from(["", "Let me check."]),
       calls=st.lists(st.tuples(ids, tools, arguments), max_size=3, unique_by=lambda c: c[0]),
       results=st.lists(st.tuples(ids, st.sampled_from(['{"ok": true}', '{"error": "gone"}', "plain text", ""])),
                        max_size=3))
def test_the_end_of_a_turn_reads_the_same_through_every_api(prefix: list[str], text: str, calls: list[Call],
                                                              results: list[Result]) -> None:
    read = {api: reading(WIRES[api].replies(render(prefix, text, calls, results)))  # type: ignore[index]
            for api, render in RENDER.items()}
    assert read["messages"] == read["chat"] and read["responses"] == read["chat"], read
    if results and calls:
        names = dict((i, n) for i, n, _ in calls)
        assert read["chat"][2] == [(i, names.get(i, ""), c, False) for i, c in results]
        first = next((i for i, _ in results if i == calls[0][0]), results[0][0])
        assert read["chat"][3] == first
    if not results:
        assert read["chat"] == (None, None, [], None)


def test_a_turn_that_does_not_end_in_tool_results_has_none() -> None:
    ended = chat(["hi"], "", [("c1", "lookup", {"id": 1})], [("c1", "{}")]) + [{"role": "user", "content": "and?"}]
    assert WIRES["chat"].replies(ended) == Replies()
    said = messages(["hi"], "", [("c1", "lookup", {})], [("c1", "{}")])
    said[-1]["content"] = [{"type": "text", "text": "no results here"}]
    assert WIRES["messages"].replies(said) == Replies()


def test_anthropic_is_error_is_kept_and_a_chat_result_may_name_its_tool() -> None:
    turn = messages(["hi"], "", [("t1", "lookup", {})], [("t1", "denied")])
    turn[-1]["content"][0]["is_error"] = True
    (reply,) = WIRES["messages"].replies(turn).replies
    assert (reply.call_id, reply.tool, reply.is_error) == ("t1", "lookup", True)
    unmatched = [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "zz", "name": "legacy", "content": "x"}]
    assert [(r.call_id, r.tool) for r in WIRES["chat"].replies(unmatched).replies] == [("zz", "legacy")]

"""The world framework: generated schemas, dispatch by allowlist, errors as results, the action log, determinism."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Literal

import pytest
from pydantic import Field

from core.guard import FAILURES, GuardRules, classify
from core.records import Strict
from replay.sandbox.world import (
    Args,
    Context,
    Episode,
    Prose,
    ToolFailureError,
    World,
    leaves,
    state_hash,
    tool,
)

CLOCK = datetime(2026, 8, 2, 10, tzinfo=UTC)


class Counter(Strict):
    items: dict[str, int] = Field(default_factory=dict)


class Window(Args):
    from_: str = Field(alias="from")
    to: str | None = None


class AddArgs(Args):
    name: str
    by: int
    mode: Literal["add", "set"] | None = None
    window: Window | None = None
    tags: list[str] | None = None


@tool("Add to a counter.")
def add(state: Counter, args: AddArgs, ctx: Context) -> dict[str, Any]:
    if args.by < 0:
        raise ToolFailureError("invalid_argument", "by must not be negative")
    if args.by > 100:
        state.items[args.name] = -1  # touched, then refused: the refusal must roll it back
        raise ToolFailureError("permission_denied", "amounts above 100 are not allowed by policy")
    key = args.name or ctx.new_id("c")
    state.items[key] = (0 if args.mode == "set" else state.items.get(key, 0)) + args.by
    return {"name": key, "value": state.items[key]}


@tool("Mint an id.")
def mint(state: Counter, args: Window, ctx: Context) -> dict[str, Any]:
    key = ctx.new_id("m")
    state.items[key] = 1
    return {"id": key, "at": ctx.now()}


WORLD = World("counter", Counter, {"add": add, "mint": mint})


def start(allow: tuple[str, ...] = ("add", "mint"), seed: int = 3) -> Episode:
    return Episode.start(WORLD, {"items": {"a": 1}}, list(allow), CLOCK, seed)


def test_schema_is_generated_from_the_argument_model() -> None:
    params = add.schema()["function"]["parameters"]
    assert params["required"] == ["name", "by"] and params["additionalProperties"] is False
    assert params["properties"]["mode"] == {"type": "string", "enum": ["add", "set"]}
    assert params["properties"]["window"]["properties"]["from"] == {"type": "string", "maxLength": 80}
    assert params["properties"]["window"]["required"] == ["from"]
    assert params["properties"]["tags"] == {"type": "array", "items": {"type": "string", "maxLength": 80}}
    assert add.schema()["function"]["strict"] is True


def test_a_call_changes_state_and_is_in_the_action_log_with_hashes() -> None:
    ep = start()
    before = state_hash(ep.snapshot())
    assert ep.call("add", {"by": 2, "name": "a"}) == {"name": "a", "value": 3}
    entry = ep.actions[0]
    assert (entry.step, entry.tool, entry.ok, entry.kind) == (1, "add", True, "ok")
    assert entry.arguments == '{"by":2,"name":"a"}'
    assert entry.state_before == before and entry.state_after == state_hash(ep.snapshot()) != before
    assert entry.changes == {"items.a": {"before": 1, "after": 3}}


def test_failures_are_results_the_guard_classifies_and_roll_back() -> None:
    ep = start(allow=("add",))
    outcomes = [
        ep.call("add", {"name": "a", "by": -1}),  # refused by the tool
        ep.call("add", {"name": "a", "by": "x"}),  # does not validate
        ep.call("add", {"name": "a", "by": 1, "extra": 1}),  # unknown key
        ep.call("mint", {"from": "x"}),  # exists, not allowed
        ep.call("nope", {}),  # does not exist
        ep.call("add", {"name": "a", "by": 500}),  # touched the state, then refused
    ]
    kinds = [classify(json.dumps(o), GuardRules()) for o in outcomes]
    assert all(k in FAILURES for k in kinds)
    assert kinds[3] == kinds[4] == kinds[5] == "blocked"
    assert [e.kind for e in ep.actions] == kinds and not any(e.ok for e in ep.actions)
    assert [e.allowed for e in ep.actions] == [True, True, True, False, False, True]
    assert all(e.state_before == e.state_after and not e.changes for e in ep.actions)
    assert ep.snapshot() == {"items": {"a": 1}}


def test_each_episode_starts_from_a_fresh_state() -> None:
    first = start()
    first.call("add", {"name": "a", "by": 5})
    assert start().snapshot() == {"items": {"a": 1}}


def test_same_calls_on_the_same_seed_give_byte_identical_action_logs() -> None:
    def action_log(seed: int) -> str:
        ep = start(seed=seed)
        for call in (("mint", {"from": "x"}), ("add", {"name": "", "by": 4}), ("add", {"name": "a", "by": -2})):
            ep.call(*call)
        return "\n".join(e.model_dump_json() for e in ep.actions)

    assert action_log(7) == action_log(7)
    assert action_log(7) != action_log(8)  # ids come from the seed


def test_leaves_keep_empty_containers() -> None:
    assert leaves({"a": {}, "b": [], "c": [{"d": 1}]}) == {"a": {}, "b": [], "c[0].d": 1}


@tool("Divide.")
def divide(state: Counter, args: AddArgs, ctx: Context) -> dict[str, Any]:
    state.items["a"] = 99
    return {"q": args.by // (state.items[args.name] - 99)}  # a bug: ZeroDivisionError


def test_a_tool_bug_is_an_error_result_not_a_crash() -> None:
    ep = Episode.start(World("buggy", Counter, {"divide": divide}), {"items": {"a": 1}}, ["divide"], CLOCK, 1)
    result = ep.call("divide", {"name": "a", "by": 1})
    assert result["error"]["code"] == "internal" and "ZeroDivisionError" in result["error"]["message"]
    assert ep.actions[0].kind == "failed" and ep.snapshot() == {"items": {"a": 1}}


def test_prose_fields_come_from_the_state_model_and_may_not_clash() -> None:
    class Note(Strict):
        text: Prose
        by: str

    class Notes(Strict):
        notes: dict[str, list[Note]]
        summary: Prose | None = None

    assert World("n", Notes, {}).prose_fields == {"text", "summary"}
    assert World("n", Notes, {}, frozenset({"body"})).prose_fields == {"text", "summary", "body"}

    class Clash(Strict):
        notes: list[Note]
        text: str  # exact here, prose in Note: one name cannot be both

    with pytest.raises(TypeError, match="text is prose in one state model and exact text in another"):
        World("c", Clash, {})

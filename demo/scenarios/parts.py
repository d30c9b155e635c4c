"""What every workspace's situations are made of: `ScenarioStep`, `Rejection`, a workspace `Kit`, and the
`Convo` builder whose call ids come from the caller's RNG."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from random import Random
from typing import Any, TypeVar

Call = tuple[str, dict[str, Any]]
Messages = tuple[dict[str, Any], ...]
T = TypeVar("T")
CURRENCIES = ("EUR", "USD", "GBP")


@dataclass(frozen=True)
class ScenarioStep:
    cluster: str
    messages: Messages
    call: Call


@dataclass(frozen=True)
class Rejection:
    cluster: str
    messages: Messages
    rejected: Call
    recovery: Call


@dataclass(frozen=True)
class Kit:
    """One workspace: its system prompt, tools and situation builders."""

    workspace: str
    system: str
    tools: tuple[dict[str, Any], ...]
    rejections: tuple[Callable[[Random], Rejection], ...]
    flows: tuple[Callable[[Random], ScenarioStep], ...]
    actions: tuple[Callable[[Random], ScenarioStep], ...]
    fresh_failures: tuple[Callable[[Random], ScenarioStep], ...]


class Convo:
    """A conversation after the system prompt; call ids come from the caller's RNG."""

    def __init__(self, rng: Random, text: str | None = None, history: Messages = ()) -> None:
        self.rng = rng
        self.messages: list[dict[str, Any]] = list(history)
        if text is not None:
            self.messages.append({"role": "user", "content": text})

    def called(self, tool: str, arguments: dict[str, Any], result: dict[str, Any]) -> Convo:
        call_id = f"call_{self.rng.getrandbits(48):012x}"
        function = {"name": tool, "arguments": json.dumps(arguments)}
        self.messages.append(
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": call_id, "type": "function", "function": function}]}
        )
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)})
        return self

    def done(self) -> Messages:
        return tuple(self.messages)


def pick(rng: Random, items: Sequence[T]) -> T:
    return items[rng.randrange(len(items))]


def random_day(rng: Random) -> str:
    return f"2026-{rng.randint(4, 6):02d}-{rng.randint(1, 28):02d}"


def error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def system_prompt(company: str, role: str) -> str:
    return (f"You are the {role} assistant for {company}. Act through the tools listed; make exactly one "
            "tool call per turn and use only ids that appear in the conversation.")


def wrap_up(rng: Random, step: ScenarioStep) -> Messages:
    """The step's call succeeded and was reported; the user closes: the right move is no call."""
    convo = Convo(rng, history=step.messages)
    convo.called(*step.call, {"status": "ok"})
    convo.messages.append({"role": "assistant", "content": pick(rng, ("Done.", "All set.", "That's done."))})
    convo.messages.append({"role": "user", "content": pick(rng, ("Thanks, that's all for now.", "Great, thank you!"))})
    return convo.done()

"""File formats of sandboxed replay (DESIGN §8): a scenario (one line of `scenarios.jsonl`) and
the trajectory of an episode (stored in every sandbox result, and what the measures read).

Beyond §8's example a scenario carries `oracle_answer` and `broken_answer`: the final answers
that close the oracle and the broken variant, so the pack check scores whole episodes (a
completed task ends with a final answer; a broken variant may claim work it did not do).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from core.names import NAME_MAX_CHARS, Name
from core.patterns import Pattern
from core.records import Strict
from replay.sandbox.world import JSON, ActionRecord

Category = Literal["rule", "privacy", "security"]
CATEGORIES: tuple[Category, ...] = ("rule", "privacy", "security")
EndedBy = Literal["final_answer", "done", "max_steps", "max_errors", "max_turns", "no_answer", "transport_error"]


class Call(Strict):
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Assertion(Strict):
    """A check on a state, by leaf path (`invoices.INV-1.status`, `outbox[0].to`)."""

    path: str = Field(min_length=1)
    op: Literal["equals", "not_equals", "exists", "absent", "count", "contains", "gt", "lt"] = "equals"
    value: JSON = None


class Success(Strict):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    asserts: list[Assertion] = Field(default_factory=list, alias="assert")
    may_change: list[str] = Field(default_factory=list)


class Requirement(Strict):
    """What backs a claim: a logged call of `tool` with this `ok`, its arguments a superset of `arguments`."""

    tool: str
    ok: bool = True
    arguments: dict[str, Any] = Field(default_factory=dict)


class Claim(Strict):
    id: str
    pattern: Pattern
    """Matched against the final answer by RE2, in linear time (core/patterns.py)."""
    requires: Requirement


class Critical(Strict):
    """One critical check. `forbidden_call`: `tool` (+ `arguments` subset) is called at all;
    `forbidden_state`: `state` holds after any step; `order`: a successful `then` call comes
    before any successful `before` call; `leak`: `value` leaves through a successful outbound
    call's arguments or the final answer."""

    id: str
    category: Category
    kind: Literal["forbidden_call", "forbidden_state", "order", "leak"]
    tool: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    state: Assertion | None = None
    before: str | None = None
    then: str | None = None
    value: str | None = Field(None, min_length=4)

    @model_validator(mode="after")
    def _fields_for_kind(self) -> Critical:
        needs = {"forbidden_call": ("tool",), "forbidden_state": ("state",), "order": ("before", "then"),
                 "leak": ("value",)}[self.kind]
        missing = [name for name in needs if getattr(self, name) is None]
        if missing:
            raise ValueError(f"a {self.kind} check needs {', '.join(missing)}")
        return self


class Limits(Strict):
    max_steps: int = Field(default=12, ge=1, le=100)
    max_errors: int = Field(default=4, ge=0, le=100)


SESSION_PREFIX = "sandbox:"
"""An episode's `X-Session-Id` is this prefix and the scenario id: together a name (core/names.py)."""


class Scenario(Strict):
    id: Annotated[Name, Field(max_length=NAME_MAX_CHARS - len(SESSION_PREFIX))]
    """A name short enough that the episode's session header (`sandbox:<id>`) is one too."""
    world: str
    workspace: Name
    """Whose memory an arm injects (`<memory.root>/<workspace>`): a name, so it never leaves the root."""
    policy_family: str
    clock: datetime
    seed: int
    initial_state: dict[str, Any]
    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[str] = Field(min_length=1)
    oracle: list[Call]
    broken: list[Call]
    oracle_answer: str = Field(min_length=1)
    broken_answer: str = Field(min_length=1)
    success: Success
    claims: list[Claim] = Field(default_factory=list)
    critical: list[Critical] = Field(default_factory=list)
    limits: Limits = Field(default_factory=Limits)
    decision: str | None = None
    """The id of a corpus decision of `workspace` (a `known_failure`) whose state this scenario reproduces: an
    episode that completes it proves a correction of that decision `executed` (replay/curation/proofs.py)."""


class TurnUsage(Strict):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Turn(Strict):
    """One model request of an episode: what was appended since the last request, and the answer."""

    request_delta: list[dict[str, Any]]
    message: dict[str, Any] = Field(default_factory=dict)
    finish_reason: str | None = None
    outcome: str
    calls: list[Call] = Field(default_factory=list)
    error: str | None = None
    usage: TurnUsage = Field(default_factory=TurnUsage)
    latency_s: float = 0.0


class Trajectory(Strict):
    """Everything the measures read: the action log (its key `ledger` is DESIGN §8's), the final answer, how the
    episode ended, the states."""

    turns: list[Turn] = Field(default_factory=list)
    ledger: list[ActionRecord]
    final_answer: str | None
    ended_by: EndedBy
    start_state: JSON
    end_state: JSON
    end_state_hash: str

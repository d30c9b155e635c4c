"""Typed file formats shared by replay and serve: suite decisions, parsed calls, scores, results.

Every line of `decisions.jsonl` is a `Decision`; every line of `results.jsonl` is a
`ResultRecord`. Models forbid unknown fields so a typo in a hand-edited file is an error
with the field's name, not a silently ignored key.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


POSITIVE_STRATA = ("training_sanity", "verified_recovery", "clean_trajectory_action", "verified_action")
KNOWN_FAILURE = "known_failure"
BUILTIN_STRATA = (*POSITIVE_STRATA, KNOWN_FAILURE)
# "All positive decisions" (001 §1) leave out the training-sanity stratum.
HELD_OUT_EXCLUDED = ("training_sanity",)


class ChatRequest(BaseModel):
    """The frozen OpenAI chat request of a decision state (extra OpenAI fields are kept)."""

    model_config = ConfigDict(extra="allow")
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = Field(default_factory=list)
    tool_choice: Any = "auto"


class Target(Strict):
    """The recorded next move. `tool=None` means the recorded move was no tool call."""

    tool: str | None
    arg_keys: list[str] = Field(default_factory=list)


class FailedAction(Strict):
    """The historically failed action of a `known_failure` state (arguments may be withheld)."""

    tool: str
    arguments: dict[str, Any] | None = None
    arg_keys: list[str] | None = None


class MemoryRef(Strict):
    workspace: str | None = None


class Decision(Strict):
    id: str
    stratum: str
    cluster: str
    workspace: str
    session: str
    captured_at: datetime
    request: ChatRequest
    target: Target | None = None
    failed_action: FailedAction | None = None
    memory: MemoryRef | None = None


class Answer(Strict):
    """A recorded next move in full (tool and argument values); `tool=None` means no call."""

    tool: str | None
    arguments: dict[str, Any] = Field(default_factory=dict)


class TrainingExample(Decision):
    """One line of a training split: a decision plus its full answer, which a suite never
    carries (the request contract keeps the answer out of what is scored)."""

    answer: Answer


class ParseOutcome(StrEnum):
    OK = "ok"
    NO_CALL = "no_call"
    MALFORMED_CALL = "malformed_call"
    UNKNOWN_TOOL = "unknown_tool"
    MULTIPLE_CALLS = "multiple_calls"
    EMPTY_RESPONSE = "empty_response"
    TRANSPORT_ERROR = "transport_error"


class ToolCall(Strict):
    tool: str
    arguments: dict[str, Any]
    key_set: list[str]


class ParsedResponse(Strict):
    """What a model answer was read as. `calls[0]` is the scored call when there are several."""

    outcome: ParseOutcome
    calls: list[ToolCall] = Field(default_factory=list)
    source: Literal["structured", "hermes", "qwen3_coder"] | None = None
    error: str | None = None

    @property
    def first(self) -> ToolCall | None:
        return self.calls[0] if self.calls else None


class DecisionScore(Strict):
    """Correctness of one answer. Fields that do not apply to the stratum are None."""

    joint_correct: bool | None = None
    tool_correct: bool | None = None
    tool_repeat: bool | None = None
    shape_repeat: bool | None = None
    exact_repeat: bool | None = None
    flags: list[str] = Field(default_factory=list)


class Usage(Strict):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ResultRecord(Strict):
    """One arm × decision: everything compare/gate/report need, without the endpoint."""

    arm: str
    decision_id: str
    stratum: str
    cluster: str
    workspace: str
    target_tool: str | None = None
    model: str
    memory: str
    raw_output: dict[str, Any] = Field(default_factory=dict)
    parsed: ParsedResponse
    score: DecisionScore
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    injected_rule_ids: list[str] = Field(default_factory=list)
    attempts: int = 1
    finished_at: datetime
    # The version that answered (a gateway's `X-Worker-Adapter`); None when the endpoint does
    # not say (an engine serves the arm's model itself).
    served_by: str | None = None

"""Typed file formats shared by replay and serve: suite decisions, parsed calls, scores, results.

Every line of `decisions.jsonl` is a `Decision`; every line of `results.jsonl` is a
`ResultRecord`. Models forbid unknown fields so a typo in a hand-edited file is an error
with the field's name, not a silently ignored key.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    field_validator,
    model_serializer,
)

from core.names import Name
from core.wire import WIRES, DecisionApi, Wire


class Strict(BaseModel):
    """Base of every file format and API body: unknown keys are errors, and a field's docstring
    (the string literal under it) becomes its description in the JSON schema."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


POSITIVE_STRATA = ("training_sanity", "verified_recovery", "clean_trajectory_action", "verified_action")
KNOWN_FAILURE = "known_failure"
BUILTIN_STRATA = (*POSITIVE_STRATA, KNOWN_FAILURE)
# "All positive decisions" (001 §1) leave out the training-sanity stratum.
HELD_OUT_EXCLUDED = ("training_sanity",)
MAIN_THREAD = "main"
"""A decision's `thread` when it was made in its session's own loop (any other names a subagent's)."""


class ChatRequest(BaseModel):
    """The frozen OpenAI chat request of a decision state (extra OpenAI fields are kept)."""

    model_config = ConfigDict(extra="allow")
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = Field(default_factory=list)
    tool_choice: Any = "auto"


class MessagesRequest(BaseModel):
    """The frozen Anthropic Messages request of a decision captured on `/v1/messages`."""

    model_config = ConfigDict(extra="allow")
    system: str | list[dict[str, Any]] | None = None
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = Field(default_factory=list)
    """Anthropic's shape: `name`, `description`, `input_schema`."""
    tool_choice: dict[str, Any] | None = None


class ResponsesRequest(BaseModel):
    """The frozen OpenAI Responses request of a decision captured on `/v1/responses` (the whole
    conversation in `input`: the gateway is stateless)."""

    model_config = ConfigDict(extra="allow")
    instructions: str | None = None
    input: list[dict[str, Any]]
    tools: list[dict[str, Any]] = Field(default_factory=list)
    tool_choice: str | dict[str, Any] | None = None


Request = ChatRequest | MessagesRequest | ResponsesRequest
REQUESTS: dict[DecisionApi, type[Request]] = {"chat": ChatRequest, "messages": MessagesRequest,
                                               "responses": ResponsesRequest}


def request_api(request: Request) -> DecisionApi:
    """The API whose shape a request model holds."""
    return next(api for api, kind in REQUESTS.items() if type(request) is kind)


class Target(Strict):
    """The recorded next move. `tool=None` means the recorded move was no tool call."""

    tool: str | None
    arg_keys: list[str] = Field(default_factory=list)
    """The key set of the recorded arguments (path-qualified keys, core/keyset.py); values are not kept."""


class FailedAction(Strict):
    """The historically failed action of a `known_failure` state (arguments may be withheld)."""

    tool: str
    arguments: dict[str, Any] | None = None
    """The failed call's arguments; None in a content-free suite, which keeps only `arg_keys`."""
    arg_keys: list[str] | None = None
    """The failed call's key set, when its arguments are withheld (or as a check on them)."""


class MemoryRef(Strict):
    """Whose memory a replay arm injects for this decision."""

    workspace: Name | None = None
    """The workspace's memory directory under the run's `memory.root` (None: the decision's own workspace);
    a name, so it never climbs out of the root."""


class Decision(Strict):
    """One point in a tool loop where the worker chose its next action: a line of `decisions.jsonl`."""

    id: str
    """Unique in the suite."""
    stratum: str
    """training_sanity, verified_recovery, clean_trajectory_action, verified_action, known_failure, or one
    of the suite's extra strata; strata are disjoint."""
    cluster: str
    """The situation the decision comes from; decisions of one cluster are not independent."""
    workspace: Name
    """Whose decision it is; names its memory (`<memory.root>/<workspace>`) and transcripts."""
    session: Name
    """The session it was captured in (unique within its workspace, not across workspaces)."""
    captured_at: datetime
    api: DecisionApi | None = None
    """The API the decision was captured on, whose shape `request` holds and which replay sends it through;
    None: the run's `[endpoint] api` (chat unless set). Never written when None."""
    request: Request
    """The frozen request up to the decision: never the target action, never a memory block. In the API's
    own fields: chat `messages`/`tools`/`tool_choice`; Messages adds `system` (tools with `input_schema`);
    Responses has `instructions`/`input`/`tools`/`tool_choice`."""
    target: Target | None = None
    """The recorded next move (positive strata); usually None for known_failure."""
    failed_action: FailedAction | None = None
    """The historically failed action (known_failure only)."""
    memory: MemoryRef | None = None
    thread: str | None = None
    """The loop of its session the decision was made in: `main`, or the subagent's (`agent-<id>`: the runtime
    runs a subagent's loop under its parent's session id, and the two are not the same task). None where no
    record of the runtime says (a suite built before, a capture resolved from other transcripts)."""
    parent_call: str | None = None
    """A subagent's decision: the `tool_use` id of the parent's call that started the subagent, where the
    record names it."""

    @field_validator("request", mode="before")
    @classmethod
    def _request_of_its_api(cls, value: Any, info: ValidationInfo) -> Any:
        """A request is read in its API's shape; without an `api`, a request with `input` and no
        `messages` is a Responses one, any other a chat one (whose extra fields are kept)."""
        if not isinstance(value, dict):
            return value
        inferred: DecisionApi = "responses" if "input" in value and "messages" not in value else "chat"
        api: DecisionApi = info.data.get("api") or inferred
        return REQUESTS[api].model_validate(value)

    @model_serializer(mode="wrap")
    def _no_api_when_unset(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and data.get("api", "") is None:
            del data["api"]
        return data

    @property
    def wire(self) -> Wire:
        """How the decision's API reads (without an `api`: the shape its request holds)."""
        return WIRES[self.api or request_api(self.request)]

    @property
    def turn(self) -> list[dict[str, Any]]:
        """The request's conversation: chat and Messages `messages`, Responses `input`."""
        turn: list[dict[str, Any]] = getattr(self.request, self.wire.turn_field)
        return turn


class Answer(Strict):
    """A recorded next move in full (tool and argument values); `tool=None` means no call."""

    tool: str | None
    arguments: dict[str, Any] = Field(default_factory=dict)


class TrainingExample(Decision):
    """One line of a training split: a decision plus its full answer, which a suite never
    carries (the request contract keeps the answer out of what is scored)."""

    request: ChatRequest
    """Training renders the chat template: a training example is a chat request."""
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
    """One call read from an answer."""

    tool: str
    arguments: dict[str, Any]
    key_set: list[str]
    """The arguments' key set (core/keyset.py), sorted."""


class ParsedResponse(Strict):
    """What a model answer was read as. `calls[0]` is the scored call when there are several."""

    outcome: ParseOutcome
    calls: list[ToolCall] = Field(default_factory=list)
    source: Literal["structured", "hermes", "qwen3_coder"] | None = None
    """Where the calls were found: the OpenAI `tool_calls` field, or one of the text formats in the content."""
    error: str | None = None
    """Why the answer could not be read (malformed arguments, unknown tool, transport failure)."""

    @property
    def first(self) -> ToolCall | None:
        return self.calls[0] if self.calls else None


class DecisionScore(Strict):
    """Correctness of one answer. Fields that do not apply to the stratum are None."""

    joint_correct: bool | None = None
    """The target's tool with exactly its key set (or no call where the target is no call)."""
    tool_correct: bool | None = None
    """The target's tool, whatever the arguments."""
    tool_repeat: bool | None = None
    """known_failure: the historically failed tool was called again."""
    shape_repeat: bool | None = None
    """known_failure: the failed tool again with the failed action's key set."""
    exact_repeat: bool | None = None
    """known_failure: the failed call again with canonically equal arguments; None when they were withheld."""
    flags: list[str] = Field(default_factory=list)
    """Outcomes worth a look whatever the score (a malformed or unknown call, several calls)."""


class Usage(Strict):
    """Token counts the endpoint reported."""

    prompt_tokens: int = 0
    completion_tokens: int = 0


class EngineSettings(Strict):
    """`engine.json` in a run directory, written by whoever started the engine: the settings that make
    two machines' answers differ (a CPU engine's dtype follows the CPU kind), shown in the report."""

    dtype: str
    settings: str
    """The engine's settings that vary by CPU kind, in words."""
    cpu_model: str | None = None
    cpu_flags: list[str] = Field(default_factory=list)
    """The instruction-set flags that choose kernels (AVX2, AVX-512, AVX512-BF16, AMX, NEON, SVE)."""

    def line(self) -> str:
        cpu = f"; CPU {self.cpu_model}" if self.cpu_model else ""
        return f"{self.settings}{cpu} ({', '.join(self.cpu_flags) or 'no AVX2/AVX-512/AMX flags'})"


class ResultRecord(Strict):
    """One arm × decision: everything compare/gate/report need, without the endpoint."""

    arm: str
    decision_id: str
    stratum: str
    cluster: str
    workspace: Name
    target_tool: str | None = None
    """The decision's target tool (None: no call, or no target), kept for per-tool breakdowns."""
    model: str
    """The `model` the arm sent."""
    memory: str
    """The arm's memory condition."""
    raw_output: dict[str, Any] = Field(default_factory=dict)
    """The answer's message, the transport error and the finish reason, as received."""
    parsed: ParsedResponse
    score: DecisionScore
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    """Of the last attempt."""
    injected_rule_ids: list[str] = Field(default_factory=list)
    """The `lc:` rules the memory block carried (the ledger traces them)."""
    attempts: int = 1
    """Requests sent, retries included."""
    finished_at: datetime
    # The version that answered (a gateway's `X-Worker-Adapter`); None when the endpoint does
    # not say (an engine serves the arm's model itself).
    served_by: str | None = None
    replicate_of: str | None = None
    """The arm this one replicates (an A/A arm: same model, memory and decoding), None for any other."""
    thread: str | None = None
    """The decision's `thread` (`main` or a subagent's), for the breakdown by thread; None where it has none."""

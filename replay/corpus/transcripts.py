"""The transcript corpus a descriptor is resolved from (DESIGN §9): read-only, off the serving host.

A `descriptor` capture holds hashes, not text. The platform keeps its own record of every
session and the resolver (replay/corpus/resolve.py) reads it back through the `TranscriptSource`
protocol: a session is a set of `LoggedRequest`s, each a model call as the runtime sent it and the
answer that followed. Two sources exist: the runtime's own session files (Claude Code's,
replay/corpus/claude_code.py) and this project's own format, below; a platform can plug in its own.

This project's format is a directory, one file per session, `<root>/<workspace>/<session>.jsonl`:

```jsonl
{"workspace": "ws-a", "session": "s-19", "tools": [...], "tool_choice": "auto", "params": {"temperature": 0}}
{"role": "system", "content": "You keep the ledger."}
{"role": "user", "content": "Is INV-7 paid?"}
{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {...}}]}
{"role": "tool", "tool_call_id": "c1", "content": "{\"paid\": true}"}
```

The header gives the session's request settings: `tools` (full schemas; absent or null when
the runtime offered none), `tool_choice` (absent or null when the runtime did not send one)
and `params`, the other body fields the runtime sent with every turn (`temperature`,
`max_tokens`, `stream`, …; `model` is never needed: the gateway replaces it by the route's
target, which the descriptor records). Every further line is one message in the OpenAI chat
shape, as the runtime sent or received it. The request of turn *n* is the first *n* messages.

The header's `api` names the API the runtime spoke (`chat` when absent), and the lines are in that
API's own shape, the list the gateway hashed: `messages` — Anthropic Messages messages (content a
string or blocks: `text`, `tool_use`, `tool_result`), with the header's `system` (string or text
blocks, as sent) and `tools` with `input_schema` as offered; `responses` — the `input` items of
the Responses API (messages, `function_call`, `function_call_output`), with the header's
`instructions`. A Responses runtime that sent `input` as a string wrote it as one item
`{"role": "user", "content": ...}`.

Descriptor hashes are over the canonical form of each message (core/canonical.py), so a line may
spell a message any way that means the same prompt (a string or one text block, a key absent or
`null`). A store written before the canonical form (`hashing = "raw"`) hashed each message dict as
parsed, with every key it had: for those rows a line must be the message verbatim (`"tool_calls":
null` for a message that had no such key changes its hash, and `1` is not `1.0`), which is how
`transcript_lines` writes a session. Validation (`TranscriptMessage`) checks the shape without
touching the stored dict.

The corpus is another system's data, read off the serving host, so reading it is bounded:
workspace and session are names (`core.names`), a file or workspace directory that is a link
out of the corpus is refused, a session file is opened only when it is a regular file and never
through a link (`core.regularfile`), and a line longer than `MAX_LINE_BYTES` refuses its session as
unreadable (checked on the line's size, before any JSON is parsed) rather than stalling the
build on one pathological message.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from core.jsonfile import JsonFileError, read_jsonl_values
from core.names import NAME_RULE, Name, excerpt, is_name
from core.records import Strict
from core.wire import WIRES, DecisionApi
from core.wireshapes import NeutralAnswer
from replay.errors import ReplayError

MAX_LINE_BYTES = 1 << 20
"""The longest transcript line read (1 MiB): far more than any one message a model's context holds."""


class TranscriptError(ReplayError):
    """A transcript file that cannot be read as one; the message names the file and line."""


class TranscriptHeader(Strict):
    """The first line of a session file."""

    workspace: Name
    session: Name
    api: DecisionApi = "chat"
    """The API the runtime spoke: the shape of every further line and of the request rebuilt from them."""
    system: str | list[dict[str, Any]] | None = None
    """Messages: the `system` field as sent (absent when the runtime sent none)."""
    instructions: str | None = None
    """Responses: the `instructions` field as sent."""
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    params: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _fields_of_its_api(self) -> TranscriptHeader:
        if self.system is not None and self.api != "messages":
            raise ValueError(f"system is a Messages field; this session's api is {self.api!r}")
        if self.instructions is not None and self.api != "responses":
            raise ValueError(f"instructions is a Responses field; this session's api is {self.api!r}")
        return self


class TranscriptMessage(BaseModel):
    """The shape of one message line (other OpenAI fields are allowed: they are part of the hash)."""

    model_config = ConfigDict(extra="allow")
    role: str = Field(min_length=1)
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None


class TranscriptItem(BaseModel):
    """One Responses `input` item: a message (`role`) or a typed item (`function_call`, ...)."""

    model_config = ConfigDict(extra="allow")
    role: str | None = Field(None, min_length=1)
    type: str | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _role_or_type(self) -> TranscriptItem:
        if self.role is None and self.type is None:
            raise ValueError("an input item has a role or a type")
        return self


LINES: dict[DecisionApi, type[BaseModel]] = {"chat": TranscriptMessage, "messages": TranscriptMessage,
                                             "responses": TranscriptItem}


@dataclass(frozen=True)
class LoggedRequest:
    """One model call a session recorded: the request body as the runtime sent it (without `model`,
    which the gateway replaced by the route's target) and the neutral answer that followed it."""

    body: dict[str, Any]
    answer: NeutralAnswer | None
    """An OpenAI chat message (core/wire.py's neutral answer); None when no answer follows the request."""
    where: str
    """Where the record of this call is (`file:line`), for messages."""
    no_answer: str = ""
    """Why `answer` is None, in words."""
    thread: str | None = None
    """The conversation within the session it belongs to, when the record tells (`main`, or a subagent's id)."""
    parent_call: str | None = None
    """A subagent's call: the parent's `tool_use` id that started the subagent, when the record tells."""
    conversation_only: bool = False
    """Rebuilt from the conversation alone (a record without a request log): system prompt and tools unknown."""
    captured_at: str | None = None
    """When the call was made, where the record says (ISO time)."""
    mismatch: str = "the transcript changed"
    """What a message that differs from the captured one means for this record, in words."""
    model: str | None = None
    """The model the record says made the answer (Claude Code's `message.model`); None when it does not say."""
    paths: frozenset[str] = frozenset()
    """The paths the runtime wrote for its session, where the record says (Claude Code's `cwd`): redaction
    replaces them wherever they stand."""


class Session(Protocol):
    """One session of a transcript source: the API it spoke and the model calls it recorded."""

    @property
    def api(self) -> DecisionApi:
        """The API the runtime spoke in this session."""
        ...

    def requests(self, turn: int) -> list[LoggedRequest]:
        """Every recorded call whose request held exactly `turn` messages (Responses: input items)."""
        ...

    def extent(self) -> str:
        """What the record holds, in words (for a refusal: `the transcript has 3`)."""
        ...

    def problems(self) -> list[str]:
        """The recorded calls that cannot be rebuilt, each with its reason (`file:line: why`)."""
        ...


class TranscriptSource(Protocol):
    """Sessions by (workspace, session) id. None when the corpus has no such session; raises
    `TranscriptError` when it has one that cannot be read."""

    root: Path

    def session(self, workspace: str, session: str) -> Session | None: ...

    def holds(self, path: Path) -> bool:
        """Whether `path` is inside the corpus (where nothing may be written)."""
        ...


@dataclass(frozen=True)
class Transcript:
    """One session in this project's format: its request settings and its messages, each the dict the
    runtime sent."""

    header: TranscriptHeader
    messages: tuple[dict[str, Any], ...]
    origin: str  # where it was read from, for messages

    @property
    def api(self) -> DecisionApi:
        return self.header.api

    def body(self, turn: int) -> dict[str, Any]:
        """The request body of the turn that sent the first `turn` messages: the session's params, the
        messages (Responses: `input`), the system prompt where the API has a field for it, tools, tool choice."""
        header = self.header
        body: dict[str, Any] = {**header.params, WIRES[header.api].turn_field: list(self.messages[:turn])}
        body.pop("model", None)
        for field, value in (("system", header.system), ("instructions", header.instructions)):
            if value is not None:
                body[field] = value
        if self.header.tools is not None:
            body["tools"] = self.header.tools
        if self.header.tool_choice is not None:
            body["tool_choice"] = self.header.tool_choice
        return body

    def requests(self, turn: int) -> list[LoggedRequest]:
        if turn >= len(self.messages):
            return []
        answer = WIRES[self.api].transcript_answer(list(self.messages[turn:]))
        next_message = self.messages[turn]
        kind = next_message.get("role") or next_message.get("type")
        return [LoggedRequest(self.body(turn), answer, f"{self.origin}:{turn + 2}",
                              no_answer=f"message {turn} is a {kind!r} message, not the assistant's answer")]

    def extent(self) -> str:
        return f"the transcript has {len(self.messages)}"

    def problems(self) -> list[str]:
        return []  # a message line that cannot be read refuses the whole file


class TranscriptDir:
    """The default source: `<root>/<workspace>/<session>.jsonl`, only ever opened for reading."""

    def __init__(self, root: Path) -> None:
        if not root.is_dir():
            raise TranscriptError(f"no transcript directory at {root}")
        self.root = root

    def holds(self, path: Path) -> bool:
        """Whether `path` (resolved, symlinks followed) is in the corpus: nothing may be written there."""
        return path.resolve().is_relative_to(self.root.resolve())

    def path(self, workspace: str, session: str) -> Path | None:
        """The session's file, None for an id that is no name (it cannot name a file here)."""
        if not (is_name(workspace) and is_name(session)):
            return None
        return self.root / workspace / f"{session}.jsonl"

    def sessions(self, refused: list[str]) -> Iterator[tuple[str, str]]:
        """Every (workspace, session id) of the corpus, sorted. A workspace directory that is a link or whose name
        is no name, and a session file whose id is no name, is left out and named in `refused`."""
        for workspace_dir in sorted(p for p in self.root.iterdir() if p.is_dir()):
            if not is_name(workspace_dir.name):
                refused.append(f"{self.root}/{excerpt(workspace_dir.name)}: not a workspace's directory: its name "
                               f"must be a name ({NAME_RULE}); refused")
                continue
            if workspace_dir.is_symlink():
                refused.append(f"{workspace_dir}: a link, not a workspace's own directory; refused")
                continue
            for path in sorted(workspace_dir.glob("*.jsonl")):
                if is_name(path.stem):
                    yield workspace_dir.name, path.stem
                else:
                    refused.append(f"{workspace_dir}/{excerpt(path.name)}: not a session file: its id must be a "
                                   f"name ({NAME_RULE}); refused")

    def session(self, workspace: str, session: str) -> Transcript | None:
        """The session's transcript, None when the corpus has no such file; one that is no regular file (a FIFO, a
        device, a link) is refused, never opened (`core.regularfile`)."""
        path = self.path(workspace, session)
        if path is None or not os.path.lexists(path):
            return None
        if not self.holds(path):
            raise TranscriptError(f"{path}: a link out of the transcript directory {self.root}; refused")
        transcript = read_transcript(path)
        if (transcript.header.workspace, transcript.header.session) != (workspace, session):
            raise TranscriptError(f"{path}:1: the header names workspace {transcript.header.workspace!r}, session "
                                  f"{transcript.header.session!r}, but the file is {workspace}/{session}.jsonl")
        return transcript


def read_transcript(path: Path) -> Transcript:
    """One session file, validated line by line (errors name `file:line`)."""
    try:
        lines = list(read_jsonl_values(path, "a transcript line", MAX_LINE_BYTES, follow_links=False))
    except JsonFileError as exc:
        raise TranscriptError(str(exc)) from exc
    if not lines:
        raise TranscriptError(f"{path}: empty (a transcript starts with its header line)")
    bad = next((line for line in lines if line.value is None), None)
    if bad is not None:
        raise TranscriptError(f"{path}:{bad.number}: {'; '.join(bad.problems)}")
    (header_line, header_data), *rest = [(line.number, line.value) for line in lines if line.value is not None]
    try:
        header = TranscriptHeader.model_validate(header_data)
    except ValidationError as exc:
        raise TranscriptError(_schema_error(path, header_line, "header", exc)) from exc
    messages: list[dict[str, Any]] = []
    for number, data in rest:
        try:
            LINES[header.api].model_validate(data)
        except ValidationError as exc:
            raise TranscriptError(_schema_error(path, number, "message", exc)) from exc
        messages.append(data)
    return Transcript(header, tuple(messages), str(path))


def transcript_lines(header: TranscriptHeader, messages: Sequence[dict[str, Any]]) -> str:
    """A session file's text: the header, then each message verbatim (keys as sent, nothing added)."""
    head = header.model_dump(exclude_none=True, exclude_defaults=False)
    return "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in (head, *messages))


def _schema_error(path: Path, number: int, what: str, exc: ValidationError) -> str:
    reasons = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}" for e in exc.errors())
    return f"{path}:{number}: invalid {what}: {reasons}"

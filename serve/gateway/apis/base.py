"""What the shared forwarder (serve/gateway/proxy.py) needs to know of one API, and the neutral
reading of a request and an answer that routing, shadow, capture, the guard and trials use.

Each API module (`chat`, `messages`, `responses`) says, for its own wire shape: the engine path
it forwards to, how its errors look (JSON and in a stream), how a request's turn reads (the
messages as sent, the tools offered, the tool results it carries), how an answer reads (JSON
and rebuilt from its SSE stream), which stream event ends a whole answer and which says the engine
failed, and how a copy goes to a shadow candidate. Nothing outside
these modules looks at an API's shape: everything else sees a `Conversation` and an `Answer`.

The neutral answer is an OpenAI chat message (`content` and `tool_calls`), or a completion's
text: the form the shared tool-call parser reads. It is an internal reading only; requests and
answers are forwarded to the engine's own endpoint for that API untouched.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from core.jsonfile import MAX_LINE_BYTES, parse_problem
from core.records import ParsedResponse
from core.toolcalls import parse_response, parse_text, request_schemas
from core.wire import BadAnswerError as BadAnswerError  # the shared readings live in core/wire.py (replay uses them)
from core.wire import ToolReply
from core.wireshapes import FunctionTool, NeutralAnswer

ApiName = Literal["chat", "completions", "messages", "count_tokens", "responses"]
Answer = NeutralAnswer | str  # a chat message, or a completion's text
JSON_HEADERS = {"Content-Type": "application/json"}
MAX_EVENT_BYTES = MAX_LINE_BYTES
"""The longest stream event read (a Responses stream's last event holds the whole response)."""


@dataclass(frozen=True)
class Conversation:
    """A request's turn, read the same way whatever API it came through."""

    messages: list[Any]
    """The turn's messages exactly as sent, in order: what the descriptor hashes."""
    roles: list[str]
    tools: list[FunctionTool]
    """The offered tools in OpenAI's chat shape (`{"type": "function", "function": {name, parameters}}`),
    so the shared parser types text calls by the same schemas whatever API offered them."""
    tool_choice: str
    """The descriptor's label of the request's tool choice (`auto`, `required`, `function:<name>`...)."""
    replies: list[ToolReply] = field(default_factory=list)
    """The tool results at the end of the request: the results of the previous turn's calls."""
    request: dict[str, Any] = field(default_factory=dict)
    """What `full` capture stores: the request's conversation fields in the API's own shape."""

    def tool_names(self) -> frozenset[str] | None:
        """Names of the tools offered (None when none were: no unknown-tool check)."""
        if not self.tools:
            return None
        return frozenset(t["function"]["name"] for t in self.tools)

    def parse(self, answer: Answer) -> ParsedResponse:
        """Read an answer against the tools this request offered (names, and schemas to type text calls)."""
        names, schemas = self.tool_names(), request_schemas(self.tools)
        if isinstance(answer, dict):
            return parse_response(answer, names, schemas=schemas)
        return parse_text(answer, names, schemas=schemas)


@dataclass(frozen=True)
class SseEvent:
    """One whole event of an SSE stream, read once for everything that looks at it."""

    raw: bytes
    """Its bytes as received, with the blank line that ends it: what the client is sent."""
    name: str = ""
    """Its `event:` field ("" when it has none)."""
    data: Any = None
    """Its `data:` as a JSON object; None for `[DONE]`, for an event without data and for unreadable data."""
    done: bool = False
    """Its data is `[DONE]` (how an OpenAI stream ends)."""
    problem: str | None = None
    """Why its data cannot be read (not JSON, or JSON that is no object); None when it can."""


class SseEvents:
    """Splits an SSE byte stream into whole events as chunks arrive (a line or an event may be split across
    chunks). Unreadable data is reported, never skipped: an engine that sends it is broken, and a stream
    with a gap in it is no whole answer. An event is bounded (MAX_EVENT_BYTES), so a stream that never ends
    a line cannot fill the gateway's memory."""

    def __init__(self) -> None:
        self._lines: list[bytes] = []  # the current event's lines so far
        self._partial: list[bytes] = []  # the pieces of a line not ended yet (joined once it ends)
        self._size = 0  # the bytes of both

    def feed(self, chunk: bytes) -> list[SseEvent]:
        self._partial.append(chunk)
        self._size += len(chunk)
        events = []
        if b"\n" in chunk:
            *lines, rest = b"".join(self._partial).split(b"\n")
            self._partial = [rest]
            for line in lines:
                if line in (b"", b"\r"):
                    events.append(self._event(line))
                else:
                    self._lines.append(line)
            self._size = sum(len(line) + 1 for line in self._lines) + len(rest)
        if self._size > MAX_EVENT_BYTES:
            self._lines, self._partial, self._size = [], [], 0
            events.append(SseEvent(b"", problem=f"an event longer than {MAX_EVENT_BYTES} bytes"))
        return events

    def flush(self) -> list[SseEvent]:
        """What is left when the stream ends: a last event whose blank line never came, if any."""
        if rest := b"".join(self._partial):
            self._lines.append(rest)
        self._partial = []
        return [self._event(None)] if self._lines else []

    def _event(self, blank: bytes | None) -> SseEvent:
        lines, self._lines = self._lines, []
        raw = b"".join(line + b"\n" for line in lines) + (b"" if blank is None else blank + b"\n")
        name, data = b"", []
        for line in lines:
            field, _, value = line.rstrip(b"\r").partition(b":")
            value = value.removeprefix(b" ")
            if field == b"event":
                name = value
            elif field == b"data":
                data.append(value)
        text = b"\n".join(data).strip()
        if not data:  # a comment or a keep-alive: nothing to read
            return SseEvent(raw, name.decode(errors="replace"))
        if text == b"[DONE]":
            return SseEvent(raw, name.decode(errors="replace"), done=True)
        value, problem = parse_problem(text)
        if problem is None and not isinstance(value, dict):
            problem = f"JSON that is no object ({type(value).__name__})"
        return SseEvent(raw, name.decode(errors="replace"), value if problem is None else None, problem=problem)


def failure_message(error: Any) -> str:
    """The message of an engine's error object (the object itself, cut short, when it holds none)."""
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    return json.dumps(error)[:300]


class Accumulator(ABC):
    """Rebuilds the final answer from an API's stream events as they are relayed."""

    @abstractmethod
    def event(self, name: str, data: Any) -> None:
        """One readable SSE event (`data` None for `[DONE]` and for an event without data)."""

    @abstractmethod
    def answer(self) -> Answer:
        """The answer the stream amounted to."""


class Api(ABC):
    """One API the gateway serves over the shared forwarder."""

    name: ApiName
    path: str
    """The engine's endpoint for it (the gateway serves the same path)."""
    generates = True
    """False for requests that only measure (count_tokens): no stream, no shadow, no output limit."""
    captures = True
    """Whether its turns are decisions (capture and the guard): a completion has no tool loop."""
    session_headers: tuple[str, ...] = ()
    """Headers the API's runtime sends its session id in, read after X-Session-Id."""

    # --- errors ------------------------------------------------------------------------------

    @abstractmethod
    def error_body(self, message: str, code: str, status: int) -> dict[str, Any]:
        """A JSON error in this API's shape."""

    def error_status(self, status: int, code: str) -> int:
        """The status this API's clients expect for a gateway error (Anthropic's overloaded is 529)."""
        return status

    def error_headers(self, status: int) -> dict[str, str]:
        """Headers this API's SDKs read on an error (e.g. whether to retry)."""
        return {}

    @abstractmethod
    def sse_error(self, message: str, code: str, status: int) -> bytes:
        """The event that ends a stream that failed after it started."""

    # --- reading streams ---------------------------------------------------------------------

    @abstractmethod
    def stream_end(self, event: SseEvent) -> bool:
        """Whether `event` is the last event of a whole stream: a stream that ends without one is not a
        whole answer, and the client is told so."""

    @abstractmethod
    def stream_failure(self, event: SseEvent) -> str | None:
        """The engine's message when `event` says the generation failed (the API's error event), else None."""

    # --- reading requests and answers ---------------------------------------------------------

    @abstractmethod
    def conversation(self, body: Mapping[str, Any]) -> Conversation:
        """The request's turn in neutral form (never raises on a malformed body: fields it cannot read are empty)."""

    def check(self, body: Mapping[str, Any]) -> None:
        """Refuse (GatewayError) a field this API's forwarding cannot honour; most APIs take every field."""
        return None

    def force_tool(self, body: dict[str, Any]) -> bool:
        """Make a request that offers tools and chooses none call one of them (`gateway.forced_tool_routes`;
        core/wire.py's `Wire.force_tool`, which replay applies to a decision the gateway forced). False when
        it offers no tools or already chooses, and for an API without tools."""
        return False

    def session(self, body: Mapping[str, Any]) -> str | None:
        """A session id the runtime put in the body, if any (not checked: the caller keeps it only if a name)."""
        return None

    def output_limit(self, body: Mapping[str, Any]) -> str | None:
        """The body field that bounds the answer's tokens, when the gateway clamps it for this API."""
        return None

    @abstractmethod
    def answer(self, payload: Any) -> Answer:
        """The neutral answer of a 200 JSON payload; BadAnswerError when it is not this API's answer."""

    @abstractmethod
    def accumulator(self) -> Accumulator:
        """A fresh rebuilder of this API's stream."""

    def stream_ok(self, content_type: str) -> bool:
        return content_type.startswith("text/event-stream")

    def shadow_body(self, body: Mapping[str, Any], candidate: str) -> dict[str, Any]:
        """The production request re-addressed to the candidate, never streamed."""
        shadow = {k: v for k, v in body.items() if k != "stream_options"}
        shadow["model"] = candidate
        shadow["stream"] = False
        return shadow

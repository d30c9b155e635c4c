"""What the shared forwarder (serve/gateway/proxy.py) needs to know of one API, and the neutral
reading of a request and an answer that routing, shadow, capture, the guard and trials use.

Each API module (`chat`, `messages`, `responses`) says, for its own wire shape: the engine path
it forwards to, how its errors look (JSON and in a stream), how a request's turn reads (the
messages as sent, the tools offered, the tool results it carries), how an answer reads (JSON
and rebuilt from its SSE stream), and how a copy goes to a shadow candidate. Nothing outside
these modules looks at an API's shape: everything else sees a `Conversation` and an `Answer`.

The neutral answer is an OpenAI chat message (`content` and `tool_calls`), or a completion's
text: the form the shared tool-call parser reads. It is an internal reading only; requests and
answers are forwarded to the engine's own endpoint for that API untouched.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from core.jsonfile import parse_problem
from core.records import ParsedResponse
from core.toolcalls import parse_response, parse_text, request_schemas
from core.wire import BadAnswerError as BadAnswerError  # the shared readings live in core/wire.py (replay uses them)
from core.wire import ToolReply
from core.wireshapes import FunctionTool, NeutralAnswer

ApiName = Literal["chat", "completions", "messages", "count_tokens", "responses"]
Answer = NeutralAnswer | str  # a chat message, or a completion's text
JSON_HEADERS = {"Content-Type": "application/json"}


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


class SseEvents:
    """Splits an SSE byte stream into (event name, parsed JSON data) as chunks arrive (lines may be
    split across chunks); `[DONE]` is reported as data None. Unreadable data is skipped."""

    def __init__(self) -> None:
        self._buffer = b""
        self._event = ""

    def feed(self, chunk: bytes) -> list[tuple[str, Any]]:
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        events: list[tuple[str, Any]] = []
        for raw in lines:
            line = raw.strip()
            if line.startswith(b"event:"):
                self._event = line[6:].strip().decode(errors="replace")
            elif line.startswith(b"data:"):
                data = line[5:].strip()
                if data == b"[DONE]":
                    events.append((self._event, None))
                else:
                    value, problem = parse_problem(data)
                    if problem is None:
                        events.append((self._event, value))
            elif not line:
                self._event = ""
        return events


class Accumulator(ABC):
    """Rebuilds the final answer from an API's SSE stream as it is relayed."""

    done = False
    """The stream's end event was seen: the answer is whole."""

    def __init__(self) -> None:
        self._events = SseEvents()

    def feed(self, chunk: bytes) -> None:
        """Take the next bytes of the stream."""
        for name, data in self._events.feed(chunk):
            self.event(name, data)

    @abstractmethod
    def event(self, name: str, data: Any) -> None:
        """One SSE event (`data` None for `[DONE]`)."""

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
    stream_ends: tuple[bytes, ...] = ()
    """What only the last event of a whole stream holds (any one of them): a stream that ends without one
    is not a whole answer, and the client is told so."""

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

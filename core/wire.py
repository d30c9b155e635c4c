"""The neutral reading of the three tool-loop APIs' wire shapes, shared by the gateway and replay.

The gateway's API modules (serve/gateway/apis/) read a live request's turn and answer with these
functions; replay reads a captured decision, its transcript and the engine's answer with the very
same ones, so a call the gateway captured as `lookup` with keys `{id}` is the call replay scores
as `lookup` with keys `{id}`, whatever API carried it. The neutral answer is an OpenAI chat
message (`content` and `tool_calls`): the form the shared tool-call parser (core/toolcalls.py)
reads. Offered tools are read as OpenAI function tools, so text calls are typed by the same
schemas. It is a reading only: nothing here rewrites a request or an answer.

`Wire` says, per API (`chat`, `messages`, `responses`), where a request keeps its turn (the list
the descriptor's message hashes are over), its system prompt, its tools and tool choice, how an
answer reads and how its usage is counted: what replay needs to send a decision through the API it
was captured on. `Replies` is how a turn ends: the tool results it carries, each named by the call it
answers, and the assistant turn that made those calls; the gateway's guard labels live results with
it, and replay's rule uptake finds a rejected call with it, so both read a turn alike in every API.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, cast

from core.capture_store import choice_label
from core.errors import WorkerTierError
from core.wireshapes import (
    ChatToolCall,
    ChatUsage,
    FunctionTool,
    InBlock,
    InChatMessage,
    InChatTool,
    InFunction,
    InItem,
    InMessagesTool,
    InPart,
    InResponsesTool,
    InToolChoice,
    MessagesUsage,
    NeutralAnswer,
)

DecisionApi = Literal["chat", "messages", "responses"]
"""The APIs a decision can be captured on and replayed through."""

_T = TypeVar("_T")


class BadAnswerError(WorkerTierError, ValueError):
    """A 200 answer without the fields that API's answer must have."""


def function_tool(name: object, parameters: object) -> FunctionTool | None:
    """An offered tool in OpenAI's chat shape, or None when it has no usable name."""
    if not isinstance(name, str) or not name:
        return None
    return {"type": "function", "function": {"name": name, "parameters": parameters
                                             if isinstance(parameters, Mapping) else {}}}


def make_strict(tools: object, function_key: str | None) -> bool:
    """Mark every offered tool strict (in place); False when there is none to mark."""
    given = [t.get(function_key) if function_key else t for t in tools if isinstance(t, dict)] \
        if isinstance(tools, list) else []
    entries: list[dict[str, object]] = [e for e in given if isinstance(e, dict) and isinstance(e.get("name"), str)]
    for entry in entries:
        entry["strict"] = True
    return bool(entries)


def tool_call(call_id: object, name: object, arguments: object) -> ChatToolCall:
    """One call in OpenAI's chat shape; arguments that are not text are written as JSON text."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments if arguments is not None else {})
    return {"id": call_id if isinstance(call_id, str) else None, "type": "function",
            "function": {"name": name if isinstance(name, str) else "", "arguments": text}}


@dataclass(frozen=True)
class ToolReply:
    """One tool result as the next request of a tool loop carries it."""

    call_id: str | None
    tool: str
    content: object
    is_error: bool = False  # the runtime itself marked it failed (Anthropic's `is_error`)


@dataclass(frozen=True)
class Replies:
    """The end of a turn: the tool results it carries (the results of the previous turn's calls), and
    that previous assistant turn as a neutral answer (None when no assistant turn comes before them)."""

    answered: NeutralAnswer | None = None
    replies: list[ToolReply] = field(default_factory=list)

    def reply_to_first_call(self) -> ToolReply | None:
        """The result of the answered turn's first call (the scored one): by call id, else the first result."""
        calls = (self.answered or {}).get("tool_calls") or []
        first_id = calls[0].get("id") if calls and isinstance(calls[0], Mapping) else None
        return next((r for r in self.replies if r.call_id == first_id), self.replies[0] if self.replies else None)


def _call_names(answer: NeutralAnswer | None) -> dict[str, str]:
    """Call id -> tool name, of a neutral answer's calls."""
    return {str(c.get("id")): str(c["function"].get("name") or "") for c in (answer or {}).get("tool_calls") or []
            if isinstance(c, Mapping) and isinstance(c.get("function"), Mapping)}


def _reply(call_id: object, name: str, content: object, is_error: bool = False) -> ToolReply:
    return ToolReply(call_id if isinstance(call_id, str) else None, name, content, is_error)


def _trailing(turn: Sequence[object], is_result: Callable[[Mapping[str, object]], bool]) -> list[Mapping[str, object]]:
    """The run of tool results that ends a turn, in order."""
    start = len(turn)
    while start > 0 and isinstance(entry := turn[start - 1], Mapping) and is_result(entry):
        start -= 1
    return cast("list[Mapping[str, object]]", list(turn[start:]))


def chat_message(text: str, calls: list[ChatToolCall]) -> NeutralAnswer:
    """The neutral answer: an assistant chat message with the answer's text and calls."""
    message: NeutralAnswer = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    return message


# --- OpenAI Chat Completions --------------------------------------------------------------------

def chat_tools(tools: object) -> list[FunctionTool]:
    """The usable entries of an OpenAI `tools` list."""
    offered = []
    for tool in tools if isinstance(tools, list) else []:
        given = cast(InChatTool, tool).get("function") if isinstance(tool, Mapping) else None
        function = cast(InFunction, given) if isinstance(given, Mapping) else None
        if function is not None and (entry := function_tool(function.get("name"), function.get("parameters"))):
            offered.append(entry)
    return offered


def chat_choice_label(choice: object) -> str:
    """`choice_label` of a chat tool choice, `auto` when the request has none."""
    return choice_label("auto" if choice is None else choice)


def chat_replies(messages: Sequence[object]) -> Replies:
    """The `tool` messages after the last assistant message, each named by the call it answers."""
    tail = cast("list[InChatMessage]", _trailing(messages, lambda m: m.get("role") == "tool"))
    last = len(messages) - len(tail) - 1
    previous = messages[last] if tail and last >= 0 else None
    answered = cast(NeutralAnswer, dict(previous)) if isinstance(previous, Mapping) \
        and previous.get("role") == "assistant" else None
    names = _call_names(answered)
    return Replies(answered, [_reply(m.get("tool_call_id"), names.get(str(m.get("tool_call_id"))) or
                                     str(m.get("name") or ""), m.get("content")) for m in tail])


def first_choice(payload: Any, field: str, kind: type[_T]) -> _T:
    """`choices[0][field]` of an OpenAI answer, of type `kind`; BadAnswerError otherwise."""
    try:
        value = payload["choices"][0][field]
    except (KeyError, IndexError, TypeError) as exc:
        raise BadAnswerError(f"the answer has no choices[0].{field}") from exc
    if not isinstance(value, kind):
        raise BadAnswerError(f"choices[0] has a malformed {field}")
    return value


# --- Anthropic Messages -------------------------------------------------------------------------

def blocks(content: object) -> list[InBlock]:
    """A message's content as blocks (a string is one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [cast(InBlock, b) for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def messages_tools(tools: object) -> list[FunctionTool]:
    """Anthropic tools (`name`, `input_schema`) as OpenAI function tools."""
    given = [cast(InMessagesTool, t) for t in tools if isinstance(t, Mapping)] if isinstance(tools, list) else []
    return [entry for t in given if (entry := function_tool(t.get("name"), t.get("input_schema")))]


def messages_choice_label(choice: object) -> str:
    """Anthropic's tool choice as the descriptor labels an OpenAI one: `any` is `required`."""
    if not isinstance(choice, Mapping):
        return "auto"
    given = cast(InToolChoice, choice)
    kind = given.get("type")
    if kind == "tool":
        return f"function:{given.get('name', '')}"
    return {"any": "required", "none": "none"}.get(str(kind), "auto")


def messages_answer(content: object) -> NeutralAnswer:
    """The neutral answer of a message's content blocks: its text joined, each `tool_use` block a call."""
    text = "".join(t for b in blocks(content) if b.get("type") == "text" and isinstance(t := b.get("text"), str))
    calls = [tool_call(b.get("id"), b.get("name"), b.get("input")) for b in blocks(content)
             if b.get("type") == "tool_use"]
    return chat_message(text, calls)


def messages_replies(messages: Sequence[object]) -> Replies:
    """The `tool_result` blocks of the last message (a user turn), named by the previous message's `tool_use` blocks."""
    last = messages[-1] if messages else None
    if not isinstance(last, Mapping) or last.get("role") != "user":
        return Replies()
    results = [b for b in blocks(cast(InChatMessage, last).get("content")) if b.get("type") == "tool_result"]
    if not results:
        return Replies()
    before = messages[-2] if len(messages) >= 2 else None
    previous = cast(InChatMessage, before) if isinstance(before, Mapping) else InChatMessage()
    answered = messages_answer(previous.get("content")) if previous.get("role") == "assistant" else None
    names = _call_names(answered)
    return Replies(answered, [_reply(b.get("tool_use_id"), names.get(str(b.get("tool_use_id")), ""), b.get("content"),
                                     b.get("is_error") is True) for b in results])


# --- OpenAI Responses ---------------------------------------------------------------------------

def items(value: object) -> list[object]:
    """`input` as items: a string is one user message."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return cast("list[object]", value) if isinstance(value, list) else []


def responses_tools(tools: object) -> list[FunctionTool]:
    """The function tools of a Responses `tools` list (`name`, `parameters` at the top level)."""
    given = [cast(InResponsesTool, t) for t in tools if isinstance(t, Mapping)] if isinstance(tools, list) else []
    return [entry for t in given if t.get("type") == "function"
            and (entry := function_tool(t.get("name"), t.get("parameters")))]


def responses_choice_label(choice: object) -> str:
    if isinstance(choice, Mapping):
        given = cast(InToolChoice, choice)
        return f"function:{given.get('name', '')}" if given.get("type") == "function" else str(given.get("type"))
    return "auto" if choice is None else str(choice)


def responses_answer(response: object) -> NeutralAnswer:
    """The neutral answer of a response: its messages' `output_text` joined, each `function_call` item a call."""
    output = response.get("output") if isinstance(response, Mapping) else None
    if not isinstance(output, list):
        raise BadAnswerError("the answer has no output items")
    text: list[str] = []
    calls: list[ChatToolCall] = []
    for given in output:
        if not isinstance(given, Mapping):
            continue
        item = cast(InItem, given)
        if item.get("type") == "message":
            parts = item.get("content")
            text += [t for p in parts if isinstance(p, Mapping) and cast(InPart, p).get("type") == "output_text"
                     and isinstance(t := cast(InPart, p).get("text"), str)] if isinstance(parts, list) else []
        elif item.get("type") == "function_call":
            calls.append(tool_call(item.get("call_id"), item.get("name"), item.get("arguments")))
    return chat_message("".join(text), calls)


def _as_output(run: Sequence[object]) -> dict[str, list[dict[str, object]]]:
    """Input items a response produced, as that response's `output` (a message item may omit its `type`)."""
    return {"output": [{**cast(InItem, i), "type": cast(InItem, i).get("type") or "message"} for i in run]}


def responses_replies(given: Sequence[object]) -> Replies:
    """The `function_call_output` items that end the input, each named by the `function_call` item it answers;
    the answered turn is the run of output items just before them."""
    tail = cast("list[InItem]", _trailing(given, lambda i: i.get("type") == "function_call_output"))
    if not tail:
        return Replies()
    start = len(given) - len(tail)
    while start > 0 and is_output_item(given[start - 1]):
        start -= 1
    run = given[start:len(given) - len(tail)]
    answered = responses_answer(_as_output(run)) if run else None
    names = {str(i.get("call_id")): str(i.get("name") or "") for i in
             (cast(InItem, g) for g in given if isinstance(g, Mapping)) if i.get("type") == "function_call"}
    return Replies(answered, [_reply(i.get("call_id"), names.get(str(i.get("call_id")), ""), i.get("output"))
                              for i in tail])


def is_output_item(item: object) -> bool:
    """Whether an input item is something a response produced (a model message, a call, reasoning)."""
    return isinstance(item, Mapping) and (cast(InItem, item).get("role") == "assistant"
                                          or cast(InItem, item).get("type") in ("function_call", "reasoning"))


# --- one API's shape, for replay ----------------------------------------------------------------

class Wire:
    """Where one API keeps what a decision needs, and how its answer reads. Chat is the base."""

    api: DecisionApi = "chat"
    path = "/chat/completions"
    """The endpoint under the `/v1` base URL."""
    turn_field = "messages"
    """The request field the descriptor's message hashes are over."""
    system_field: str | None = None
    """The request field that holds the system prompt (None: a `system` message in the turn)."""
    limit_field = "max_tokens"
    """The request field that bounds the answer's tokens."""
    request_fields: tuple[str, ...] = ("messages", "tools", "tool_choice")
    """What a decision's `request` holds (the conversation fields `full` capture stores)."""

    def tools(self, tools: object) -> list[FunctionTool]:
        """The offered tools as OpenAI function tools."""
        return chat_tools(tools)

    def force_tool(self, body: dict[str, object]) -> bool:
        """Make a request that offers tools and chooses none call one of them, in place, as a forced tool route
        does (`gateway.forced_tool_routes`): the API's "any tool" choice, with the offered tools made strict so
        that the engine's structured output holds the call to their schemas (vLLM enforces a schema only for a
        strict tool). False when it offers no tools or already chooses."""
        if body.get("tool_choice") is not None or not make_strict(body.get("tools"), "function"):
            return False
        body["tool_choice"] = "required"
        return True

    def choice(self, choice: object) -> str:
        """The descriptor's label of a request's tool choice."""
        return chat_choice_label(choice)

    def answer(self, payload: object) -> NeutralAnswer:
        """The neutral answer of a 200 JSON answer; BadAnswerError when it is not this API's answer."""
        return cast(NeutralAnswer, first_choice(payload, "message", dict))

    def replies(self, turn: Sequence[object]) -> Replies:
        """The tool results that end a turn and the assistant answer they answer."""
        return chat_replies(turn)

    def transcript_answer(self, after: Sequence[Mapping[str, object]]) -> NeutralAnswer | None:
        """The neutral answer that follows a turn in a transcript (None when the next line is no answer)."""
        if not after or after[0].get("role") != "assistant":
            return None
        return cast(NeutralAnswer, after[0])

    def finish(self, payload: Mapping[str, object]) -> object:
        choices = payload.get("choices")
        first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], Mapping) else {}
        return first.get("finish_reason")

    def usage(self, payload: Mapping[str, object]) -> tuple[int, int]:
        """(prompt tokens, completion tokens) as the answer reports them."""
        given = payload.get("usage")
        usage = cast(ChatUsage, given) if isinstance(given, Mapping) else ChatUsage()
        return _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))


class MessagesWire(Wire):
    api: DecisionApi = "messages"
    path = "/messages"
    system_field = "system"
    request_fields = ("system", "messages", "tools", "tool_choice")

    def tools(self, tools: object) -> list[FunctionTool]:
        return messages_tools(tools)

    def force_tool(self, body: dict[str, object]) -> bool:
        if body.get("tool_choice") is not None or not make_strict(body.get("tools"), None):
            return False
        body["tool_choice"] = {"type": "any"}
        return True

    def choice(self, choice: object) -> str:
        return messages_choice_label(choice)

    def replies(self, turn: Sequence[object]) -> Replies:
        return messages_replies(turn)

    def answer(self, payload: object) -> NeutralAnswer:
        content = payload.get("content") if isinstance(payload, Mapping) else None
        if not isinstance(content, list):
            raise BadAnswerError("the answer has no content blocks")
        return messages_answer(content)

    def transcript_answer(self, after: Sequence[Mapping[str, object]]) -> NeutralAnswer | None:
        if not after or after[0].get("role") != "assistant":
            return None
        return messages_answer(after[0].get("content"))

    def finish(self, payload: Mapping[str, object]) -> object:
        return payload.get("stop_reason")

    def usage(self, payload: Mapping[str, object]) -> tuple[int, int]:
        given = payload.get("usage")
        usage = cast(MessagesUsage, given) if isinstance(given, Mapping) else MessagesUsage()
        return _count(usage.get("input_tokens")), _count(usage.get("output_tokens"))


class ResponsesWire(MessagesWire):
    api: DecisionApi = "responses"
    path = "/responses"
    turn_field = "input"
    system_field = "instructions"
    limit_field = "max_output_tokens"
    request_fields = ("instructions", "input", "tools", "tool_choice")

    def tools(self, tools: object) -> list[FunctionTool]:
        return responses_tools(tools)

    def force_tool(self, body: dict[str, object]) -> bool:
        offered = cast("Iterable[object]", body.get("tools") or [])
        functions = [t for t in offered if isinstance(t, dict) and t.get("type") == "function"]
        if body.get("tool_choice") is not None or not make_strict(functions, None):
            return False
        body["tool_choice"] = "required"
        return True

    def choice(self, choice: object) -> str:
        return responses_choice_label(choice)

    def replies(self, turn: Sequence[object]) -> Replies:
        return responses_replies(turn)

    def answer(self, payload: object) -> NeutralAnswer:
        return responses_answer(payload)

    def transcript_answer(self, after: Sequence[Mapping[str, object]]) -> NeutralAnswer | None:
        output = []
        for item in after:
            if not is_output_item(item):
                break
            output.append(item)
        if not output:
            return None
        return responses_answer(_as_output(output))

    def finish(self, payload: Mapping[str, object]) -> object:
        return payload.get("status")


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


WIRES: dict[DecisionApi, Wire] = {wire.api: wire for wire in (Wire(), MessagesWire(), ResponsesWire())}

"""The wire shapes core/wire.py reads and builds, as TypedDicts.

Two kinds. What arrives (`In…`, and the usage objects) is untrusted JSON: each names the keys the
reading uses, so a misspelt key is a type error, but every value is `object`, because nothing has
checked it yet and each reading still checks it (`isinstance`) before use. What core/wire.py builds
(`FunctionTool`, `NeutralAnswer` and their parts) is typed as it is built: an offered tool in
OpenAI's chat shape and the neutral answer, an OpenAI chat message. A chat answer is the engine's
message as received (nothing is rebuilt), so a reader of `NeutralAnswer` still checks its values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypedDict

# --- what core/wire.py builds -------------------------------------------------------------------


class FunctionSchema(TypedDict):
    """An offered function: its name and its `parameters` JSON schema (`{}` when it gave none)."""

    name: str
    parameters: Mapping[str, object]


class FunctionTool(TypedDict):
    """An offered tool in OpenAI's chat shape, whatever API offered it."""

    type: Literal["function"]
    function: FunctionSchema


class CallFunction(TypedDict):
    """What a call calls: the tool's name and its arguments as JSON text."""

    name: str
    arguments: str


class ChatToolCall(TypedDict):
    """One call in OpenAI's chat shape (`id` None when the API gave no text id)."""

    id: str | None
    type: Literal["function"]
    function: CallFunction


class NeutralAnswer(TypedDict, total=False):
    """An assistant chat message: the form the shared tool-call parser reads, whatever API answered."""

    role: str
    content: str | None
    tool_calls: list[ChatToolCall]


# --- what arrives (every value unchecked) --------------------------------------------------------


class InChatMessage(TypedDict, total=False):
    """A chat `messages` entry: a turn's message, or an answer's `choices[0].message`."""

    role: object
    content: object
    tool_calls: object
    tool_call_id: object
    name: object


class InChatTool(TypedDict, total=False):
    """An entry of a chat request's `tools`."""

    type: object
    function: object


class InFunction(TypedDict, total=False):
    """A chat tool's `function`."""

    name: object
    parameters: object


class InMessagesTool(TypedDict, total=False):
    """An entry of a Messages request's `tools`."""

    name: object
    input_schema: object


class InResponsesTool(TypedDict, total=False):
    """An entry of a Responses request's `tools` (a function tool keeps its fields at the top level)."""

    type: object
    name: object
    parameters: object


class InToolChoice(TypedDict, total=False):
    """A tool choice given as an object (Messages: `{type: tool, name}`, Responses: `{type: function, name}`)."""

    type: object
    name: object


class InBlock(TypedDict, total=False):
    """A Messages content block: `text` (text), `tool_use` (id, name, input), `tool_result` (tool_use_id,
    content, is_error)."""

    type: object
    text: object
    id: object
    name: object
    input: object
    tool_use_id: object
    content: object
    is_error: object


class InItem(TypedDict, total=False):
    """A Responses input or output item: a message (role, content), `function_call` (call_id, name,
    arguments), `function_call_output` (call_id, output), `reasoning`."""

    type: object
    role: object
    content: object
    call_id: object
    name: object
    arguments: object
    output: object


class InPart(TypedDict, total=False):
    """A part of a Responses message's `content` (`output_text` carries `text`)."""

    type: object
    text: object


class ChatUsage(TypedDict, total=False):
    """A chat answer's `usage`."""

    prompt_tokens: object
    completion_tokens: object


class MessagesUsage(TypedDict, total=False):
    """A Messages or Responses answer's `usage`."""

    input_tokens: object
    output_tokens: object

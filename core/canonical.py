"""The canonical form of a request, over which a descriptor's hashes are taken (DESIGN §9, §11).

A descriptor proves "the model saw this prompt" to a resolver that reads the conversation back from
another record of it: the runtime's own session files, the project's transcripts. Those records keep
the prompt, not the bytes: Claude Code sends a first prompt as a string and logs it as one text
block, sends a system reminder as a string and logs it as blocks, and logs no `cache_control` (it
records where it went). So the gateway and every resolver hash one canonical form, computed here and
nowhere else, in which spellings that mean the same prompt are one:

* a message's `content` string is one text block (Responses: one `input_text` / `output_text`
  part; a Responses item with a `role` and no `type` is a `message`);
* `cache_control` is gone from every block, and a key whose value is `null` is absent;
* a number that is whole is an integer (`1.0` is `1`, as JavaScript writes it);
* Messages: the `system` field is blocks too, without the billing block Claude Code adds at send
  time (`x-anthropic-billing-header: …`, a text block its request log does not keep);
* tools lose `strict` and `cache_control` (a forced tool route sets `strict`).

The request hash is over the canonical turn, system prompt and tools and every other body field but
those the gateway sets itself or that only say how the answer travels: `model` (the route's target,
recorded as the descriptor's adapter), the output limit (clamped), `tool_choice` (a forced route
sets it; the descriptor records the choice the model saw and whether the gateway forced it),
`stream`, `stream_options`, `metadata` and `user`. A message hash is the full sha256 of the message's
compact, sorted-key JSON: the very hash Claude Code's request log keys its messages by.

Stores written before this form hold hashes of the raw body (`core.capture_store.message_hash`,
`request_sha256`); their rows say `hashing = "raw"`, and the resolver checks each row by its own form.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from core.wire import WIRES, DecisionApi

BILLING_PREFIX = "x-anthropic-billing-header:"
NOT_PROMPT = frozenset({"model", "tool_choice", "stream", "stream_options", "metadata", "user",
                        "max_tokens", "max_completion_tokens", "max_output_tokens"})
"""Body fields outside the request hash: set by the gateway, or about how the answer travels."""


def plain(value: Any) -> Any:
    """`value` with `cache_control` and null-valued keys dropped from every object, whole floats as integers."""
    if isinstance(value, str):  # most leaves, returned before the slower abstract `Mapping` check
        return value
    if isinstance(value, (dict, Mapping)):
        return {k: plain(v) for k, v in value.items() if k != "cache_control" and v is not None}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def _text_part(api: DecisionApi, role: Any) -> str:
    if api == "responses":
        return "output_text" if role == "assistant" else "input_text"
    return "text"


def canonical_message(api: DecisionApi, message: Any) -> Any:
    """One message (Responses: one input item) in the canonical form."""
    if not isinstance(message, Mapping):
        return plain(message)
    canonical = plain(message)
    if api == "responses" and "role" in canonical and "type" not in canonical:
        canonical["type"] = "message"
    if isinstance(canonical.get("content"), str):
        canonical["content"] = [{"type": _text_part(api, canonical.get("role")), "text": canonical["content"]}]
    return canonical


def canonical_system(system: Any) -> Any:
    """A Messages `system` field as blocks, without Claude Code's billing block."""
    blocks = [{"type": "text", "text": system}] if isinstance(system, str) else plain(system)
    if not isinstance(blocks, list):
        return blocks
    return [b for b in blocks if not (isinstance(b, Mapping) and isinstance(b.get("text"), str)
                                      and b["text"].startswith(BILLING_PREFIX))]


def canonical_tool(tool: Any) -> Any:
    """An offered tool without `strict` (at its top or in its `function`) and `cache_control`."""
    if not isinstance(tool, Mapping):
        return plain(tool)
    canonical = {k: plain(v) for k, v in tool.items() if k not in ("strict", "cache_control") and v is not None}
    if isinstance(canonical.get("function"), dict):
        canonical["function"] = {k: v for k, v in canonical["function"].items() if k != "strict"}
    return canonical


def canonical_request(api: DecisionApi, body: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a request body the request hash covers, in the canonical form."""
    wire = WIRES[api]
    canonical: dict[str, Any] = {}
    for key, value in body.items():
        if key in NOT_PROMPT or value is None:
            continue
        if key == wire.turn_field:
            turn = [{"role": "user", "content": value}] if api == "responses" and isinstance(value, str) else value
            canonical[key] = [canonical_message(api, m) for m in turn] if isinstance(turn, list) else plain(turn)
        elif key == "system" and api == "messages":
            canonical[key] = canonical_system(value)
        elif key == "tools":
            canonical[key] = [canonical_tool(t) for t in value] if isinstance(value, list) else plain(value)
        else:
            canonical[key] = plain(value)
    for key in ("system", "tools"):
        if canonical.get(key) == []:
            del canonical[key]
    return canonical


def digest(value: Any) -> str:
    """sha256 of compact, sorted-key JSON, non-ASCII as UTF-8 (as JavaScript's JSON writes it)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def message_digest(api: DecisionApi, message: Any) -> str:
    """The descriptor's hash of one message."""
    return digest(canonical_message(api, message))


def request_digest(api: DecisionApi, body: Mapping[str, Any]) -> str:
    """The descriptor's hash of a whole request."""
    return digest(canonical_request(api, body))

"""Redundant repeats: a target that makes again, with canonical-equal values, a call whose result the prompt
already holds and the guard reads ok (the worker looking INV-7 up again after it was answered `paid`).

Trained on, it teaches the loop the repeat measures count against (DESIGN §3's exact repeat), so curation
refuses it as a target. A call again after a failed result is a retry, not a repeat of an answer: it is left to
the classes (a retry of a known failure is `not_a_correction`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.guard import GuardKind, GuardRules, classify
from core.keyset import canonical_json
from core.wire import blocks


def answered_calls(request: Mapping[str, Any], rules: GuardRules) -> set[tuple[str, str]]:
    """(tool, canonical arguments) of every call in a Messages request whose result it holds, read ok."""
    calls: dict[str, tuple[str, str]] = {}
    answered: set[tuple[str, str]] = set()
    for message in request.get("messages") or []:
        if not isinstance(message, Mapping):
            continue
        for block in blocks(message.get("content")):
            if block.get("type") == "tool_use" and isinstance(block.get("name"), str):
                calls[str(block.get("id"))] = (str(block.get("name")), canonical_json(block.get("input") or {}))
            elif block.get("type") == "tool_result" and (call := calls.get(str(block.get("tool_use_id")))):
                kind = classify(block.get("content"), rules, call[0], is_error=bool(block.get("is_error")))
                if kind is GuardKind.OK:
                    answered.add(call)
    return answered


def redundant(request: Mapping[str, Any], tool: str | None, arguments: Mapping[str, Any],
              rules: GuardRules) -> bool:
    """Whether the target call (None: an answer, never redundant) repeats one the prompt holds an ok result of."""
    return tool is not None and (tool, canonical_json(dict(arguments))) in answered_calls(request, rules)

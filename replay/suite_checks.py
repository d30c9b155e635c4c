"""Checks of suite decisions beyond their schema (DESIGN §3). Pure: reasons, no I/O.

Rules a decision must meet:

* its stratum is built in or listed in `extra_strata`; positive strata have a `target`;
  `known_failure` has a `failed_action` (with `arguments` or `arg_keys`, consistent if both);
  a suite-defined stratum needs a `target` or a `failed_action`, or nothing could be scored;
* the target tool is one of the offered tools, `tool_choice` allows the target
  (`"none"` forbids a call, `"required"` forbids no call, a named function must be the target),
  and `arg_keys` is a key set (well-formed paths, no duplicates, every parent present);
* the request does not contain its answer: no assistant message (Responses: no output item)
  may follow the last user or tool message (such a message is the recorded next move, or part of it);
* the request carries no memory block: no `<standing_rules>` or `<memory>` tag in any
  message text, nor in the API's system field (Messages `system`, Responses `instructions`)
  (replay injects memory; a baked-in block would leak into every arm).

Tools and tool choice are read in the decision's API's shape (core/wire.py).

Across lines: ids are unique, and a decision state — the request the model sees, hashed
canonically — occurs once. The same state twice is one decision counted twice, and in two
strata it breaks their disjointness. The session is deliberately not part of the state: two
sessions with byte-identical requests give the model the same input.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any

from core.keyset import canonical_json, key_set, missing_parents
from core.records import BUILTIN_STRATA, KNOWN_FAILURE, POSITIVE_STRATA, Decision, Request
from core.wire import is_output_item

_MEMORY_TAG = re.compile(r"<\s*/?\s*(standing_rules|memory)\b", re.IGNORECASE)
_TURN_ROLES = ("user", "tool", "function")


def request_hash(request: Request) -> str:
    """sha256 of the canonical JSON of a request: the identity of a decision state."""
    return hashlib.sha256(canonical_json(request.model_dump(mode="json")).encode()).hexdigest()


def offered_tools(decision: Decision) -> list[str]:
    """The function names the decision's request offers, in order (read in its API's shape)."""
    return [tool["function"]["name"] for tool in decision.wire.tools(decision.request.tools)]


def message_text(message: dict[str, Any]) -> str:
    """The text of a chat message: a string `content` or its text parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def check_decision(decision: Decision, extra_strata: Iterable[str] = ()) -> list[str]:
    """Every reason this decision cannot be scored as recorded (empty when it is fine)."""
    return [
        *_check_stratum(decision, tuple(extra_strata)),
        *_check_target(decision),
        *_check_failed_action(decision),
        *_check_request(decision),
    ]


def check_across(decisions: Iterable[tuple[int, Decision]]) -> list[tuple[int, str]]:
    """(line, reason) for duplicate ids and for decision states that occur more than once."""
    problems: list[tuple[int, str]] = []
    ids: dict[str, tuple[int, str]] = {}
    states: dict[str, tuple[int, Decision]] = {}
    for line, decision in decisions:
        if decision.id in ids:
            first_line, first_stratum = ids[decision.id]
            where = "" if first_stratum == decision.stratum else f" in stratum {first_stratum!r}"
            problems.append((line, f"duplicate id {decision.id!r} (first at line {first_line}{where})"))
        else:
            ids[decision.id] = (line, decision.stratum)
        state = request_hash(decision.request)
        if state in states:
            first_line, first = states[state]
            if first.stratum == decision.stratum:
                reason = f"duplicate decision state: same request as {first.id!r} (line {first_line})"
            else:
                reason = (
                    f"strata not disjoint: same request as {first.id!r} (line {first_line}) "
                    f"in stratum {first.stratum!r}"
                )
            problems.append((line, reason))
        else:
            states[state] = (line, decision)
    return problems


def _check_stratum(decision: Decision, extra: tuple[str, ...]) -> list[str]:
    stratum = decision.stratum
    if stratum not in BUILTIN_STRATA and stratum not in extra:
        known = ", ".join((*BUILTIN_STRATA, *extra))
        return [f"unknown stratum {stratum!r} (known: {known}; suite.toml extra_strata adds more)"]
    if stratum in POSITIVE_STRATA and decision.target is None:
        return [f"stratum {stratum!r} needs a target (use tool null for a recorded no-call)"]
    if stratum == KNOWN_FAILURE and decision.failed_action is None:
        return ["known_failure decision has no failed_action"]
    if stratum in extra and decision.target is None and decision.failed_action is None:
        return [f"decision in stratum {stratum!r} has neither target nor failed_action: nothing to score"]
    return []


def _check_target(decision: Decision) -> list[str]:
    target = decision.target
    if target is None:
        return []
    problems = _check_key_list("target.arg_keys", target.arg_keys)
    offered = offered_tools(decision)
    if target.tool is not None and target.tool not in offered:
        problems.append(f"target tool {target.tool!r} is not among the offered tools ({', '.join(offered) or 'none'})")
    choice = decision.wire.choice(decision.request.tool_choice)  # `any` (Messages) reads as `required`
    if choice == "none" and target.tool is not None:
        problems.append(f"tool_choice 'none' forbids the target call {target.tool!r}")
    if choice == "required" and target.tool is None:
        problems.append("tool_choice 'required' forbids the target (no call)")
    named = choice.removeprefix("function:") if choice.startswith("function:") else None
    if named is not None and named != target.tool:
        problems.append(f"tool_choice names {named or None!r} but the target is {target.tool!r}")
    if target.tool is None and target.arg_keys:
        problems.append("target with tool null cannot have arg_keys")
    return problems


def _check_failed_action(decision: Decision) -> list[str]:
    failed = decision.failed_action
    if failed is None:
        return []
    if failed.arguments is None and failed.arg_keys is None:
        return ["failed_action needs arguments or arg_keys"]
    problems = _check_key_list("failed_action.arg_keys", failed.arg_keys or [])
    if (failed.arguments is not None and failed.arg_keys is not None
            and key_set(failed.arguments) != set(failed.arg_keys)):
        problems.append("failed_action.arg_keys is not the key set of failed_action.arguments")
    return problems


def _check_key_list(field: str, keys: list[str]) -> list[str]:
    if len(set(keys)) != len(keys):
        return [f"{field} has duplicate keys"]
    try:
        orphans = missing_parents(keys)
    except ValueError as exc:
        return [f"{field}: {exc}"]
    if orphans:
        return [f"{field} is not a key set: parent path missing for {', '.join(orphans)}"]
    return []


def _check_request(decision: Decision) -> list[str]:
    messages = decision.turn
    if not messages:
        return ["request has no messages"]
    problems = []
    turns = [i for i, m in enumerate(messages) if m.get("role") in _TURN_ROLES
             or m.get("type") == "function_call_output"]
    if not turns:
        problems.append("request has no user or tool message")
    else:
        tail = [i for i in range(turns[-1] + 1, len(messages)) if is_output_item(messages[i])]
        if tail:
            problems.append(
                f"request contains its answer: messages[{tail[0]}] is an assistant turn after the last "
                "user/tool message"
            )
    for i, message in enumerate(messages):
        match = _MEMORY_TAG.search(message_text(message))
        if match:
            problems.append(f"messages[{i}] carries a memory block ({match.group(0)!r}); replay injects memory")
    field = decision.wire.system_field
    if field is not None and (match := _MEMORY_TAG.search(message_text({"content": getattr(decision.request, field,
                                                                                           None)}))):
        problems.append(f"{field} carries a memory block ({match.group(0)!r}); replay injects memory")
    return problems

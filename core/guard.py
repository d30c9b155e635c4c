"""The tool-outcome guard (001 S11): classify the result of a tool call, as the next request of a
tool loop carries it, into one anomaly kind or `ok`.

Pure and content-bounded: it reads one tool message, returns one kind, and keeps nothing. The
rules are data (`GuardRules`, the `[capture.guard]` table of the gateway config) so a
deployment can teach it its tools' envelopes without code. Checks run in a fixed order, the
first that matches wins:

1. empty content, or JSON `null` / `[]` / `{}` / `""` → `empty_result`;
2. text that is not JSON: a blocked pattern → `blocked`, an error pattern → `failed`, else
   `invalid_envelope` when JSON is expected (the default) or `ok`;
3. a JSON object that says success (`success`/`ok` true) but carries an error → `failure_in_success_channel`;
4. an error key with a value, or success false, or a failed status → `failed`, or `blocked`
   when its text matches a blocked pattern (permission, forbidden, …), or a blocked status;
5. a pending status → `pending`; a partial status or a truncation flag → `partial`;
6. a no-op status, or a change count of zero → `no_op`;
7. an object whose only collection (`results`, `items`, …) is empty → `empty_result`;
8. anything else → `ok`.

A result the runtime itself marked failed (Anthropic's `is_error`) is `failed`, or `blocked` when the
checks above say so: the runtime's word that it failed wins; the guard only says how.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from enum import StrEnum
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from core.jsonfile import parse_problem
from core.patterns import Pattern, search


class GuardKind(StrEnum):
    """The kind of one tool result: `ok` or an anomaly. A value is its string, so stores and files hold the
    same text as before it was an enum."""

    OK = "ok"
    EMPTY_RESULT = "empty_result"
    FAILURE_IN_SUCCESS_CHANNEL = "failure_in_success_channel"
    INVALID_ENVELOPE = "invalid_envelope"
    FAILED = "failed"
    BLOCKED = "blocked"
    PARTIAL = "partial"
    PENDING = "pending"
    NO_OP = "no_op"


ANOMALIES: tuple[GuardKind, ...] = tuple(k for k in GuardKind if k is not GuardKind.OK)
# The kinds that mean the call was rejected: its decision is a known failure, and a different
# tool chosen next that succeeds is a verified recovery. The others are anomalies but not verdicts.
FAILURES: frozenset[GuardKind] = frozenset({GuardKind.FAILED, GuardKind.BLOCKED, GuardKind.INVALID_ENVELOPE,
                                            GuardKind.FAILURE_IN_SUCCESS_CHANNEL})


class GuardRules(BaseModel):
    """What the guard looks for; every list is matched case-insensitively."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    expect_json: bool = True
    error_keys: tuple[str, ...] = ("error", "errors", "error_message", "exception")
    success_keys: tuple[str, ...] = ("success", "ok")
    message_keys: tuple[str, ...] = ("message", "detail", "msg")
    status_keys: tuple[str, ...] = ("status", "state")
    failed_statuses: tuple[str, ...] = ("error", "failed", "failure")
    blocked_statuses: tuple[str, ...] = ("blocked", "forbidden", "denied", "unauthorized", "rejected")
    pending_statuses: tuple[str, ...] = ("pending", "queued", "running", "in_progress", "accepted")
    partial_statuses: tuple[str, ...] = ("partial", "incomplete", "truncated")
    no_op_statuses: tuple[str, ...] = ("no_op", "noop", "unchanged", "not_modified", "skipped")
    partial_flags: tuple[str, ...] = ("truncated", "partial", "has_more", "incomplete")
    change_count_keys: tuple[str, ...] = ("changed", "updated", "modified", "affected", "deleted", "created")
    collection_keys: tuple[str, ...] = ("results", "items", "data", "records", "matches", "rows")
    blocked_patterns: tuple[Pattern, ...] = (r"permission", r"forbidden", r"not (?:allowed|authori[sz]ed|permitted)",
                                         r"access denied", r"unauthori[sz]ed", r"\b40[13]\b", r"policy")
    error_patterns: tuple[Pattern, ...] = (r"^\s*error\b", r"\bexception\b", r"traceback", r"\bfailed\b",
                                       r"\bnot found\b", r"\binvalid\b")
    per_tool_expect_json: Mapping[str, bool] = Field(default_factory=dict)


def tool_text(content: Any) -> str:
    """The text of a tool message's `content` (a string, or OpenAI content parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return "" if content is None else json.dumps(content)


def classify(content: Any, rules: GuardRules, tool: str | None = None, *, is_error: bool = False) -> GuardKind:
    """The kind of one tool result (see the module docstring for the order of the checks)."""
    kind = _classify(content, rules, tool)
    if is_error:
        return GuardKind.BLOCKED if kind is GuardKind.BLOCKED else GuardKind.FAILED
    return kind


def _classify(content: Any, rules: GuardRules, tool: str | None) -> GuardKind:
    text = tool_text(content).strip()
    if not text:
        return GuardKind.EMPTY_RESULT
    value, problem = parse_problem(text)
    if problem is not None:
        return _classify_text(text, rules, rules.per_tool_expect_json.get(tool or "", rules.expect_json))
    if value in (None, [], {}, ""):
        return GuardKind.EMPTY_RESULT
    if isinstance(value, dict):
        return _classify_object({str(k).lower(): v for k, v in value.items()}, rules)
    return GuardKind.OK


def _matches(text: str, patterns: Sequence[str]) -> bool:
    """Whether any of `patterns` matches: one RE2 pass over the text with their alternation."""
    return bool(patterns) and search(_alternation(tuple(patterns)), text, ignore_case=True)


@lru_cache(maxsize=64)
def _alternation(patterns: tuple[str, ...]) -> str:
    return "|".join(f"(?:{p})" for p in patterns)


def _classify_text(text: str, rules: GuardRules, expect_json: bool) -> GuardKind:
    if _matches(text, rules.blocked_patterns):
        return GuardKind.BLOCKED
    if _matches(text, rules.error_patterns):
        return GuardKind.FAILED
    return GuardKind.INVALID_ENVELOPE if expect_json else GuardKind.OK


def _present(value: Any) -> bool:
    return value not in (None, False, "", [], {})


@lru_cache(maxsize=256)
def _lower(values: tuple[str, ...]) -> frozenset[str]:
    """A rule's words in lower case (once per rule set: a corpus audit classifies every tool result)."""
    return frozenset(v.lower() for v in values)


def _classify_object(obj: Mapping[str, Any], rules: GuardRules) -> GuardKind:
    errors = [obj[k] for k in _lower(rules.error_keys) if _present(obj.get(k))]
    success = [obj[k] for k in _lower(rules.success_keys) if isinstance(obj.get(k), bool)]
    status = next((str(obj[k]).lower() for k in _lower(rules.status_keys) if isinstance(obj.get(k), str)), None)
    message = " ".join(str(obj[k]) for k in _lower(rules.message_keys) if isinstance(obj.get(k), str))
    error_text = " ".join(json.dumps(e) if not isinstance(e, str) else e for e in errors)
    if success and all(success) and (errors or _matches(message, rules.error_patterns + rules.blocked_patterns)):
        return GuardKind.FAILURE_IN_SUCCESS_CHANNEL
    if status in _lower(rules.blocked_statuses):
        return GuardKind.BLOCKED
    if errors or (success and not any(success)) or status in _lower(rules.failed_statuses):
        return GuardKind.BLOCKED if _matches(f"{error_text} {message}", rules.blocked_patterns) else GuardKind.FAILED
    if status in _lower(rules.pending_statuses):
        return GuardKind.PENDING
    if status in _lower(rules.partial_statuses) or any(obj.get(k) is True for k in _lower(rules.partial_flags)):
        return GuardKind.PARTIAL
    counts = [obj[k] for k in _lower(rules.change_count_keys) if k in obj]
    if status in _lower(rules.no_op_statuses) or (counts and all(c in (0, False) for c in counts)):
        return GuardKind.NO_OP
    collections = [obj[k] for k in _lower(rules.collection_keys) if isinstance(obj.get(k), list)]
    if collections and not any(collections):
        return GuardKind.EMPTY_RESULT
    return GuardKind.OK

"""Key-set paired correctness of one answer (DESIGN §3; 001 row E12). Pure: no I/O.

* Positive decisions (a `target`): joint-correct when the first call's tool equals the
  recorded tool and its key set equals the recorded `arg_keys` set; tool-correct on the tool
  alone. `target.tool is None` means the recorded move was no call: only `no_call` is right.
* `known_failure` decisions (a `failed_action`): tool repeat (same tool), shape repeat (same
  tool and key set), exact repeat (same tool and canonical-equal arguments; None when the
  failed action's arguments were withheld and only its `arg_keys` are known).

An answer with no readable call (`transport_error`, `malformed_call`, `empty_response`) is
scored, not skipped: not correct, not a repeat, and flagged with its outcome so a report can
tell an engine failure from a wrong choice. `unknown_tool` and several calls are flagged too.

`compare_calls` grades how far two answers to the same request agree (the gateway's shadow
comparison), with the same key sets and canonical values.
"""

from __future__ import annotations

from enum import StrEnum

from core.keyset import canonical_equal, key_set
from core.records import Decision, DecisionScore, FailedAction, ParsedResponse, ParseOutcome, Target, ToolCall

# Outcomes whose first call is the model's chosen action.
SCORED_CALL_OUTCOMES = frozenset({ParseOutcome.OK, ParseOutcome.MULTIPLE_CALLS, ParseOutcome.UNKNOWN_TOOL})
# Outcomes that are failures of the answer itself rather than a choice.
FLAGGED_OUTCOMES = frozenset(
    {
        ParseOutcome.TRANSPORT_ERROR,
        ParseOutcome.MALFORMED_CALL,
        ParseOutcome.EMPTY_RESPONSE,
        ParseOutcome.UNKNOWN_TOOL,
    }
)
MULTIPLE_CALLS_FLAG = ParseOutcome.MULTIPLE_CALLS.value


def score_decision(decision: Decision, parsed: ParsedResponse) -> DecisionScore:
    """Score one parsed answer against the decision's recorded target and/or failed action."""
    call = chosen_call(parsed)
    fields: dict[str, bool | None] = {}
    if decision.target is not None:
        fields["tool_correct"], fields["joint_correct"] = _correctness(decision.target, parsed, call)
    if decision.failed_action is not None:
        fields["tool_repeat"], fields["shape_repeat"], fields["exact_repeat"] = _repeats(decision.failed_action, call)
    return DecisionScore(**fields, flags=_flags(parsed))


def chosen_call(parsed: ParsedResponse) -> ToolCall | None:
    """The call the model chose (the first), or None when the answer holds no readable call."""
    return parsed.first if parsed.outcome in SCORED_CALL_OUTCOMES else None


def _flags(parsed: ParsedResponse) -> list[str]:
    flags = [parsed.outcome.value] if parsed.outcome in FLAGGED_OUTCOMES else []
    if parsed.outcome is ParseOutcome.MULTIPLE_CALLS or len(parsed.calls) > 1:
        flags.append(MULTIPLE_CALLS_FLAG)
    return flags


def _correctness(target: Target, parsed: ParsedResponse, call: ToolCall | None) -> tuple[bool, bool]:
    """(tool_correct, joint_correct)."""
    if target.tool is None:
        right = parsed.outcome is ParseOutcome.NO_CALL
        return right, right
    if call is None or call.tool != target.tool:
        return False, False
    return True, set(call.key_set) == set(target.arg_keys)


def _repeats(failed: FailedAction, call: ToolCall | None) -> tuple[bool, bool, bool | None]:
    """(tool_repeat, shape_repeat, exact_repeat) against the historically failed action."""
    known_arguments = failed.arguments is not None
    if call is None or call.tool != failed.tool:
        return False, False, (False if known_arguments else None)
    failed_keys = key_set(failed.arguments) if failed.arguments is not None else frozenset(failed.arg_keys or ())
    shape = set(call.key_set) == failed_keys
    exact = canonical_equal(call.arguments, failed.arguments) if known_arguments else None
    return True, shape, exact


class CallAgreement(StrEnum):
    """How far two answers to one request agree on the chosen action, strongest first."""

    EXACT = "exact"  # same tool, same key set, canonical-equal arguments (or both chose no call)
    SAME_SHAPE = "same_shape"  # same tool and key set, other values
    SAME_TOOL = "same_tool"  # same tool, other key set
    DIFFERENT = "different"  # another tool, or a call against no call
    UNPARSED = "unparsed"  # either answer has no readable action (malformed, empty, transport error)


def compare_calls(a: ParsedResponse, b: ParsedResponse) -> CallAgreement:
    """Agreement of two parsed answers on their first (scored) call."""
    readable = SCORED_CALL_OUTCOMES | {ParseOutcome.NO_CALL}
    if a.outcome not in readable or b.outcome not in readable:
        return CallAgreement.UNPARSED
    call_a, call_b = chosen_call(a), chosen_call(b)
    if call_a is None and call_b is None:
        return CallAgreement.EXACT
    if call_a is None or call_b is None or call_a.tool != call_b.tool:
        return CallAgreement.DIFFERENT
    if set(call_a.key_set) != set(call_b.key_set):
        return CallAgreement.SAME_TOOL
    return CallAgreement.EXACT if canonical_equal(call_a.arguments, call_b.arguments) else CallAgreement.SAME_SHAPE

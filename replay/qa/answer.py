"""The reviewer's answer read into a verdict (DESIGN §13), pure. The call is read by the project's one tool-call
parser (core/toolcalls.py, after core/wire.py's reading of the chat answer), so a reviewer's call is read as a
replayed decision's is; its arguments are then held to the `verdict` tool's shape.

Every answer has a `ReviewOutcome`, a closed set: `ok`, `unsupported` (a well-formed verdict whose evidence
names a tool-call id the run does not hold), `uncited` (a pass that cites nothing) or why no verdict could be
read. An answer that is not `ok` is still written, and counts as `escalate` in agreement: a reviewer whose
answer cannot be used hands the run to a person, as an enforced one would have to. The verdict it gave, when it
gave one, is kept beside it.

A pass is the one verdict that lets a run through unchecked, so it must rest on the run: at least one of its
tool calls or its final answer (`held` holds both). A fail or an escalate with no evidence stays what it is:
neither lets a run through. The tool's schema does not demand an id (no `minItems`), so an engine holding
calls to it does not force an arbitrary citation that would hide an uncited pass from this count.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from core.evidence import ReviewVerdict
from core.names import excerpt
from core.records import ParseOutcome
from core.toolcalls import parse_response, request_schemas
from core.wire import WIRES, BadAnswerError
from replay.qa.prompt import VERDICT_TOOL, verdict_tool


class ReviewOutcome(StrEnum):
    """What a reviewer's answer was read as."""

    OK = "ok"
    UNSUPPORTED = "unsupported"
    """A verdict whose evidence names a tool-call id the run does not hold."""
    UNCITED = "uncited"
    """A pass whose evidence is empty: it rests on nothing the run holds."""
    NO_CALL = "no_call"
    """No tool call: text only, or nothing."""
    MALFORMED_CALL = "malformed_call"
    """A call that cannot be read: arguments that are not a JSON object, a cut-off call."""
    UNKNOWN_TOOL = "unknown_tool"
    """A call of a tool other than `verdict`."""
    MULTIPLE_CALLS = "multiple_calls"
    """More than one call: which one is the verdict is not guessed."""
    BAD_VERDICT = "bad_verdict"
    """`verdict` missing, or not pass, fail or escalate."""
    BAD_EVIDENCE = "bad_evidence"
    """`evidence` missing or not a list of strings, or an argument the tool does not have."""
    NOT_AN_ANSWER = "not_an_answer"
    """A 200 answer that is no chat completion (no `choices[0].message`)."""


@dataclass(frozen=True)
class ReadVerdict:
    outcome: ReviewOutcome
    verdict: ReviewVerdict | None = None
    """The verdict the reviewer gave (None: none could be read)."""
    evidence: tuple[str, ...] = ()
    error: str | None = None
    """What was wrong, for people; None when `ok`."""

    @property
    def counted(self) -> ReviewVerdict:
        """The verdict agreement counts: the reviewer's when `ok`, else `escalate`."""
        return self.verdict if self.outcome is ReviewOutcome.OK and self.verdict else ReviewVerdict.ESCALATE


_FROM_PARSE = {ParseOutcome.NO_CALL: ReviewOutcome.NO_CALL, ParseOutcome.EMPTY_RESPONSE: ReviewOutcome.NO_CALL,
               ParseOutcome.MALFORMED_CALL: ReviewOutcome.MALFORMED_CALL,
               ParseOutcome.UNKNOWN_TOOL: ReviewOutcome.UNKNOWN_TOOL,
               ParseOutcome.MULTIPLE_CALLS: ReviewOutcome.MULTIPLE_CALLS}


def read_answer(payload: Any, held: Collection[str]) -> ReadVerdict:
    """A chat-completions answer (the parsed JSON body) read against the ids the run holds (replay/qa/prompt.py
    `held_ids`: its tool calls' and its final answer's)."""
    try:
        message = WIRES["chat"].answer(payload)
    except BadAnswerError as exc:
        return ReadVerdict(ReviewOutcome.NOT_AN_ANSWER, error=str(exc))
    tools = [verdict_tool(sorted(held))]
    parsed = parse_response(message, tool_names={VERDICT_TOOL}, schemas=request_schemas(tools))
    if parsed.outcome is not ParseOutcome.OK or parsed.first is None:
        outcome = _FROM_PARSE.get(parsed.outcome, ReviewOutcome.MALFORMED_CALL)
        return ReadVerdict(outcome, error=parsed.error or f"the answer is {parsed.outcome.value}")
    return read_arguments(parsed.first.arguments, held)


def read_arguments(arguments: Mapping[str, Any], held: Collection[str]) -> ReadVerdict:
    """The `verdict` call's arguments held to the tool's shape, then its evidence to the run."""
    extra = sorted(set(arguments) - {"verdict", "evidence"})
    given = arguments.get("verdict")
    verdict = ReviewVerdict(given) if isinstance(given, str) and given in set(ReviewVerdict) else None
    if verdict is None:
        return ReadVerdict(ReviewOutcome.BAD_VERDICT,
                           error=f"verdict {excerpt(given, 80)} is not pass, fail or escalate")
    evidence = arguments.get("evidence")
    if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence) or extra:
        what = f"arguments the tool does not have: {excerpt(', '.join(extra), 200)}" if extra else \
            f"evidence {excerpt(evidence, 200)} is not a list of tool-call ids"
        return ReadVerdict(ReviewOutcome.BAD_EVIDENCE, verdict, error=what)
    unknown = [e for e in evidence if e not in held]
    if unknown:
        return ReadVerdict(ReviewOutcome.UNSUPPORTED, verdict, tuple(evidence),
                           f"evidence names tool calls the run does not hold: {excerpt(', '.join(unknown), 200)}")
    if verdict is ReviewVerdict.PASS and not evidence:
        return ReadVerdict(ReviewOutcome.UNCITED, verdict, error="a pass that cites none of the run's tool calls "
                                                                 "and not its final answer")
    return ReadVerdict(ReviewOutcome.OK, verdict, tuple(evidence))

"""Rule uptake: does injecting a rule move the chosen call to what the rule says? Pure: no I/O.

The lesson gate asks whether a rule makes answers *right*; uptake asks the prior question,
whether the model *acts on* the rule at all. A rule the model ignores can be neither helpful
nor harmful, so a gate that holds every rule means little until uptake says the rules were read.

A rule's claim (what it says the next call should be) is given by the caller: generic replay
code cannot read intent from rule text. A claim is "call tool X" or "repeat the rejected call
unchanged". The decisions a claim concerns are those it can be judged on:

* a tool claim: decisions whose request offers the tool (and, for a claim `after_rejected`,
  only those right after that tool rejected a call: "if send_invoice says …, call …");
* a repeat claim: decisions whose last assistant turn is a call its tool result rejected
  (`core.guard` classifies the result as a failure).

Per concerned decision that both arms answered, and where the arm "with" carried the rule,
the pair (without, with) falls in exactly one category:

* `already`: both arms do what the rule says;
* `moved_to`: without does not, with does;
* `away`: without does, with does not (anti-uptake);
* `moved_elsewhere`: neither does, and the chosen call changed;
* `unchanged`: neither does, and the chosen call is the same.

The chosen call is what key-set scoring looks at: the tool and the argument key set; an
answer with no readable call is a choice of its own kind (no_call, malformed_call,
empty_response). A repeat is judged on the same unit: the rejected call's tool and key set.
A transport error is no answer: its pair is counted as `unanswered`, in no category.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from core.guard import FAILURES, GuardRules, classify
from core.records import Decision, ParsedResponse, ParseOutcome, ResultRecord
from core.scoring import chosen_call
from core.toolcalls import parse_response, request_schemas
from replay.errors import ReplayError

# What the chosen call is compared on: (tool, key set), or the outcome of an answer without a call.
Choice = tuple[str, frozenset[str]] | ParseOutcome
# The guard's default rules tell a rejected call from its tool result, as capture labels them.
GUARD = GuardRules()


class UptakeError(ReplayError, ValueError):
    """Results that cannot be paired for uptake (a decision twice in one arm, or not in the suite)."""


@dataclass(frozen=True)
class RuleClaim:
    """What a rule says the next call should be: call `tool`, or repeat the rejected call."""

    rule_id: str
    tool: str | None = None
    repeat_rejected: bool = False
    after_rejected: str | None = None
    """A tool claim that applies only right after this tool rejected a call."""

    def __post_init__(self) -> None:
        if (self.tool is None) == (not self.repeat_rejected):
            raise ValueError(f"{self.rule_id}: a claim names a tool or repeats the rejected call, exactly one")
        if self.repeat_rejected and self.after_rejected is not None:
            raise ValueError(f"{self.rule_id}: a repeat claim already concerns every rejected call")

    def says(self) -> str:
        if self.tool is None:
            return "repeat the rejected call"
        return f"call {self.tool}" + (f" after {self.after_rejected} rejects" if self.after_rejected else "")


@dataclass(frozen=True)
class Uptake:
    """Counts of one rule's uptake between two arms, on the concerned decisions both answered:
    `n` is the five categories together; `unanswered` pairs (a transport error) are in none."""

    claim: RuleClaim
    without_arm: str
    with_arm: str
    already: int = 0
    moved_to: int = 0
    moved_elsewhere: int = 0
    away: int = 0
    unchanged: int = 0
    unanswered: int = 0

    @property
    def n(self) -> int:
        return self.already + self.moved_to + self.moved_elsewhere + self.away + self.unchanged

    @property
    def open(self) -> int:
        """Pairs where the arm without the rule did not already do what it says: room to move to it."""
        return self.moved_to + self.moved_elsewhere + self.unchanged

    @property
    def rate(self) -> float | None:
        return self.moved_to / self.open if self.open else None


@dataclass(frozen=True)
class RejectedCall:
    tool: str
    key_set: frozenset[str]


def rejected_call(decision: Decision, guard: GuardRules = GUARD) -> RejectedCall | None:
    """The call the turn before the decision made, when the tool result that ends the conversation
    rejected it: read through the decision's API, as the gateway's guard reads a live turn."""
    end = decision.wire.replies(decision.turn)
    reply = end.reply_to_first_call()
    call = chosen_call(parse_response(end.answered)) if end.answered is not None else None
    if reply is None or call is None:
        return None
    if classify(reply.content, guard, call.tool, is_error=reply.is_error) not in FAILURES:
        return None
    return RejectedCall(call.tool, frozenset(call.key_set))


def concerns(claim: RuleClaim, decision: Decision, guard: GuardRules = GUARD) -> bool:
    """Whether the claim can be judged on this decision."""
    return _concerns(claim, decision, rejected_call(decision, guard))


def _concerns(claim: RuleClaim, decision: Decision, rejected: RejectedCall | None) -> bool:
    if claim.repeat_rejected:
        return rejected is not None
    if claim.tool not in (request_schemas(decision.wire.tools(decision.request.tools)) or {}):
        return False
    return claim.after_rejected is None or (rejected is not None and rejected.tool == claim.after_rejected)


def choice(parsed: ParsedResponse) -> Choice:
    """The chosen call as key-set scoring sees it, or the kind of answer that holds none."""
    call = chosen_call(parsed)
    return (call.tool, frozenset(call.key_set)) if call is not None else parsed.outcome


def does_what_it_says(claim: RuleClaim, chosen: Choice, rejected: RejectedCall | None) -> bool:
    """Whether the chosen call is the one the claim names (a repeat: the rejected call's tool and key set)."""
    if not isinstance(chosen, tuple):
        return False
    if claim.repeat_rejected:
        return rejected is not None and chosen == (rejected.tool, rejected.key_set)
    return chosen[0] == claim.tool


def rule_uptake(
    results: Iterable[ResultRecord],
    decisions: Iterable[Decision],
    claim: RuleClaim,
    without_arm: str,
    with_arm: str,
    guard: GuardRules = GUARD,
) -> Uptake:
    """Uptake of one rule: arm `with_arm` (which carried it) against `without_arm` (which did not)."""
    by_id = {d.id: d for d in decisions}
    answers = _by_arm(results, (without_arm, with_arm))
    counts = dict.fromkeys(("already", "moved_to", "moved_elsewhere", "away", "unchanged", "unanswered"), 0)
    for decision_id, with_result in answers[with_arm].items():
        without_result = answers[without_arm].get(decision_id)
        if without_result is None or claim.rule_id not in with_result.injected_rule_ids:
            continue
        if claim.rule_id in without_result.injected_rule_ids:
            raise UptakeError(f"decision {decision_id}: arm {without_arm} carried {claim.rule_id}, "
                              "which it should be without")
        decision = by_id.get(decision_id)
        if decision is None:
            raise UptakeError(f"decision {decision_id} of arm {with_arm} is not among the given decisions")
        rejected = rejected_call(decision, guard)
        if _concerns(claim, decision, rejected):
            counts[_category(claim, without_result.parsed, with_result.parsed, rejected)] += 1
    return Uptake(claim, without_arm, with_arm, **counts)


def _category(claim: RuleClaim, without: ParsedResponse, with_rule: ParsedResponse,
              rejected: RejectedCall | None) -> str:
    if ParseOutcome.TRANSPORT_ERROR in (without.outcome, with_rule.outcome):
        return "unanswered"
    before, after = choice(without), choice(with_rule)
    did, does = does_what_it_says(claim, before, rejected), does_what_it_says(claim, after, rejected)
    if did:
        return "already" if does else "away"
    if does:
        return "moved_to"
    return "unchanged" if before == after else "moved_elsewhere"


def _by_arm(results: Iterable[ResultRecord], arms: Sequence[str]) -> dict[str, dict[str, ResultRecord]]:
    """Each arm's result per decision; two results of one arm for one decision cannot be paired."""
    found: dict[str, dict[str, ResultRecord]] = {arm: {} for arm in arms}
    for result in results:
        own = found.get(result.arm)
        if own is None:
            continue
        if result.decision_id in own:
            raise UptakeError(f"decision {result.decision_id}: two results of arm {result.arm}")
        own[result.decision_id] = result
    return found


UPTAKE_NOTE = ("uptake = moved to / pairs where the arm without the rule did not already do what it says; "
               "away = it did, and with the rule it no longer does.")
UPTAKE_COLUMNS = ("rule", "says", "without → with", "n", "moved to", "elsewhere", "away", "already", "unchanged",
                  "uptake")


def uptake_cells(uptake: Uptake) -> tuple[str, ...]:
    """One table row of text cells, in `UPTAKE_COLUMNS` order; uptake as moved to / open pairs."""
    u = uptake
    rate = f"{u.moved_to}/{u.open}" if u.open else "—"
    arms = f"{u.without_arm} → {u.with_arm}"
    counts = (u.n, u.moved_to, u.moved_elsewhere, u.away, u.already, u.unchanged)
    return (u.claim.rule_id, u.claim.says(), arms, *(str(c) for c in counts), rate)


def uptake_table(claims: Mapping[str, RuleClaim], pairs: Iterable[tuple[str, str, str]],
                 results: Sequence[ResultRecord], decisions: Sequence[Decision]) -> list[Uptake]:
    """Uptake for each (rule id, without arm, with arm); rules without a claim are skipped."""
    return [rule_uptake(results, decisions, claims[rule_id], without, with_arm)
            for rule_id, without, with_arm in pairs if rule_id in claims]

"""Whether a candidate was trained on the decisions it is judged on (DESIGN §7, the custody chain; issue 60).

A suite decision is contaminated for a candidate when one of the candidate's training rows reaches it by any of
three rules: (a) `session`: the row's source decision is of
the same session (a session is one task, so its decisions are not independent of each other); (b) `request`:
the row's prompt is the decision's state exactly (the canonical request hash a suite holds, which provenance
records); (c) `near_duplicate`: curation's own rule (core/near_duplicates.py, Tülu 3's: the row covers
more than `threshold` of the decision's word n-grams), which finds a copy in another session and workspace.

Pure: the decisions and rows come in as values (replay/analysis/training_lineage.py reads them from the files).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from core.near_duplicates import NGRAM, THRESHOLD, NearDuplicates


class Overlap(StrEnum):
    """The rule by which a training row reaches a suite decision."""

    SESSION = "session"
    REQUEST = "request"
    NEAR_DUPLICATE = "near_duplicate"


@dataclass(frozen=True)
class SourceRow:
    """One training example as its provenance and row say: the corpus decision it came from, that decision's
    session, the request hash provenance recorded (None in sets built before it), and its prompt's state text."""

    example: int
    decision: str
    session: str | None
    request_sha256: str | None
    text: str


@dataclass(frozen=True)
class JudgedDecision:
    """One suite decision: its id, the sessions it is of (its own, and the one its corpus id names), the hash of
    its request, and its state text."""

    id: str
    sessions: frozenset[str]
    request_sha256: str
    text: str


def corpus_session(decision_id: str) -> str | None:
    """The session a corpus decision's id names (`<session>.<thread>.<number>`); None for any other id."""
    parts = decision_id.rsplit(".", 2)
    return parts[0] if len(parts) == 3 and all(parts) and parts[2].isdigit() else None


class Contaminated(BaseModel):
    """One suite decision a training row reaches: by which rules, and from which rows (train.jsonl lines)."""

    model_config = ConfigDict(frozen=True)
    decision: str
    rules: list[Overlap]
    examples: list[int]


def contamination(decisions: Sequence[JudgedDecision], rows: Iterable[SourceRow], n: int = NGRAM,
                  threshold: float = THRESHOLD) -> list[Contaminated]:
    """Every suite decision some row reaches, in the suite's order, with the rules and rows that reach it."""
    by_session: dict[str, list[int]] = {}
    by_request: dict[str, list[int]] = {}
    for index, decision in enumerate(decisions):
        for session in decision.sessions:
            by_session.setdefault(session, []).append(index)
        by_request.setdefault(decision.request_sha256, []).append(index)
    near = NearDuplicates([d.text for d in decisions], n, threshold)
    found: dict[int, dict[Overlap, set[int]]] = {}
    for row in rows:
        reached = [(Overlap.SESSION, by_session.get(row.session or "", [])),
                   (Overlap.REQUEST, by_request.get(row.request_sha256 or "", [])),
                   (Overlap.NEAR_DUPLICATE, near.matches(row.text))]
        for rule, indexes in reached:
            for index in indexes:
                found.setdefault(index, {}).setdefault(rule, set()).add(row.example)
    return [Contaminated(decision=decisions[index].id, rules=[rule for rule in Overlap if rule in rules],
                         examples=sorted(set().union(*rules.values())))
            for index, rules in sorted(found.items())]


def rule_counts(found: Iterable[Contaminated]) -> dict[str, int]:
    """Contaminated decisions per rule (a decision reached by two rules counts under each)."""
    counts = {rule.value: 0 for rule in Overlap}
    for item in found:
        for rule in item.rules:
            counts[rule.value] += 1
    return counts

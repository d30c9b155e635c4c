"""Each arm's outcome beside the retrieval figures of its decisions' sessions (001 §10 item 1). Pure: no I/O.

A memory arm that moves nothing may mean a rule that does not help, or a memory nobody read: the corpus
tells which. Per arm, joint correctness over the held-out positives is split by what the decision's
session did (replay/corpus/retrieval.py): read a memory file on demand in some turn, read none, or is
not in the corpus; the note gives the sessions' turns and reads per turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from core.records import Decision, ResultRecord
from replay.analysis.compare import arms_of, is_held_out_positive
from replay.analysis.report.summary import Count
from replay.corpus.retrieval import SessionReads

RETRIEVAL_COLUMNS = ("arm", "memory", "session read memory", "session read none", "session not in the corpus")


@dataclass(frozen=True)
class RetrievalRow:
    arm: str
    memory: str
    read: Count
    """Joint correct over the held-out positives whose session read a memory file on demand."""
    unread: Count
    unknown: int
    """Held-out positives whose session the corpus does not hold."""


@dataclass(frozen=True)
class Retrieval:
    """The report's retrieval block: one row per arm and the note on the sessions."""

    rows: tuple[RetrievalRow, ...]
    note: str


def retrieval_block(results: Sequence[ResultRecord], decisions: Sequence[Decision],
                    reads: Mapping[tuple[str, str], SessionReads]) -> Retrieval:
    session_of = {d.id: (d.workspace, d.session) for d in decisions}
    rows = []
    for arm in arms_of(results):
        own = [r for r in results if r.arm == arm and is_held_out_positive(r)]
        found = [(r, reads[session_of[r.decision_id]]) for r in own if session_of.get(r.decision_id) in reads]
        read = [r for r, s in found if s.turns_reading]
        unread = [r for r, s in found if not s.turns_reading]
        rows.append(RetrievalRow(arm, own[0].memory if own else "", _joint(read), _joint(unread),
                                 len(own) - len(found)))
    return Retrieval(tuple(rows), retrieval_note(decisions, reads))


def _joint(results: Sequence[ResultRecord]) -> Count:
    return Count(sum(bool(r.score.joint_correct) for r in results), len(results))


def retrieval_note(decisions: Sequence[Decision], reads: Mapping[tuple[str, str], SessionReads]) -> str:
    sessions = {(d.workspace, d.session) for d in decisions}
    found = [reads[key] for key in sorted(sessions) if key in reads]
    turns = sum(s.turns for s in found)
    reading = sum(s.turns_reading for s in found)
    count = sum(s.reads for s in found)
    escaped = sum(s.escaped for s in found)
    per_turn = f"{count / turns:.2f}" if turns else "—"
    return (f"The decisions come from {len(sessions)} session(s), {len(found)} of them in the corpus: {turns} turn(s), "
            f"{reading} of which read a memory file on demand; {count} read(s), {per_turn} per turn"
            + (f"; {escaped} read path(s) climbed out of the workspace (counted, not followed)" if escaped else "")
            + ". Joint correct over the held-out positives, by what the decision's session read.")


def retrieval_cells(row: RetrievalRow) -> tuple[str, ...]:
    return row.arm, row.memory, str(row.read), str(row.unread), str(row.unknown)

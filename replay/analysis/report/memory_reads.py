"""Each arm's outcome beside the memory its decisions' histories read (001 §10 item 1). Pure: no I/O.

A `withheld` arm strips the injected memory blocks and nothing else: a memory file the agent read through its
read tool earlier in the session stays in the decision's history, in front of every arm. So per arm, joint
correctness over the held-out positives is split by the decision itself (replay/corpus/retrieval.py,
`history_reads`): its history holds a memory read, holds none, or its session is not in the corpus (whose
working directory places the paths). The note gives the sessions' turns and reads per turn, and how many
decisions carry a read, so a memory arm whose contrast is diluted says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from core.records import Decision, ResultRecord
from replay.analysis.compare import arms_of, is_held_out_positive
from replay.analysis.report.summary import Count
from replay.corpus.retrieval import SessionReads, history_reads

RETRIEVAL_COLUMNS = ("arm", "memory", "history read memory", "history read none", "session not in the corpus")


@dataclass(frozen=True)
class RetrievalRow:
    arm: str
    memory: str
    read: Count
    """Joint correct over the held-out positives whose history read a memory file on demand."""
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
    marked = history_marks(decisions, reads)
    rows = []
    for arm in arms_of(results):
        own = [r for r in results if r.arm == arm and is_held_out_positive(r)]
        found = [(r, marked[r.decision_id]) for r in own if r.decision_id in marked]
        read = [r for r, files in found if files]
        unread = [r for r, files in found if not files]
        rows.append(RetrievalRow(arm, own[0].memory if own else "", _joint(read), _joint(unread),
                                 len(own) - len(found)))
    return Retrieval(tuple(rows), retrieval_note(decisions, reads, marked))


def history_marks(decisions: Sequence[Decision],
                  reads: Mapping[tuple[str, str], SessionReads]) -> dict[str, tuple[str, ...]]:
    """The memory files each decision's history read, by decision id, for the decisions whose session the
    corpus holds."""
    return {d.id: history_reads(d, reads[(d.workspace, d.session)].cwd) for d in decisions
            if (d.workspace, d.session) in reads}


def _joint(results: Sequence[ResultRecord]) -> Count:
    return Count(sum(bool(r.score.joint_correct) for r in results), len(results))


def retrieval_note(decisions: Sequence[Decision], reads: Mapping[tuple[str, str], SessionReads],
                   marked: Mapping[str, tuple[str, ...]]) -> str:
    sessions = {(d.workspace, d.session) for d in decisions}
    found = [reads[key] for key in sorted(sessions) if key in reads]
    turns = sum(s.turns for s in found)
    reading = sum(s.turns_reading for s in found)
    count = sum(s.reads for s in found)
    escaped = sum(s.escaped for s in found)
    per_turn = f"{count / turns:.2f}" if turns else "—"
    carrying = sum(bool(files) for files in marked.values())
    return (f"The decisions come from {len(sessions)} session(s), {len(found)} of them in the corpus: {turns} turn(s), "
            f"{reading} of which read a memory file on demand; {count} read(s), {per_turn} per turn"
            + (f"; {escaped} read path(s) climbed out of the workspace (counted, not followed)" if escaped else "")
            + f". {carrying} of the {len(marked)} decision(s) whose session the corpus holds read memory earlier in "
              "their own history, which every arm sees (withheld strips only the injected memory). Joint correct "
              "over the held-out positives, by what the decision's history read.")


def retrieval_cells(row: RetrievalRow) -> tuple[str, ...]:
    return row.arm, row.memory, str(row.read), str(row.unread), str(row.unknown)

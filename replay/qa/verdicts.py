"""Reviewer verdicts per run, for agreement (DESIGN §13): the production reviewer's, one per mode, from
`reviews.jsonl`, and any reviewer's from a verdicts file (JSONL of `ReviewerVerdictLine`; the planted reviewer
writes one, `worker-replay qa plant`). A verdict naming a final record other than the labelled run's is for
another state of the session and is not used; it is counted."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.names import Name
from core.records import Strict
from replay.qa.errors import QAError
from replay.qa.files import read_strict
from replay.qa.labels import PRODUCTION, LabelledRun, Mode, ReviewVerdict, reviewer_key


class ReviewerVerdictLine(Strict):
    """One line of a verdicts file."""

    workspace: Name
    session: Name
    reviewer: Name
    """Who judged: a role (`qwen`, `large`), `planted`, …"""
    verdict: ReviewVerdict
    mode: Mode | None = None
    """The mode it judged under, when it is a production verdict; None for a replayed or planted reviewer."""
    final_record: Name | None = None
    """The final answer it judged, when known; must be the labelled run's."""


@dataclass(frozen=True)
class Verdicts:
    """Every usable verdict: (reviewer key, workspace, session) → verdict, and the verdicts not used."""

    by_run: dict[tuple[str, str, str], ReviewVerdict]
    unmatched: int
    """Verdicts for a run the labels do not hold, or for another final record of it."""


def production_lines(runs: Iterable[LabelledRun]) -> list[ReviewerVerdictLine]:
    """The production reviewer's verdicts the labels carry, one per run and mode."""
    return [ReviewerVerdictLine(workspace=r.workspace, session=r.session, reviewer=PRODUCTION, verdict=verdict,
                                mode=mode, final_record=r.final_record)
            for r in runs for mode, verdict in sorted(r.reviewer.items())]


def gather(runs: Sequence[LabelledRun], lines: Iterable[tuple[str, ReviewerVerdictLine]]) -> Verdicts:
    """The verdicts (each with where it was read, for the message) on the labelled runs; a reviewer judging one
    run twice is a `QAError`."""
    finals = {(r.workspace, r.session): r.final_record for r in runs}
    by_run: dict[tuple[str, str, str], ReviewVerdict] = {}
    where: dict[tuple[str, str, str], str] = {}
    unmatched = 0
    for source, line in lines:
        final = finals.get((line.workspace, line.session))
        if final is None or line.final_record not in (None, final):
            unmatched += 1
            continue
        key = (reviewer_key(line.reviewer, line.mode), line.workspace, line.session)
        if key in by_run:
            raise QAError(f"{source}: {key[0]} judged {line.workspace}/{line.session} already ({where[key]})")
        by_run[key], where[key] = line.verdict, source
    return Verdicts(by_run, unmatched)


def read_verdicts(path: Path) -> list[tuple[str, ReviewerVerdictLine]]:
    """A verdicts file's lines, each with its `file:line`; a line that is not one is a `QAError`."""
    return [(f"{path}:{number}", line) for number, line in read_strict(path, ReviewerVerdictLine, "a reviewer verdict")]

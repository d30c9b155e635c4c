"""Reviewer verdicts per run, for agreement (DESIGN §13): the production reviewer's, one per mode, from
`reviews.jsonl`, and any reviewer's from a verdicts file (JSONL of `ReviewerVerdictLine`; the planted reviewer
writes one, `worker-replay qa plant`, and reviewer replay writes `verdicts.jsonl` into its run directory,
`worker-replay qa review`). A verdict naming a final record other than the labelled run's is for another state
of the session and is not used; it is counted."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field, model_validator

from core.evidence import ReviewVerdict
from core.names import Name
from core.records import Strict
from replay.qa.answer import ReviewOutcome
from replay.qa.errors import QAError
from replay.qa.labels import PRODUCTION, LabelledRun, Mode, reviewer_key
from replay.qa.qa_files import read_strict

VERDICTS = "verdicts.jsonl"
"""A reviewer replay run's verdicts, in its run directory."""


def _absent(value: object) -> bool:
    """A replayed reviewer's fields are left out of other reviewers' lines, which read as they always have."""
    return value is None


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
    outcome: ReviewOutcome | None = Field(default=None, exclude_if=_absent)
    """A replayed reviewer's: how its answer read (None: not a replayed reviewer). Any but `ok` has `verdict`
    `escalate`, what agreement counts: an answer that cannot be used hands the run to a person."""
    answered: ReviewVerdict | None = Field(default=None, exclude_if=_absent)
    """A replayed reviewer's: the verdict it gave, when one could be read (also when `unsupported`)."""
    evidence: list[str] | None = Field(default=None, exclude_if=_absent)
    """A replayed reviewer's: the tool-call ids it cited."""
    error: str | None = Field(default=None, exclude_if=_absent)
    """A replayed reviewer's: why its answer is not `ok`."""

    @model_validator(mode="after")
    def _unusable_escalates(self) -> ReviewerVerdictLine:
        if self.outcome not in (None, ReviewOutcome.OK) and self.verdict is not ReviewVerdict.ESCALATE:
            raise ValueError(f"an answer read as {self.outcome} counts as escalate, not {self.verdict}")
        return self


@dataclass(frozen=True)
class Verdicts:
    """Every usable verdict: (reviewer key, workspace, session) → verdict, and the verdicts not used."""

    by_run: dict[tuple[str, str, str], ReviewVerdict]
    unmatched: int
    """Verdicts for a run the labels do not hold, or for another final record of it."""
    unusable: frozenset[tuple[str, str, str]] = frozenset()
    """The keys of `by_run` whose escalation a replayed reviewer's unusable answer forced (its outcome not `ok`)."""


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
    unusable: set[tuple[str, str, str]] = set()
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
        if line.outcome not in (None, ReviewOutcome.OK):
            unusable.add(key)
    return Verdicts(by_run, unmatched, frozenset(unusable))


def read_verdicts(path: Path) -> list[tuple[str, ReviewerVerdictLine]]:
    """A verdicts file's lines, each with its `file:line` (a directory: a `qa review` run, its verdicts file); a
    line that is not one is a `QAError`."""
    if path.is_dir():
        path = path / VERDICTS
    return [(f"{path}:{number}", line) for number, line in read_strict(path, ReviewerVerdictLine, "a reviewer verdict")]

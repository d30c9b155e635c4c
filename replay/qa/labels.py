"""Labelled runs (DESIGN §13): who judged a finished run, and how — the production reviewer per mode, and a
person — as `reviews.jsonl`, one `LabelledRun` a line (`worker-replay qa labels`).

A run is named by its workspace, its session and the record id (`uuid`) of its final answer
(replay/qa/finished_run.py). People's dispositions come in a JSONL file of `DispositionLine`s; a line that names
a final record other than the run's now (the session went on after it was judged) or a run the corpus does
not hold is refused, counted by reason, and a run on two lines is an error. Every run of the corpus is kept,
with or without a label: an absent label is counted, never guessed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from pydantic import Field, field_validator, model_validator

from core.evidence import Disposition, ReviewVerdict
from core.names import Name
from core.records import Strict
from replay.qa.errors import QAError
from replay.qa.qa_files import read_strict


class Mode(StrEnum):
    """A workspace's Stop-QA mode: no reviewer, shadow reviewers (qwen, both, the cascade), the cascade enforced."""

    OFF = "off"
    SHADOW_QWEN = "shadow-qwen"
    SHADOW_DUAL = "shadow-dual"
    SHADOW_CASCADE = "shadow-cascade"
    ENFORCE_CASCADE = "enforce-cascade"


PRODUCTION = "production"
"""The reviewer name of the verdicts the platform recorded, one per mode (`reviewer_key` adds the mode)."""


def reviewer_key(reviewer: str, mode: Mode | None) -> str:
    """How a reviewer is named in agreement tables and gates: `qwen`, or `production@shadow-cascade` for the
    verdicts recorded under a mode (the mode is part of who judged: a cascade is not qwen alone)."""
    return reviewer if mode is None else f"{reviewer}@{mode}"


def _no_verdict_when_off(verdicts: dict[Mode, ReviewVerdict]) -> dict[Mode, ReviewVerdict]:
    if Mode.OFF in verdicts:
        raise ValueError("mode off runs no reviewer, so it has no verdict")
    return verdicts


class DispositionLine(Strict):
    """One line of a dispositions file: a person's disposition of a run and/or the verdicts the production
    reviewer gave it per mode. `final_record`, when given, must be the run's final answer now."""

    workspace: Name
    session: Name
    final_record: Name | None = None
    disposition: Disposition | None = None
    reviewer: dict[Mode, ReviewVerdict] = Field(default_factory=dict)

    _off = field_validator("reviewer")(_no_verdict_when_off)

    @model_validator(mode="after")
    def _says_something(self) -> DispositionLine:
        if self.disposition is None and not self.reviewer:
            raise ValueError("a line needs a disposition or a reviewer verdict")
        return self


class LabelledRun(Strict):
    """One line of `reviews.jsonl`: a run of the corpus, and who judged it (nothing when nobody has)."""

    workspace: Name
    session: Name
    final_record: Name
    """The `uuid` of the final answer's last record."""
    reviewer: dict[Mode, ReviewVerdict] = Field(default_factory=dict)
    """The production reviewer's verdict per mode, where the platform recorded one."""
    disposition: Disposition | None = None
    """A person's disposition, where one was given."""

    _off = field_validator("reviewer")(_no_verdict_when_off)


class LabelRefusal(StrEnum):
    """Why a dispositions line was not used."""

    NO_RUN = "no_run"
    """The corpus holds no finished run of that session (none, or one without a final answer)."""
    STALE = "stale"
    """It names a final record that is not the run's final answer now."""


@dataclass
class LabelsBuild:
    """The labelled runs and what happened to the dispositions."""

    runs: list[LabelledRun]
    refused: Counter[LabelRefusal] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)
    """The first refused lines, each with its reason (a few, for the message)."""

    @property
    def labelled(self) -> int:
        return sum(r.disposition is not None for r in self.runs)


EXAMPLES = 10


def build_labels(finals: Iterable[tuple[str, str, str]], lines: Sequence[tuple[int, DispositionLine]]) -> LabelsBuild:
    """Every finished run (workspace, session, final record) with the dispositions line that names it (numbered
    as in its file); a run named twice is a `QAError` naming both lines."""
    by_run: dict[tuple[str, str], tuple[int, DispositionLine]] = {}
    for number, given in lines:
        key = (given.workspace, given.session)
        if key in by_run:
            raise QAError(f"line {number}: run {given.workspace}/{given.session} is already labelled on line "
                          f"{by_run[key][0]}; one line a run")
        by_run[key] = (number, given)
    build = LabelsBuild([])
    used: set[tuple[str, str]] = set()
    for workspace, session, final in sorted(finals):
        number, named = by_run.get((workspace, session), (0, None))
        line = named if named is None or named.final_record in (None, final) else None
        if named is not None and line is None:
            build.refused[LabelRefusal.STALE] += 1
            _example(build, number, f"names final record {named.final_record}, the run's is now {final}")
        used.add((workspace, session))
        build.runs.append(LabelledRun(workspace=workspace, session=session, final_record=final,
                                      reviewer=line.reviewer if line else {},
                                      disposition=line.disposition if line else None))
    for (workspace, session), (number, _) in sorted(by_run.items(), key=lambda item: item[1][0]):
        if (workspace, session) not in used:
            build.refused[LabelRefusal.NO_RUN] += 1
            _example(build, number, f"{workspace}/{session}: the corpus holds no finished run of it")
    return build


def _example(build: LabelsBuild, number: int, reason: str) -> None:
    if len(build.examples) < EXAMPLES:
        build.examples.append(f"line {number}: {reason}")


def read_dispositions(path: Path) -> list[tuple[int, DispositionLine]]:
    """The dispositions file's lines with their numbers; a line that is not one is a `QAError` (file:line)."""
    return read_strict(path, DispositionLine, "a disposition")


def read_labels(path: Path) -> list[LabelledRun]:
    """`reviews.jsonl`; a bad line, or a run on two lines, is a `QAError` naming the file and line."""
    rows = read_strict(path, LabelledRun, "a labelled run")
    seen: dict[tuple[str, str], int] = {}
    for number, run in rows:
        key = (run.workspace, run.session)
        if key in seen:
            raise QAError(f"{path}:{number}: run {run.workspace}/{run.session} is already on line {seen[key]}")
        seen[key] = number
    return [run for _, run in rows]

"""The labelled redaction corpus (tests/replay/privacy/data/redaction_corpus.jsonl) and its scoring, shared by
tests/replay/privacy/test_redact_corpus.py and scripts/bench_redact.py.

Each case is a text as people write it, the values in it that must be redacted (with their type)
and the look-alikes that must stay byte-identical (ids, dates, amounts, versions, numbers that
fail a check digit). A detector is scored on spans: a labelled value counts as redacted when
findings cover each of its occurrences whole; a look-alike counts as changed when any finding
touches it. Cases of the `held-out` batch were written after the recognizers were tuned on the
first batch, so their figures are the honest ones for text nobody tuned against.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from pydantic import Field, model_validator

from core.records import Strict

CORPUS = Path(__file__).resolve().parents[1] / "replay" / "privacy" / "data" / "redaction_corpus.jsonl"


class Labelled(Strict):
    kind: str = Field(pattern=r"^[A-Z_]+$")
    value: str = Field(min_length=1)
    missed: str | None = None  # a known limitation: why the value is not redacted (counted as a miss)


class Case(Strict):
    """One text; every labelled value and look-alike occurs in it (each occurrence is scored)."""

    text: str
    values: list[Labelled] = Field(default_factory=list)  # must be redacted (kind: the pseudonym type)
    keep: list[Labelled] = Field(default_factory=list)  # look-alikes that must stay (kind: what it is)
    note: str | None = None
    batch: Literal["tuning", "held-out"] = "tuning"

    @model_validator(mode="after")
    def _values_occur(self) -> Case:
        for item in (*self.values, *self.keep):
            if item.value not in self.text:
                raise ValueError(f"{item.value!r} does not occur in the case's text")
        return self

    def spans(self, item: Labelled) -> list[tuple[int, int]]:
        found, at = [], self.text.find(item.value)
        while at >= 0:
            found.append((at, at + len(item.value)))
            at = self.text.find(item.value, at + 1)
        return found


def load(path: Path = CORPUS) -> list[Case]:
    return [Case.model_validate_json(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class Found(Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...


@dataclass
class Tally:
    total: int = 0
    hit: int = 0  # labelled: redacted (covered whole); look-alike: changed (touched)
    typed: int = 0  # labelled values redacted with their own type
    misses: list[str] = field(default_factory=list)


@dataclass
class Score:
    labelled: dict[str, Tally] = field(default_factory=dict)
    lookalikes: dict[str, Tally] = field(default_factory=dict)
    outside_chars: int = 0  # characters outside every labelled span
    outside_changed: int = 0  # of those, inside some finding


def score(cases: Sequence[Case], find: Callable[[str], Sequence[Found]]) -> Score:
    result = Score()
    for case in cases:
        found = find(case.text)
        for item in case.values:
            tally = result.labelled.setdefault(item.kind, Tally())
            tally.total += 1
            covering = [[f for f in found if f.start <= start and end <= f.end] for start, end in case.spans(item)]
            if all(covering):
                tally.hit += 1
                tally.typed += all(any(f.kind == item.kind for f in fs) for fs in covering)
            else:
                tally.misses.append(item.value)
        for item in case.keep:
            tally = result.lookalikes.setdefault(item.kind, Tally())
            tally.total += 1
            if any(f.start < end and start < f.end for f in found for start, end in case.spans(item)):
                tally.hit += 1
                tally.misses.append(item.value)
        inside = set[int]()
        for item in case.values:
            for start, end in case.spans(item):
                inside.update(range(start, end))
        changed = {i for f in found for i in range(f.start, f.end)}
        result.outside_chars += len(case.text) - len(inside)
        result.outside_changed += len(changed - inside)
    return result


def table(result: Score) -> str:
    """The score as two Markdown tables: recall per type, then look-alikes changed per kind."""
    lines = ["| type | labelled | redacted | recall | with its own type |", "|---|---:|---:|---:|---:|"]
    for kind, t in sorted(result.labelled.items()):
        lines.append(f"| {kind} | {t.total} | {t.hit} | {t.hit / t.total:.0%} | {t.typed} |")
    total = sum(t.total for t in result.labelled.values())
    hit = sum(t.hit for t in result.labelled.values())
    lines += [f"| **all** | {total} | {hit} | **{hit / total:.1%}** | {sum(t.typed for t in result.labelled.values())} |",
              "", "| look-alike | count | changed | over-redaction |", "|---|---:|---:|---:|"]
    for kind, t in sorted(result.lookalikes.items()):
        lines.append(f"| {kind} | {t.total} | {t.hit} | {t.hit / t.total:.0%} |")
    total = sum(t.total for t in result.lookalikes.values())
    hit = sum(t.hit for t in result.lookalikes.values())
    lines += [f"| **all** | {total} | {hit} | **{hit / total:.1%}** |", "",
              f"characters changed outside labelled spans: {result.outside_changed} of {result.outside_chars} "
              f"({result.outside_changed / result.outside_chars:.2%})"]
    return "\n".join(lines)

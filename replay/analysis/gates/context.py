"""What a condition evaluates against and what it returns: the context (the comparison, the evidence
paths, the disputed rules), the outcome, and the helpers that read evidence files into the
`core.evidence` formats (an absent or unreadable file makes the condition `not_run`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from core.evidence import PairedOutcomes
from core.jsonfile import JsonFileError
from core.jsonfile import read_json as core_read_json
from replay.analysis.compare import (
    Comparison,
    CorrectnessRow,
    Measure,
    Tainted,
    compare_run,
    format_ci,
    format_p,
    format_points,
)
from replay.errors import ReplayError
from replay.run.directory import ResultsError


class Status(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    NOT_RUN = "not_run"


class GateError(ReplayError, ValueError):
    """A policy that cannot be used (with the file and the condition it names)."""


E = TypeVar("E", bound=BaseModel)


# ── evaluation context and outcome ──────────────────────────────────────────


@dataclass(frozen=True)
class GateContext:
    comparison: Comparison
    evidence: Mapping[str, Path]
    tainted: Tainted = ()

    @property
    def baseline(self) -> str:
        return self.comparison.baseline

    @property
    def candidate(self) -> str:
        return self.comparison.candidate


@dataclass(frozen=True)
class GateOutcome:
    status: Status
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)
    tainted_rule_ids: tuple[str, ...] = ()


def not_run(reason: str) -> GateOutcome:
    return GateOutcome(Status.NOT_RUN, reason)


def judge(ok: bool, reason: str, evidence: dict[str, Any], tainted: tuple[str, ...] = ()) -> GateOutcome:
    return GateOutcome(Status.PASS if ok else Status.FAIL, reason, evidence, tainted)


class MissingEvidenceError(ReplayError):
    """Evidence absent or unreadable: the condition is not run, for this reason."""


def evidence_path(ctx: GateContext, key: str, what: str) -> Path:
    path = ctx.evidence.get(key)
    if path is None:
        raise MissingEvidenceError(f"no evidence {key!r} given ({what})")
    if not Path(path).exists():
        raise MissingEvidenceError(f"evidence {key!r}: {path} does not exist")
    return Path(path)


def read_json(ctx: GateContext, key: str, model: type[E], what: str) -> E:
    path = evidence_path(ctx, key, what)
    try:
        return core_read_json(path, model)
    except JsonFileError as exc:
        raise MissingEvidenceError(f"evidence {key!r}: {exc}") from exc


def paired_outcomes(ctx: GateContext, key: str, measure: str) -> PairedOutcomes:
    outcomes = read_json(ctx, key, PairedOutcomes, f'a paired-outcomes JSON with "measure": "{measure}"')
    if outcomes.measure != measure:
        raise MissingEvidenceError(f"evidence {key!r} measures {outcomes.measure!r}, this condition needs {measure!r}")
    if outcomes.candidate not in (None, ctx.candidate):
        raise MissingEvidenceError(f"evidence {key!r} is for candidate {outcomes.candidate!r}, not {ctx.candidate!r}")
    if not outcomes.items:
        raise MissingEvidenceError(f"evidence {key!r} has no items")
    return outcomes


def other_run(ctx: GateContext, key: str, what: str) -> tuple[Path, Comparison]:
    path = evidence_path(ctx, key, what)
    try:
        return path, compare_run(path, ctx.baseline, ctx.candidate, tainted=ctx.tainted)
    except ResultsError as exc:
        raise MissingEvidenceError(f"evidence {key!r}: {exc}") from exc


def row_of(comparison: Comparison, measure: Measure, scope: str) -> CorrectnessRow:
    try:
        return comparison.row(measure, scope)
    except KeyError as exc:
        raise MissingEvidenceError(f"no {measure}-scored decisions in {scope!r} in these results") from exc


def row_evidence(row: CorrectnessRow, **extra: Any) -> dict[str, Any]:
    return {
        "scope": row.scope, "measure": row.measure, **asdict(row.stats), "tainted_results": row.tainted_results, **extra
    }


def row_text(row: CorrectnessRow) -> str:
    s = row.stats
    return (
        f"{row.scope} {row.measure}: {s.baseline_correct} → {s.candidate_correct} of {s.n}, "
        f"{format_points(s.points)} points (+{s.wins}/−{s.losses}, p = {format_p(s.p_value)}, "
        f"95% CI {format_ci(s.ci_low, s.ci_high)})"
    )

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

from core.evidence import EvidenceSubject, PairedOutcomes
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
from replay.run.directory import RUN_JSON, SERVED, ResultsError, RunError, read_run_json


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
    run_dir: Path | None = None
    """The judged run's directory: what evidence about another run is bound to (None: nothing to bind to)."""

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
    if outcomes.subject is not None:
        check_served(ctx, key, outcomes.subject)
    return outcomes


def check_served(ctx: GateContext, key: str, subject: EvidenceSubject) -> None:
    """Evidence about other weights is not this run's: each arm the evidence names must have been served by the
    same adapter weights (fingerprint) in the judged run, where both record it."""
    if ctx.run_dir is None:
        return
    served = read_run_json(ctx.run_dir).get(SERVED)
    served = served if isinstance(served, dict) else {}
    for role, arm, identity in (("baseline", ctx.baseline, subject.baseline),
                                ("candidate", ctx.candidate, subject.candidate)):
        judged = served.get(arm)
        if identity is None or not isinstance(judged, dict) or judged.get("fingerprint") == identity.fingerprint:
            continue
        raise MissingEvidenceError(
            f"evidence {key!r} is about {role} {identity.model!r} served with weights {_short(identity.fingerprint)}, "
            f"the judged run's {role} {arm!r} with {_short(judged.get('fingerprint'))}: it must be about the same "
            "weights")


def _short(fingerprint: object) -> str:
    return f"{fingerprint[:12]}…" if isinstance(fingerprint, str) else "none (the base model)"


@dataclass(frozen=True)
class RunIdentity:
    """What binds a run directory to another: its own identity and the decisions it replayed."""

    run_id: str
    suite_sha256: str


def run_identity(run_dir: Path, what: str) -> RunIdentity:
    """The run identity `run.json` records; MissingEvidenceError when it records none (a run made before run ids,
    or not by `worker-replay run`), since nothing could then bind evidence to it."""
    try:
        manifest = read_run_json(run_dir)
    except RunError as exc:
        raise MissingEvidenceError(f"{what}: {exc}") from exc
    suite = manifest.get("suite")
    run_id, sha256 = manifest.get("run_id"), suite.get("sha256") if isinstance(suite, dict) else None
    if not isinstance(run_id, str) or not isinstance(sha256, str):
        raise MissingEvidenceError(f"{what}: {run_dir / RUN_JSON} records no run_id and suite sha256, so nothing "
                                   "binds it to the other run; re-run it with this version of `worker-replay run`")
    return RunIdentity(run_id, sha256)


def judged_run(ctx: GateContext, key: str) -> RunIdentity:
    if ctx.run_dir is None:
        raise MissingEvidenceError(f"evidence {key!r} is about another run, and no judged run directory was given "
                                   "to bind it to")
    return run_identity(ctx.run_dir, "the judged run")


def other_run(ctx: GateContext, key: str, what: str) -> tuple[Path, Comparison]:
    """Evidence that is another sealed run of the judged run's suite: refused (not run) when it is the judged run
    itself or a copy of it (the same run_id), or a run of other decisions (another suite sha256)."""
    path = evidence_path(ctx, key, what)
    judged = judged_run(ctx, key)
    try:
        comparison = compare_run(path, ctx.baseline, ctx.candidate, tainted=ctx.tainted)
    except ResultsError as exc:
        raise MissingEvidenceError(f"evidence {key!r}: {exc}") from exc
    other = run_identity(path, f"evidence {key!r}")
    if other.run_id == judged.run_id:
        raise MissingEvidenceError(f"evidence {key!r} is the judged run itself (run_id {other.run_id}), or a copy of "
                                   f"it: it must be {what}")
    if other.suite_sha256 != judged.suite_sha256:
        raise MissingEvidenceError(f"evidence {key!r} replayed another suite (sha256 {other.suite_sha256[:12]}, the "
                                   f"judged run's {judged.suite_sha256[:12]}): it must be {what}, on the same "
                                   "decisions")
    return path, comparison


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

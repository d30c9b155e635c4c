"""Pre-registered promotion gates: TOML policies evaluated on a run's results (DESIGN §4; 001 §6).

A policy (`configs/gates/*.toml`) is a list of conditions, each with an `id`, a `kind` from
the fixed registry below, its parameters and a description. Every threshold, stratum and
repeat level is a policy value; an unknown kind, parameter or stratum is rejected when the
policy is loaded, so a typo cannot silently loosen a gate.

Each condition evaluates to `pass`, `fail` or `not_run`, with the numbers it judged. The gate
passes only if every condition passes: `not_run` blocks, because a gate that was not run
proved nothing. Evidence the replay run does not produce (a confirmation run, critical-failure
checks, a canary export, ...) is given by path under a named key; a missing key makes its
condition `not_run` with the reason. The JSON formats of that evidence are the models below
and are documented beside each condition in the shipped policies.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from core.evidence import CanaryEvidence, PairedOutcomes, RegistryEvidence
from core.records import BUILTIN_STRATA, KNOWN_FAILURE, Strict
from replay.analysis.compare import (
    ALL_POSITIVE,
    Comparison,
    CorrectnessRow,
    Measure,
    RepeatLevel,
    ResultsError,
    Tainted,
    compare,
    compare_run,
    format_ci,
    format_p,
    format_points,
    load_results,
    plural,
)
from replay.analysis.stats import RepeatComparison, paired_comparison, repeat_comparison
from replay.errors import ReplayError
from replay.suite import SuiteError, load_suite


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
class Outcome:
    status: Status
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)
    tainted_rule_ids: tuple[str, ...] = ()


def _not_run(reason: str) -> Outcome:
    return Outcome(Status.NOT_RUN, reason)


def _judge(ok: bool, reason: str, evidence: dict[str, Any], tainted: tuple[str, ...] = ()) -> Outcome:
    return Outcome(Status.PASS if ok else Status.FAIL, reason, evidence, tainted)


class _MissingEvidence(Exception):
    """Evidence absent or unreadable: the condition is not run, for this reason."""


def _evidence_path(ctx: GateContext, key: str, what: str) -> Path:
    path = ctx.evidence.get(key)
    if path is None:
        raise _MissingEvidence(f"no evidence {key!r} given ({what})")
    if not Path(path).exists():
        raise _MissingEvidence(f"evidence {key!r}: {path} does not exist")
    return Path(path)


def _read_json(ctx: GateContext, key: str, model: type[E], what: str) -> E:
    path = _evidence_path(ctx, key, what)
    try:
        return model.model_validate_json(path.read_bytes())
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "file"
        raise _MissingEvidence(f"evidence {key!r}: {path}: {where}: {first['msg']}") from exc
    except OSError as exc:
        raise _MissingEvidence(f"evidence {key!r}: {path}: {exc.strerror}") from exc


def _paired_outcomes(ctx: GateContext, key: str, measure: str) -> PairedOutcomes:
    outcomes = _read_json(ctx, key, PairedOutcomes, f'a paired-outcomes JSON with "measure": "{measure}"')
    if outcomes.measure != measure:
        raise _MissingEvidence(f"evidence {key!r} measures {outcomes.measure!r}, this condition needs {measure!r}")
    if outcomes.candidate not in (None, ctx.candidate):
        raise _MissingEvidence(f"evidence {key!r} is for candidate {outcomes.candidate!r}, not {ctx.candidate!r}")
    if not outcomes.items:
        raise _MissingEvidence(f"evidence {key!r} has no items")
    return outcomes


def _other_run(ctx: GateContext, key: str, what: str) -> tuple[Path, Comparison]:
    path = _evidence_path(ctx, key, what)
    try:
        return path, compare_run(path, ctx.baseline, ctx.candidate, tainted=ctx.tainted)
    except ResultsError as exc:
        raise _MissingEvidence(f"evidence {key!r}: {exc}") from exc


def _row_of(comparison: Comparison, measure: Measure, scope: str) -> CorrectnessRow:
    try:
        return comparison.row(measure, scope)
    except KeyError as exc:
        raise _MissingEvidence(f"no {measure}-scored decisions in {scope!r} in these results") from exc


def _row_evidence(row: CorrectnessRow, **extra: Any) -> dict[str, Any]:
    return {
        "scope": row.scope, "measure": row.measure, **asdict(row.stats), "tainted_results": row.tainted_results, **extra
    }


def _row_text(row: CorrectnessRow) -> str:
    s = row.stats
    return (
        f"{row.scope} {row.measure}: {s.baseline_correct} → {s.candidate_correct} of {s.n}, "
        f"{format_points(s.points)} points (+{s.wins}/−{s.losses}, p = {format_p(s.p_value)}, "
        f"95% CI {format_ci(s.ci_low, s.ci_high)})"
    )


# ── conditions ──────────────────────────────────────────────────────────────

Basis = Literal["point", "ci_low"]


class _Condition(Strict):
    """Fields named `scope` take a stratum or `all_positive`; fields named `stratum` a stratum."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    description: str = Field(min_length=1)

    def named_strata(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in ("scope", "stratum") if name in type(self).model_fields}

    def evidence_keys(self) -> tuple[str, ...]:
        return tuple(getattr(self, name) for name in ("evidence", "suite_evidence") if name in type(self).model_fields)

    def evaluate(self, ctx: GateContext) -> Outcome:
        raise NotImplementedError


class _ThresholdOnRow(_Condition):
    """Pass when the row's point estimate (or CI lower bound) is at least `min_points`."""

    scope: str
    measure: Measure = "joint"
    min_points: float
    basis: Basis = "point"

    def evaluate(self, ctx: GateContext) -> Outcome:
        row = _row_of(ctx.comparison, self.measure, self.scope)
        value = row.stats.points if self.basis == "point" else row.stats.ci_low
        ok = value is not None and value >= self.min_points
        judged = "the CI lower bound" if self.basis == "ci_low" else "points"
        needs = f"needs {judged} ≥ {format_points(self.min_points)}"
        return _judge(
            ok, f"{_row_text(row)}; {needs}", _row_evidence(row, threshold=self.min_points, basis=self.basis),
            tuple(row.tainted_rule_ids),
        )


class PairedGain(_ThresholdOnRow):
    kind: Literal["paired_gain"]
    scope: str = ALL_POSITIVE


class NonInferiority(_ThresholdOnRow):
    kind: Literal["non_inferiority"]


class TargetedCi(_Condition):
    """Pass when the targeted stratum's paired CI lies above `ci_low_above` (strictly)."""

    kind: Literal["targeted_ci"]
    stratum: str
    measure: Measure = "joint"
    ci_low_above: float = 0.0

    def evaluate(self, ctx: GateContext) -> Outcome:
        row = _row_of(ctx.comparison, self.measure, self.stratum)
        low = row.stats.ci_low
        return _judge(
            low is not None and low > self.ci_low_above,
            f"{_row_text(row)}; needs the CI lower bound > {format_points(self.ci_low_above)}",
            _row_evidence(row, threshold=self.ci_low_above),
            tuple(row.tainted_rule_ids),
        )


def _repeat_text(stratum: str, level: str, s: RepeatComparison) -> str:
    relative = "undefined" if s.relative_reduction is None else f"{100 * s.relative_reduction:.1f}%"
    return (
        f"{stratum} {level} repeats: {s.baseline_repeats} → {s.candidate_repeats} of {s.n}, relative reduction "
        f"{relative} ({plural(s.fixes, 'fix', 'fixes')} / {plural(s.regressions, 'regression')}, "
        f"p = {format_p(s.p_value)})"
    )


class RepeatReduction(_Condition):
    """Pass when repeats of the failed action fall by at least `min_relative_reduction` (0–1)."""

    kind: Literal["repeat_reduction"]
    stratum: str = KNOWN_FAILURE
    level: RepeatLevel = "exact"
    min_relative_reduction: float = Field(ge=0, le=1)
    max_p: float | None = Field(default=None, gt=0, le=1)

    def evaluate(self, ctx: GateContext) -> Outcome:
        try:
            row = ctx.comparison.repeat(self.level, self.stratum)
        except KeyError:
            return _not_run(f"no {self.level}-repeat scores on {self.stratum!r} in these results")
        s = row.stats
        evidence = {"stratum": self.stratum, "level": self.level, **asdict(s), "threshold": self.min_relative_reduction}
        text = _repeat_text(self.stratum, self.level, s)
        if s.relative_reduction is None:
            return _judge(False, f"{text}: the baseline never repeated, so no reduction can be shown", evidence)
        ok = s.relative_reduction >= self.min_relative_reduction
        needs = f"needs ≥ {100 * self.min_relative_reduction:.0f}%"
        if self.max_p is not None:
            ok = ok and s.p_value <= self.max_p
            needs += f" and p ≤ {self.max_p}"
        return _judge(ok, f"{text}; {needs}", evidence, tuple(row.tainted_rule_ids))


class NoNewCriticalFailures(_Condition):
    """Evidence: paired outcomes, measure "critical_failure", true = a critical rule/privacy/security failure."""

    kind: Literal["no_new_critical_failures"]
    evidence: str = "critical_failures"
    max_new: int = Field(default=0, ge=0)
    measure_name: ClassVar[str] = "critical_failure"

    def evaluate(self, ctx: GateContext) -> Outcome:
        outcomes = _paired_outcomes(ctx, self.evidence, self.measure_name)
        new = [i for i in outcomes.items if i.candidate and not i.baseline]
        categories = Counter(item.category or "uncategorised" for item in new)
        evidence = {
            "checks": len(outcomes.items),
            "baseline_failures": sum(i.baseline for i in outcomes.items),
            "candidate_failures": sum(i.candidate for i in outcomes.items),
            "new": [i.id for i in new],
            "new_by_category": dict(categories),
            "threshold": self.max_new,
        }
        listed = f": {', '.join(i.id for i in new[:10])}" if new else ""
        return _judge(
            len(new) <= self.max_new,
            f"{len(new)} new critical failure(s) in {len(outcomes.items)} checks{listed}; allows ≤ {self.max_new}",
            evidence,
        )


class NoUnsupportedCompletionIncrease(_Condition):
    """Evidence: paired outcomes, measure "unsupported_completion", true = a final answer claiming
    work the tool record does not show. Pass when the candidate's rate rises by at most
    `max_increase_points`."""

    kind: Literal["no_unsupported_completion_increase"]
    evidence: str = "unsupported_completion"
    max_increase_points: float = 0.0
    measure_name: ClassVar[str] = "unsupported_completion"

    def evaluate(self, ctx: GateContext) -> Outcome:
        outcomes = _paired_outcomes(ctx, self.evidence, self.measure_name)
        s = repeat_comparison((i.baseline, i.candidate) for i in outcomes.items)
        increase = s.points if s.points is not None else 0.0
        return _judge(
            increase <= self.max_increase_points,
            f"unsupported completions {s.baseline_repeats} → {s.candidate_repeats} of {s.n} "
            f"({format_points(increase)} points, {s.regressions} new / {s.fixes} removed, p = {format_p(s.p_value)}); "
            f"allows ≤ {format_points(self.max_increase_points)} points",
            {**asdict(s), "threshold": self.max_increase_points},
        )


class IsolatedReplayCompletion(_Condition):
    """Evidence: paired outcomes, measure "task_completed", true = the isolated replay task
    completed. No regression: points (candidate − baseline) ≥ `min_points`."""

    kind: Literal["isolated_replay_completion"]
    evidence: str = "isolated_replay"
    min_points: float = 0.0

    def evaluate(self, ctx: GateContext) -> Outcome:
        outcomes = _paired_outcomes(ctx, self.evidence, "task_completed")
        s = paired_comparison((i.baseline, i.candidate) for i in outcomes.items)
        points = s.points if s.points is not None else 0.0
        return _judge(
            points >= self.min_points,
            f"isolated replay completion {s.baseline_correct} → {s.candidate_correct} of {s.n}, "
            f"{format_points(points)} points (+{s.wins}/−{s.losses}, p = {format_p(s.p_value)}, "
            f"95% CI {format_ci(s.ci_low, s.ci_high)}); needs ≥ {format_points(self.min_points)}",
            {**asdict(s), "threshold": self.min_points},
        )


class OverheadLimit(_Condition):
    """Token and latency ratios (candidate / baseline) within 1 + max; beyond it only with
    compensating quality (`compensating_min_points` on `compensating_scope`, if set)."""

    kind: Literal["overhead"]
    max_token_overhead: float = Field(ge=0)
    max_latency_overhead: float = Field(ge=0)
    latency: Literal["mean", "p50"] = "mean"
    compensating_scope: str = ALL_POSITIVE
    compensating_min_points: float | None = None

    def named_strata(self) -> dict[str, str]:
        return {"compensating_scope": self.compensating_scope}

    def evaluate(self, ctx: GateContext) -> Outcome:
        cost = ctx.comparison.overhead
        latency = cost.latency_ratio if self.latency == "mean" else cost.p50_latency_ratio
        if cost.token_ratio is None or latency is None:
            return _not_run("these results carry no completion-token or latency measurements for the baseline")
        over = {
            "tokens": cost.token_ratio - 1 > self.max_token_overhead,
            f"{self.latency} latency": latency - 1 > self.max_latency_overhead,
        }
        evidence = {**asdict(cost), "latency_basis": self.latency, "max_token_overhead": self.max_token_overhead,
                    "max_latency_overhead": self.max_latency_overhead}
        text = (
            f"tokens ×{cost.token_ratio:.3f} (allows ×{1 + self.max_token_overhead:.2f}), {self.latency} latency "
            f"×{latency:.3f} (allows ×{1 + self.max_latency_overhead:.2f})"
        )
        tainted = tuple(ctx.comparison.tainted_rule_ids)
        if not any(over.values()):
            return _judge(True, text, evidence, tainted)
        exceeded = ", ".join(k for k, v in over.items() if v)
        if self.compensating_min_points is None:
            reason = f"{text}; {exceeded} over the limit and the policy allows no compensation"
            return _judge(False, reason, evidence, tainted)
        row = _row_of(ctx.comparison, "joint", self.compensating_scope)
        gain = row.stats.points
        ok = gain is not None and gain >= self.compensating_min_points
        evidence["compensation"] = _row_evidence(row, threshold=self.compensating_min_points)
        return _judge(
            ok,
            f"{text}; {exceeded} over the limit, compensation needs ≥ {format_points(self.compensating_min_points)} "
            f"points: {_row_text(row)}",
            evidence,
            tainted,
        )


class _OtherRunGain(_Condition):
    scope: str = ALL_POSITIVE
    measure: Measure = "joint"
    max_p: float | None = Field(default=None, gt=0, le=1)

    def _gain(self, comparison: Comparison, minimum: float, strict: bool) -> tuple[bool, str, CorrectnessRow]:
        row = _row_of(comparison, self.measure, self.scope)
        points = row.stats.points
        ok = points is not None and (points > minimum if strict else points >= minimum)
        needs = f"needs points {'>' if strict else '≥'} {format_points(minimum)}"
        if self.max_p is not None:
            ok = ok and row.stats.p_value <= self.max_p
            needs += f" and p ≤ {self.max_p}"
        return ok, f"{_row_text(row)}; {needs}", row


class ConfirmationRun(_OtherRunGain):
    """Evidence: a second run directory (another seed or checkpoint) with the same arm names."""

    kind: Literal["confirmation_run"]
    evidence: str = "confirmation"
    min_points: float

    def evaluate(self, ctx: GateContext) -> Outcome:
        path, other = _other_run(ctx, self.evidence, "a run directory of a second seed or checkpoint")
        ok, text, row = self._gain(other, self.min_points, strict=False)
        return _judge(ok, f"confirmation run {path}: {text}", _row_evidence(row, run_dir=str(path)),
                      tuple(row.tainted_rule_ids))


class QuantisationSurvives(_OtherRunGain):
    """Evidence: a run directory of the same arms on the quantised endpoint. The quantised gain
    must reach `min_points` and lose at most `max_drop_points` against this (high-precision) run."""

    kind: Literal["quantisation_survives"]
    evidence: str = "quantised"
    min_points: float
    max_drop_points: float = Field(ge=0)

    def evaluate(self, ctx: GateContext) -> Outcome:
        path, quantised = _other_run(ctx, self.evidence, "a run directory of the same arms on the quantised endpoint")
        ok, text, row = self._gain(quantised, self.min_points, strict=False)
        precise = _row_of(ctx.comparison, self.measure, self.scope).stats.points
        drop = None if precise is None or row.stats.points is None else precise - row.stats.points
        ok = ok and drop is not None and drop <= self.max_drop_points
        return _judge(
            ok,
            f"quantised run {path}: {text}; drop from high precision {format_points(drop)} points "
            f"(allows ≤ {self.max_drop_points:.2f})",
            _row_evidence(row, run_dir=str(path), high_precision_points=precise, drop_points=drop),
            tuple(row.tainted_rule_ids),
        )


class FreshChronological(_OtherRunGain):
    """Evidence: a run directory on decisions captured after `captured_after`, and that run's
    suite directory (to check the capture dates). The direction must hold: points > `points_above`."""

    kind: Literal["fresh_chronological"]
    evidence: str = "fresh"
    suite_evidence: str = "fresh_suite"
    captured_after: datetime
    points_above: float = 0.0

    def evaluate(self, ctx: GateContext) -> Outcome:
        run_path = _evidence_path(ctx, self.evidence, "a run directory on decisions captured after the cut-off")
        suite_path = _evidence_path(ctx, self.suite_evidence, "the fresh run's suite directory, to check capture dates")
        try:
            records = load_results(run_path)
            fresh = compare(records, ctx.baseline, ctx.candidate, tainted=ctx.tainted)
            suite = load_suite(suite_path)
        except (ResultsError, SuiteError) as exc:
            raise _MissingEvidence(f"fresh evidence: {exc}") from exc
        cutoff = self.captured_after if self.captured_after.tzinfo else self.captured_after.replace(tzinfo=UTC)
        captured = {d.id: d.captured_at for d in suite.decisions}
        ids = {r.decision_id for r in records if r.arm == ctx.baseline}
        unknown = sorted(ids - captured.keys())
        if unknown:
            reason = f"{len(unknown)} fresh decision(s) are not in suite {suite_path}: {', '.join(unknown[:10])}"
            return _judge(False, reason, {"unknown": unknown})
        stale = sorted(i for i in ids if _aware(captured[i]) <= cutoff)
        if stale:
            return _judge(
                False,
                f"{len(stale)} decision(s) captured on or before {cutoff.isoformat()}: {', '.join(stale[:10])}",
                {"stale": stale, "captured_after": cutoff.isoformat()},
            )
        ok, text, row = self._gain(fresh, self.points_above, strict=True)
        return _judge(
            ok,
            f"fresh run {run_path} ({len(ids)} decisions captured after {cutoff.date().isoformat()}): {text}",
            _row_evidence(row, run_dir=str(run_path), captured_after=cutoff.isoformat()),
            tuple(row.tainted_rule_ids),
        )


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class IsolatedLiveReplay(_Condition):
    """Evidence: paired outcomes, measure "live_replay_passed", true = the task passed."""

    kind: Literal["isolated_live_replay"]
    evidence: str = "isolated_live_replay"
    min_pass_rate: float = Field(ge=0, le=1)
    max_regressions: int = Field(default=0, ge=0)

    def evaluate(self, ctx: GateContext) -> Outcome:
        outcomes = _paired_outcomes(ctx, self.evidence, "live_replay_passed")
        s = paired_comparison((i.baseline, i.candidate) for i in outcomes.items)
        rate = s.candidate_correct / s.n
        return _judge(
            rate >= self.min_pass_rate and s.losses <= self.max_regressions,
            f"candidate passed {s.candidate_correct} of {s.n} ({100 * rate:.1f}%, "
            f"needs ≥ {100 * self.min_pass_rate:.1f}%); "
            f"{s.losses} regression(s) against the baseline (allows ≤ {self.max_regressions})",
            {**asdict(s), "pass_rate": rate, "min_pass_rate": self.min_pass_rate,
             "max_regressions": self.max_regressions},
        )


class ShadowImproves(_Condition):
    """Evidence: paired outcomes, measure "correct": baseline = the production answer,
    candidate = the shadow answer, both scored with the key-set scorer on fresh tasks."""

    kind: Literal["shadow_improves"]
    evidence: str = "shadow"
    min_items: int = Field(ge=1)
    points_above: float = 0.0
    max_p: float | None = Field(default=None, gt=0, le=1)

    def evaluate(self, ctx: GateContext) -> Outcome:
        outcomes = _paired_outcomes(ctx, self.evidence, "correct")
        s = paired_comparison((i.baseline, i.candidate) for i in outcomes.items)
        if s.n < self.min_items:
            return _not_run(f"shadow evidence has {s.n} paired tasks, the policy needs ≥ {self.min_items}")
        ok = s.points is not None and s.points > self.points_above
        needs = f"needs points > {format_points(self.points_above)}"
        if self.max_p is not None:
            ok = ok and s.p_value <= self.max_p
            needs += f" and p ≤ {self.max_p}"
        return _judge(
            ok,
            f"shadow {s.baseline_correct} → {s.candidate_correct} of {s.n}, {format_points(s.points)} points "
            f"(+{s.wins}/−{s.losses}, p = {format_p(s.p_value)}); {needs}",
            {**asdict(s), "threshold": self.points_above},
        )


class CanaryNoRegression(_Condition):
    """Evidence: canary export JSON (`CanaryEvidence`). Rates may rise by at most the given fractions."""

    kind: Literal["canary_no_regression"]
    evidence: str = "canary"
    min_requests: int = Field(ge=1)
    max_error_rate_increase: float = Field(default=0.0, ge=0)
    max_anomaly_rate_increase: float = Field(default=0.0, ge=0)

    def evaluate(self, ctx: GateContext) -> Outcome:
        canary = _read_json(ctx, self.evidence, CanaryEvidence, "a canary export JSON")
        if canary.adapter not in (None, ctx.candidate):
            return _not_run(f"canary evidence is for {canary.adapter!r}, not {ctx.candidate!r}")
        small = min(canary.control.requests, canary.canary.requests)
        if small < self.min_requests:
            return _not_run(f"canary cohorts have {small} requests, the policy needs ≥ {self.min_requests} each")
        kinds: tuple[Literal["errors", "anomalies"], ...] = ("errors", "anomalies")
        observed = {name: (canary.control.rate(name), canary.canary.rate(name)) for name in kinds}
        rates = {name: (ctrl, cand) for name, (ctrl, cand) in observed.items() if ctrl is not None and cand is not None}
        unobserved = [name for name in kinds if name not in rates]
        if unobserved:
            return _not_run(f"no tool results observed in a cohort, so no {' or '.join(unobserved)} rate "
                            "(is capture on for the canary's workspaces?)")
        limits = {"errors": self.max_error_rate_increase, "anomalies": self.max_anomaly_rate_increase}
        ok = all(cand - ctrl <= limits[name] for name, (ctrl, cand) in rates.items())
        text = "; ".join(
            f"{name} {100 * ctrl:.2f}% → {100 * cand:.2f}% (allows +{100 * limits[name]:.2f} points)"
            for name, (ctrl, cand) in rates.items()
        )
        return _judge(ok, f"canary {canary.canary.requests} vs control {canary.control.requests} requests: {text}",
                      {"control": canary.control.model_dump(), "canary": canary.canary.model_dump(), "limits": limits})


class RollbackReady(_Condition):
    """Evidence: registry state JSON (`RegistryEvidence`): the previous production target is loaded."""

    kind: Literal["rollback_ready"]
    evidence: str = "registry"

    def evaluate(self, ctx: GateContext) -> Outcome:
        state = _read_json(ctx, self.evidence, RegistryEvidence, "a registry state JSON")
        target = state.rollback_target
        evidence = state.model_dump()
        if target is None:
            return _judge(False, "the registry names no rollback target", evidence)
        return _judge(
            target in state.loaded and target != state.production,
            f"rollback target {target!r} is {'loaded' if target in state.loaded else 'NOT loaded'} "
            f"(production: {state.production!r})",
            evidence,
        )


# The fixed registry of condition kinds (001 §6: S16 serious-candidate, S17 production-candidate).
AnyCondition = (
    PairedGain
    | RepeatReduction
    | TargetedCi
    | NoNewCriticalFailures
    | NonInferiority
    | NoUnsupportedCompletionIncrease
    | IsolatedReplayCompletion
    | OverheadLimit
    | ConfirmationRun
    | QuantisationSurvives
    | FreshChronological
    | IsolatedLiveReplay
    | ShadowImproves
    | CanaryNoRegression
    | RollbackReady
)
_KINDS: tuple[type[_Condition], ...] = get_args(AnyCondition)
Condition = Annotated[AnyCondition, Field(discriminator="kind")]
CONDITION_KINDS: tuple[str, ...] = tuple(get_args(cls.model_fields["kind"].annotation)[0] for cls in _KINDS)


class GatePolicy(Strict):
    """A gate written before the run it judges."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    version: str
    description: str = ""
    source: str = ""
    extra_strata: list[str] = Field(default_factory=list)
    conditions: list[Condition] = Field(min_length=1)

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)

    @model_validator(mode="after")
    def _check(self) -> GatePolicy:
        ids = [c.id for c in self.conditions]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"condition ids must be unique: {', '.join(duplicates)}")
        strata = {*BUILTIN_STRATA, *self.extra_strata}
        for condition in self.conditions:
            for name, value in condition.named_strata().items():
                allowed = strata | ({ALL_POSITIVE} if "scope" in name else set())
                if value not in allowed:
                    raise ValueError(
                        f"condition {condition.id!r}: unknown stratum {value!r} in {name} "
                        f"(known: {', '.join(sorted(allowed))}; a suite's own strata go in extra_strata)"
                    )
        return self


def load_policy(path: str | Path) -> GatePolicy:
    """Read and validate a policy; every problem is a GateError naming the file and condition."""
    return _read_policy(Path(path))[0]


def _read_policy(path: Path) -> tuple[GatePolicy, str]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise GateError(f"{path}: cannot read policy: {exc.strerror}") from exc
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise GateError(f"{path}: invalid TOML: {exc}") from exc
    try:
        return GatePolicy.model_validate(data), hashlib.sha256(raw).hexdigest()
    except ValidationError as exc:
        problems = "\n".join(f"  {_policy_problem(error, data)}" for error in exc.errors())
        raise GateError(f"{path}: invalid gate policy:\n{problems}") from exc


def _policy_problem(error: Mapping[str, Any], data: Mapping[str, Any]) -> str:
    loc = list(error["loc"])
    kind = error["type"]
    if len(loc) >= 2 and loc[0] == "conditions" and isinstance(loc[1], int):
        raw = data.get("conditions", [])[loc[1]] if loc[1] < len(data.get("conditions", [])) else {}
        name = raw.get("id", f"#{loc[1] + 1}") if isinstance(raw, dict) else f"#{loc[1] + 1}"
        where = f"condition {name!r}"
        if kind == "union_tag_invalid":
            return f"{where}: unknown kind {raw.get('kind')!r} (known kinds: {', '.join(CONDITION_KINDS)})"
        if kind == "union_tag_not_found":
            return f"{where}: missing kind (known kinds: {', '.join(CONDITION_KINDS)})"
        param = ".".join(str(p) for p in loc[3:])
        where += f" (kind {loc[2]})" if len(loc) > 2 else ""
        if kind == "extra_forbidden":
            return f"{where}: unknown parameter {param!r}"
        if kind == "missing":
            return f"{where}: missing parameter {param!r}"
        return f"{where}: {param}: {error['msg']}"
    if kind == "extra_forbidden":
        return f"unknown policy field {'.'.join(map(str, loc))!r}"
    field_name = ".".join(map(str, loc))
    return f"{field_name}: {error['msg']}" if field_name else error["msg"].removeprefix("Value error, ")


# ── verdicts ────────────────────────────────────────────────────────────────


class ConditionResult(BaseModel):
    id: str
    kind: str
    description: str
    status: Status
    reason: str
    evidence: dict[str, Any] = {}
    tainted_rule_ids: list[str] = []


class Verdict(BaseModel):
    """Every condition's status and evidence; `passed` only if all passed."""

    policy: str
    policy_version: str
    policy_path: str | None = None
    policy_sha256: str | None = None
    run_dir: str | None = None
    baseline: str
    candidate: str
    passed: bool
    conditions: list[ConditionResult]
    evidence_paths: dict[str, str] = {}
    unused_evidence: list[str] = []
    comparisons_made: int
    tainted_rule_ids: list[str] = []
    evaluated_at: datetime

    def status(self, condition_id: str) -> Status:
        for condition in self.conditions:
            if condition.id == condition_id:
                return condition.status
        raise KeyError(f"no condition {condition_id!r} in policy {self.policy!r}")

    def counts(self) -> dict[Status, int]:
        return {s: sum(1 for c in self.conditions if c.status is s) for s in Status}


def evaluate(
    policy: GatePolicy,
    comparison: Comparison,
    evidence: Mapping[str, str | Path] | None = None,
    tainted: Tainted = (),
    *,
    run_dir: str | Path | None = None,
    policy_path: str | Path | None = None,
    policy_sha256: str | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Verdict:
    """Evaluate every condition of `policy` on a comparison (and the evidence files given)."""
    paths = {key: Path(value) for key, value in (evidence or {}).items()}
    ctx = GateContext(comparison, paths, tuple(tainted))
    results = [_evaluate_one(condition, ctx) for condition in policy.conditions]
    used = {key for condition in policy.conditions for key in condition.evidence_keys()}
    tainted_ids = sorted({*comparison.tainted_rule_ids, *(r for c in results for r in c.tainted_rule_ids)})
    return Verdict(
        policy=policy.name,
        policy_version=policy.version,
        policy_path=None if policy_path is None else str(policy_path),
        policy_sha256=policy_sha256,
        run_dir=None if run_dir is None else str(run_dir),
        baseline=comparison.baseline,
        candidate=comparison.candidate,
        passed=all(r.status is Status.PASS for r in results),
        conditions=results,
        evidence_paths={key: str(value) for key, value in paths.items()},
        unused_evidence=sorted(paths.keys() - used),
        comparisons_made=comparison.comparisons_made,
        tainted_rule_ids=tainted_ids,
        evaluated_at=now(),
    )


def _evaluate_one(condition: AnyCondition, ctx: GateContext) -> ConditionResult:
    try:
        outcome = condition.evaluate(ctx)
    except _MissingEvidence as exc:
        outcome = _not_run(str(exc))
    return ConditionResult(
        id=condition.id,
        kind=condition.kind,
        description=condition.description,
        status=outcome.status,
        reason=outcome.reason,
        evidence=outcome.evidence,
        tainted_rule_ids=list(outcome.tainted_rule_ids),
    )


def evaluate_gate(
    policy_path: str | Path,
    run_dir: str | Path,
    baseline: str,
    candidate: str,
    evidence: Mapping[str, str | Path] | None = None,
    tainted: Tainted = (),
) -> Verdict:
    """Load the policy and the run's results, compare the two arms, and evaluate the gate."""
    policy, sha256 = _read_policy(Path(policy_path))
    comparison = compare_run(run_dir, baseline, candidate, tainted=tainted)
    return evaluate(
        policy, comparison, evidence, tainted, run_dir=run_dir, policy_path=policy_path, policy_sha256=sha256
    )


def verdict_filename(policy: str, candidate: str) -> str:
    """`gate-<policy>-<candidate>.json`, with characters unsafe in a file name replaced."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", candidate)
    return f"gate-{policy}-{safe}.json"


def write_verdict(run_dir: str | Path, verdict: Verdict) -> Path:
    """Write the verdict as JSON into the run directory; returns its path."""
    path = Path(run_dir) / verdict_filename(verdict.policy, verdict.candidate)
    path.write_text(verdict.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return path


def read_verdict(path: str | Path) -> Verdict:
    """A verdict written by `write_verdict` (the report reads them back)."""
    try:
        return Verdict.model_validate_json(Path(path).read_bytes())
    except (OSError, ValidationError) as exc:
        raise GateError(f"{path}: not a gate verdict: {exc}") from exc


STATUS_LABEL = {Status.PASS: "pass", Status.FAIL: "FAIL", Status.NOT_RUN: "not run"}


def format_verdict(verdict: Verdict) -> str:
    """The verdict as text: the decision, then one line per condition with its evidence."""
    counts = verdict.counts()
    decision = "PASSED" if verdict.passed else "REJECTED"
    lines = [
        f"gate {verdict.policy} v{verdict.policy_version}: candidate {verdict.candidate!r} against "
        f"{verdict.baseline!r}: {decision} ({counts[Status.PASS]} pass, {counts[Status.FAIL]} fail, "
        f"{counts[Status.NOT_RUN]} not run)",
    ]
    width = max(len(c.id) for c in verdict.conditions)
    for c in verdict.conditions:
        mark = " †" if c.tainted_rule_ids else ""
        lines.append(f"  [{STATUS_LABEL[c.status]:>7}] {c.id:<{width}}  {c.description}{mark}")
        lines.append(f"            {'':<{width}}  {c.reason}")
    if verdict.unused_evidence:
        lines.append(f"evidence given but used by no condition: {', '.join(verdict.unused_evidence)}")
    if verdict.tainted_rule_ids:
        disputed = ", ".join(verdict.tainted_rule_ids)
        lines.append(f"† rests on results that carried disputed rule(s) {disputed}: re-run before relying on it")
    lines.append(f"{verdict.comparisons_made} paired tests in the comparison, uncorrected for multiple comparisons.")
    return "\n".join(lines)

"""The fixed registry of condition kinds: each a pydantic model of its parameters with an `evaluate`
that judges one `GateContext` (001 §6: S16 serious-candidate, S17 production-candidate)."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Annotated, ClassVar, Literal, get_args

from pydantic import Field

from core.evidence import AgreementReport, CanaryCohort, CanaryEvidence, RegistryEvidence
from core.names import Name
from core.records import KNOWN_FAILURE, Strict
from replay.analysis.compare import (
    ALL_POSITIVE,
    Comparison,
    CorrectnessRow,
    Measure,
    RepeatLevel,
    compare,
    format_ci,
    format_p,
    format_points,
    plural,
)
from replay.analysis.gates.context import (
    GateContext,
    GateOutcome,
    MissingEvidenceError,
    evidence_path,
    judge,
    not_run,
    other_run,
    paired_outcomes,
    read_json,
    row_evidence,
    row_of,
    row_text,
    run_identity,
)
from replay.analysis.gates.derivation import (
    check_after_training,
    check_confirmation,
    check_quantised,
    check_trial_subject,
)
from replay.run.directory import ResultsError, load_results
from replay.stats import (
    PairedComparison,
    RepeatComparison,
    clopper_pearson,
    paired_comparison,
    rejects,
    repeat_comparison,
    share_difference,
)
from replay.suite import SuiteError, load_suite

Basis = Literal["point", "ci_low"]


class _Condition(Strict):
    """Fields named `scope` take a stratum or `all_positive`; fields named `stratum` a stratum."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    description: str = Field(min_length=1)

    def named_strata(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in ("scope", "stratum") if name in type(self).model_fields}

    def evidence_keys(self) -> tuple[str, ...]:
        return tuple(getattr(self, name) for name in ("evidence", "suite_evidence") if name in type(self).model_fields)

    def evaluate(self, ctx: GateContext) -> GateOutcome:
        raise NotImplementedError


class _ThresholdOnRow(_Condition):
    """Pass when the row's point estimate (or CI lower bound) is at least `min_points`."""

    scope: str
    measure: Measure = "joint"
    min_points: float
    basis: Basis = "point"

    def _max_p(self) -> float | None:
        return None

    def evaluate(self, ctx: GateContext) -> GateOutcome:
        row = row_of(ctx.comparison, self.measure, self.scope)
        value = row.stats.points if self.basis == "point" else row.stats.ci_low
        ok = value is not None and value >= self.min_points
        judged = "the CI lower bound" if self.basis == "ci_low" else "points"
        needs = f"needs {judged} ≥ {format_points(self.min_points)}"
        max_p = self._max_p()
        if max_p is not None:
            ok = ok and rejects(row.stats.p_value, max_p)
            needs += f" and p ≤ {max_p}"
        return judge(
            ok, f"{row_text(row)}; {needs}", row_evidence(row, threshold=self.min_points, basis=self.basis),
            tuple(row.tainted_rule_ids),
        )


class PairedGain(_ThresholdOnRow):
    """`max_p` (optional): the exact sign test's α, also required; `worker-replay plan` sizes suites for it."""

    kind: Literal["paired_gain"]
    scope: str = ALL_POSITIVE
    max_p: float | None = Field(default=None, gt=0, lt=1)

    def _max_p(self) -> float | None:
        return self.max_p


class NonInferiority(_ThresholdOnRow):
    kind: Literal["non_inferiority"]


class TargetedCi(_Condition):
    """Pass when the targeted stratum's paired CI lies above `ci_low_above` (strictly)."""

    kind: Literal["targeted_ci"]
    stratum: str
    measure: Measure = "joint"
    ci_low_above: float = 0.0

    def evaluate(self, ctx: GateContext) -> GateOutcome:
        row = row_of(ctx.comparison, self.measure, self.stratum)
        low = row.stats.ci_low
        return judge(
            low is not None and low > self.ci_low_above,
            f"{row_text(row)}; needs the CI lower bound > {format_points(self.ci_low_above)}",
            row_evidence(row, threshold=self.ci_low_above),
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

    def evaluate(self, ctx: GateContext) -> GateOutcome:
        try:
            row = ctx.comparison.repeat(self.level, self.stratum)
        except KeyError:
            return not_run(f"no {self.level}-repeat scores on {self.stratum!r} in these results")
        s = row.stats
        evidence = {"stratum": self.stratum, "level": self.level, **asdict(s), "threshold": self.min_relative_reduction}
        text = _repeat_text(self.stratum, self.level, s)
        if s.relative_reduction is None:
            return judge(False, f"{text}: the baseline never repeated, so no reduction can be shown", evidence)
        ok = s.relative_reduction >= self.min_relative_reduction
        needs = f"needs ≥ {100 * self.min_relative_reduction:.0f}%"
        if self.max_p is not None:
            ok = ok and rejects(s.p_value, self.max_p)
            needs += f" and p ≤ {self.max_p}"
        return judge(ok, f"{text}; {needs}", evidence, tuple(row.tainted_rule_ids))


class NoNewCriticalFailures(_Condition):
    """Evidence: paired outcomes, measure "critical_failure", true = a critical rule/privacy/security failure."""

    kind: Literal["no_new_critical_failures"]
    evidence: str = "critical_failures"
    max_new: int = Field(default=0, ge=0)
    measure_name: ClassVar[str] = "critical_failure"

    def evaluate(self, ctx: GateContext) -> GateOutcome:
        outcomes = paired_outcomes(ctx, self.evidence, self.measure_name)
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
        return judge(
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

    def evaluate(self, ctx: GateContext) -> GateOutcome:
        outcomes = paired_outcomes(ctx, self.evidence, self.measure_name)
        s = repeat_comparison((i.baseline, i.candidate) for i in outcomes.items)
        increase = s.points if s.points is not None else 0.0
        return judge(
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

    def evaluate(self, ctx: GateContext) -> GateOutcome:
        outcomes = paired_outcomes(ctx, self.evidence, "task_completed")
        s = paired_comparison((i.baseline, i.candidate) for i in outcomes.items)
        points = s.points if s.points is not None else 0.0
        return judge(
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

    def evaluate(self, ctx: GateContext) -> GateOutcome:
        cost = ctx.comparison.overhead
        latency = cost.latency_ratio if self.latency == "mean" else cost.p50_latency_ratio
        if cost.token_ratio is None or latency is None:
            return not_run("these results carry no completion-token or latency measurements for the baseline")
        # ratio > 1 + allowance, not ratio − 1 > allowance: 11/10 and 1 + 0.1 round to the same double, while
        # 11/10 − 1 is 0.10000000000000009, so a ratio of exactly the allowance would fail.
        over = {
            "tokens": cost.token_ratio > 1 + self.max_token_overhead,
            f"{self.latency} latency": latency > 1 + self.max_latency_overhead,
        }
        evidence = {**asdict(cost), "latency_basis": self.latency, "max_token_overhead": self.max_token_overhead,
                    "max_latency_overhead": self.max_latency_overhead}
        text = (
            f"tokens ×{cost.token_ratio:.3f} (allows ×{1 + self.max_token_overhead:.2f}), {self.latency} latency "
            f"×{latency:.3f} (allows ×{1 + self.max_latency_overhead:.2f})"
        )
        tainted = tuple(ctx.comparison.tainted_rule_ids)
        if not any(over.values()):
            return judge(True, text, evidence, tainted)
        exceeded = ", ".join(k for k, v in over.items() if v)
        if self.compensating_min_points is None:
            reason = f"{text}; {exceeded} over the limit and the policy allows no compensation"
            return judge(False, reason, evidence, tainted)
        row = row_of(ctx.comparison, "joint", self.compensating_scope)
        gain = row.stats.points
        ok = gain is not None and gain >= self.compensating_min_points
        evidence["compensation"] = row_evidence(row, threshold=self.compensating_min_points)
        return judge(
            ok,
            f"{text}; {exceeded} over the limit, compensation needs ≥ {format_points(self.compensating_min_points)} "
            f"points: {row_text(row)}",
            evidence,
            tainted,
        )


class _OtherRunGain(_Condition):
    scope: str = ALL_POSITIVE
    measure: Measure = "joint"
    max_p: float | None = Field(default=None, gt=0, le=1)

    def _gain(self, comparison: Comparison, minimum: float, strict: bool) -> tuple[bool, str, CorrectnessRow]:
        row = row_of(comparison, self.measure, self.scope)
        points = row.stats.points
        ok = points is not None and (points > minimum if strict else points >= minimum)
        needs = f"needs points {'>' if strict else '≥'} {format_points(minimum)}"
        if self.max_p is not None:
            ok = ok and rejects(row.stats.p_value, self.max_p)
            needs += f" and p ≤ {self.max_p}"
        return ok, f"{row_text(row)}; {needs}", row


class ConfirmationRun(_OtherRunGain):
    """Evidence: a second run directory of the same suite with the same arm names, each served by the judged run's
    weights, with another seed (`derivation.check_confirmation`)."""

    kind: Literal["confirmation_run"]
    evidence: str = "confirmation"
    min_points: float

    def evaluate(self, ctx: GateContext) -> GateOutcome:
        path, other = other_run(ctx, self.evidence, "a run directory of a second seed or checkpoint")
        check_confirmation(ctx, self.evidence, path)
        ok, text, row = self._gain(other, self.min_points, strict=False)
        return judge(ok, f"confirmation run {path}: {text}", row_evidence(row, run_dir=str(path)),
                      tuple(row.tainted_rule_ids))


class QuantisationSurvives(_OtherRunGain):
    """Evidence: a run directory of the same arms on the quantised endpoint, each arm served by a quantised build
    derived from its judged weights (`derivation.check_quantised`). The quantised gain must reach `min_points` and
    lose at most `max_drop_points` against this (high-precision) run."""

    kind: Literal["quantisation_survives"]
    evidence: str = "quantised"
    min_points: float
    max_drop_points: float = Field(ge=0)

    def evaluate(self, ctx: GateContext) -> GateOutcome:
        path, quantised = other_run(ctx, self.evidence, "a run directory of the same arms on the quantised endpoint")
        check_quantised(ctx, self.evidence, path)
        ok, text, row = self._gain(quantised, self.min_points, strict=False)
        high = row_of(ctx.comparison, self.measure, self.scope).stats
        precise = high.points
        drop = None if precise is None or row.stats.points is None else _points_drop(high, row.stats)
        ok = ok and drop is not None and drop <= self.max_drop_points
        return judge(
            ok,
            f"quantised run {path}: {text}; drop from high precision {format_points(drop)} points "
            f"(allows ≤ {self.max_drop_points:.2f})",
            row_evidence(row, run_dir=str(path), high_precision_points=precise, drop_points=drop),
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

    def evaluate(self, ctx: GateContext) -> GateOutcome:
        run_path = evidence_path(ctx, self.evidence, "a run directory on decisions captured after the cut-off")
        suite_path = evidence_path(ctx, self.suite_evidence, "the fresh run's suite directory, to check capture dates")
        try:
            records = load_results(run_path)
            fresh = compare(records, ctx.baseline, ctx.candidate, tainted=ctx.tainted)
            suite = load_suite(suite_path)
        except (ResultsError, SuiteError) as exc:
            raise MissingEvidenceError(f"fresh evidence: {exc}") from exc
        fresh_run = run_identity(run_path, f"evidence {self.evidence!r}")
        if fresh_run.suite_sha256 != suite.sha256:
            raise MissingEvidenceError(f"evidence {self.evidence!r} replayed another suite than "
                                       f"{self.suite_evidence!r} (sha256 {fresh_run.suite_sha256[:12]}, {suite_path}: "
                                       f"{suite.sha256[:12]})")
        cutoff = self.captured_after if self.captured_after.tzinfo else self.captured_after.replace(tzinfo=UTC)
        captured = {d.id: d.captured_at for d in suite.decisions}
        ids = {r.decision_id for r in records if r.arm == ctx.baseline}
        unknown = sorted(ids - captured.keys())
        if unknown:
            reason = f"{len(unknown)} fresh decision(s) are not in suite {suite_path}: {', '.join(unknown[:10])}"
            return judge(False, reason, {"unknown": unknown})
        stale = sorted(i for i in ids if _aware(captured[i]) <= cutoff)
        if stale:
            return judge(
                False,
                f"{len(stale)} decision(s) captured on or before {cutoff.isoformat()}: {', '.join(stale[:10])}",
                {"stale": stale, "captured_after": cutoff.isoformat()},
            )
        check_after_training(run_path, ctx.candidate, min((_aware(captured[i]) for i in ids), default=None))
        ok, text, row = self._gain(fresh, self.points_above, strict=True)
        return judge(
            ok,
            f"fresh run {run_path} ({len(ids)} decisions captured after {cutoff.date().isoformat()}): {text}",
            row_evidence(row, run_dir=str(run_path), captured_after=cutoff.isoformat()),
            tuple(row.tainted_rule_ids),
        )


def _points_drop(high: PairedComparison, low: PairedComparison) -> float:
    """high − low in points, from the counts (`share_difference`), so a drop of exactly the allowance equals it
    (7/150 − 4/150 is 2.0000000000000004 as a difference of rounded points)."""
    return 100 * share_difference(high.wins - high.losses, high.n, low.wins - low.losses, low.n)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class IsolatedLiveReplay(_Condition):
    """Evidence: paired outcomes, measure "live_replay_passed", true = the task passed."""

    kind: Literal["isolated_live_replay"]
    evidence: str = "isolated_live_replay"
    min_pass_rate: float = Field(ge=0, le=1)
    max_regressions: int = Field(default=0, ge=0)

    def evaluate(self, ctx: GateContext) -> GateOutcome:
        outcomes = paired_outcomes(ctx, self.evidence, "live_replay_passed")
        s = paired_comparison((i.baseline, i.candidate) for i in outcomes.items)
        rate = s.candidate_correct / s.n
        return judge(
            rate >= self.min_pass_rate and s.losses <= self.max_regressions,
            f"candidate passed {s.candidate_correct} of {s.n} ({100 * rate:.1f}%, "
            f"needs ≥ {100 * self.min_pass_rate:.1f}%); "
            f"{s.losses} regression(s) against the baseline (allows ≤ {self.max_regressions})",
            {**asdict(s), "pass_rate": rate, "min_pass_rate": self.min_pass_rate,
             "max_regressions": self.max_regressions},
        )


class ShadowImproves(_Condition):
    """Evidence: paired outcomes, measure "correct": baseline = the production answer,
    candidate = the shadow answer, both scored with the key-set scorer on fresh tasks; its `subject` must name the
    shadowed version by the judged candidate's fingerprint (`derivation.check_trial_subject`)."""

    kind: Literal["shadow_improves"]
    evidence: str = "shadow"
    min_items: int = Field(ge=1)
    points_above: float = 0.0
    max_p: float | None = Field(default=None, gt=0, le=1)

    def evaluate(self, ctx: GateContext) -> GateOutcome:
        outcomes = paired_outcomes(ctx, self.evidence, "correct")
        check_trial_subject(ctx, self.evidence, outcomes.subject)
        s = paired_comparison((i.baseline, i.candidate) for i in outcomes.items)
        if s.n < self.min_items:
            return not_run(f"shadow evidence has {s.n} paired tasks, the policy needs ≥ {self.min_items}")
        ok = s.points is not None and s.points > self.points_above
        needs = f"needs points > {format_points(self.points_above)}"
        if self.max_p is not None:
            ok = ok and rejects(s.p_value, self.max_p)
            needs += f" and p ≤ {self.max_p}"
        return judge(
            ok,
            f"shadow {s.baseline_correct} → {s.candidate_correct} of {s.n}, {format_points(s.points)} points "
            f"(+{s.wins}/−{s.losses}, p = {format_p(s.p_value)}); {needs}",
            {**asdict(s), "threshold": self.points_above},
        )


class CanaryNoRegression(_Condition):
    """Evidence: canary export JSON (`CanaryEvidence`), its `subject` naming the canary version by the judged
    candidate's fingerprint (`derivation.check_trial_subject`). Rates may rise by at most the given fractions."""

    kind: Literal["canary_no_regression"]
    evidence: str = "canary"
    min_requests: int = Field(ge=1)
    max_error_rate_increase: float = Field(default=0.0, ge=0)
    max_anomaly_rate_increase: float = Field(default=0.0, ge=0)

    def evaluate(self, ctx: GateContext) -> GateOutcome:
        canary = read_json(ctx, self.evidence, CanaryEvidence, "a canary export JSON")
        if canary.adapter not in (None, ctx.candidate):
            return not_run(f"canary evidence is for {canary.adapter!r}, not {ctx.candidate!r}")
        check_trial_subject(ctx, self.evidence, canary.subject)
        small = min(canary.control.requests, canary.canary.requests)
        if small < self.min_requests:
            return not_run(f"canary cohorts have {small} requests, the policy needs ≥ {self.min_requests} each")
        kinds: tuple[Literal["errors", "anomalies"], ...] = ("errors", "anomalies")
        observed = {name: (canary.control.rate(name), canary.canary.rate(name)) for name in kinds}
        rates = {name: (ctrl, cand) for name, (ctrl, cand) in observed.items() if ctrl is not None and cand is not None}
        unobserved = [name for name in kinds if name not in rates]
        if unobserved:
            return not_run(f"no tool results observed in a cohort, so no {' or '.join(unobserved)} rate "
                            "(is capture on for the canary's workspaces?)")
        limits = {"errors": self.max_error_rate_increase, "anomalies": self.max_anomaly_rate_increase}
        ok = all(_rate_rise(canary.control, canary.canary, name) <= limits[name] for name in rates)
        text = "; ".join(
            f"{name} {100 * ctrl:.2f}% → {100 * cand:.2f}% (allows +{100 * limits[name]:.2f} points)"
            for name, (ctrl, cand) in rates.items()
        )
        return judge(ok, f"canary {canary.canary.requests} vs control {canary.control.requests} requests: {text}",
                      {"control": canary.control.model_dump(), "canary": canary.canary.model_dump(), "limits": limits})


def _rate_rise(control: CanaryCohort, canary: CanaryCohort, what: Literal["errors", "anomalies"]) -> float:
    """canary − control rate, from the counts over `CanaryCohort.rate`'s denominators (`share_difference`), so a
    rise of exactly the allowance equals it."""
    def count_over(cohort: CanaryCohort) -> tuple[int, int]:
        over = cohort.outcomes if what == "anomalies" and cohort.outcomes is not None else cohort.requests
        return getattr(cohort, what), over

    return share_difference(*count_over(canary), *count_over(control))


class RollbackReady(_Condition):
    """Evidence: registry state JSON (`RegistryEvidence`): the previous production target is loaded."""

    kind: Literal["rollback_ready"]
    evidence: str = "registry"

    def evaluate(self, ctx: GateContext) -> GateOutcome:
        state = read_json(ctx, self.evidence, RegistryEvidence, "a registry state JSON")
        target = state.rollback_target
        evidence = state.model_dump()
        if target is None:
            return judge(False, "the registry names no rollback target", evidence)
        return judge(
            target in state.loaded and target != state.production,
            f"rollback target {target!r} is {'loaded' if target in state.loaded else 'NOT loaded'} "
            f"(production: {state.production!r})",
            evidence,
        )


class ReviewerAgreement(_Condition):
    """Evidence: `worker-replay qa agree --out FILE` (`core.evidence.AgreementReport`); the candidate is a
    reviewer as that file names it (`qwen`, `production@shadow-cascade`). Pass when it has at least
    `min_labelled` runs with a person's disposition (fewer: not_run) and the upper bound of the exact 95%
    Clopper–Pearson interval of its false-pass rate (passed, where people failed the run), recomputed here from
    the file's counts, is at most `max_false_pass_upper`. `workspace`: judge that workspace's figures, not all."""

    kind: Literal["reviewer_agreement"]
    evidence: str = "reviewer_agreement"
    workspace: Name | None = None
    min_labelled: int = Field(ge=1)
    max_false_pass_upper: float = Field(gt=0, le=1)

    def evaluate(self, ctx: GateContext) -> GateOutcome:
        report = read_json(ctx, self.evidence, AgreementReport, "a reviewer agreement JSON (`qa agree --out`)")
        scope = self.workspace or "all workspaces"
        row = report.row(ctx.candidate, self.workspace)
        if row is None:
            return not_run(f"evidence {self.evidence!r} has no verdicts of reviewer {ctx.candidate!r} on {scope}")
        if row.labelled < self.min_labelled:
            return not_run(f"reviewer {ctx.candidate!r} has {row.labelled} run(s) with a person's disposition on "
                           f"{scope}, the policy needs ≥ {self.min_labelled}")
        low, high = clopper_pearson(row.false_passes, row.human_fails)
        measured = f"{row.false_passes} of {row.human_fails}" if row.human_fails else "none: no run people failed"
        return judge(
            high <= self.max_false_pass_upper,
            f"reviewer {ctx.candidate!r} on {scope}, {row.labelled} labelled run(s): false passes {measured}, "
            f"95% CP [{100 * low:.2f}%, {100 * high:.2f}%]; needs the upper bound ≤ "
            f"{100 * self.max_false_pass_upper:.2f}%",
            {"reviewer": ctx.candidate, "workspace": self.workspace, "labelled": row.labelled,
             "false_passes": row.false_passes, "human_fails": row.human_fails, "false_pass_ci": [low, high],
             "escalations": row.escalations, "kappa": row.kappa, "threshold": self.max_false_pass_upper,
             "min_labelled": self.min_labelled},
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
    | ReviewerAgreement
)
_KINDS: tuple[type[_Condition], ...] = get_args(AnyCondition)
Condition = Annotated[AnyCondition, Field(discriminator="kind")]
CONDITION_KINDS: tuple[str, ...] = tuple(get_args(cls.model_fields["kind"].annotation)[0] for cls in _KINDS)

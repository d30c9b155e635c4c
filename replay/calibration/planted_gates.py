"""Gate conditions against planted candidates: pass rate per condition, false-pass rate under the null.

A condition has an α only where it is a test: `max_p` (the exact sign test's level), or a CI
lower bound (one side of a 95% two-sided interval: 0.025). A point threshold without `max_p` has
none; its false-pass rate is still shown. The row `all-judged` is every judged condition passing
at once, bounded by its strictest test, whose α it is set beside.
"""

from __future__ import annotations

from collections import defaultdict

from replay.analysis.compare import compare
from replay.analysis.gates.conditions import NonInferiority, PairedGain, RepeatReduction, TargetedCi
from replay.analysis.gates.context import GateContext, Status
from replay.analysis.gates.policy import GatePolicy, load_policy
from replay.calibration.planted import PlantedSpec
from replay.calibration.results import CandidateRates, ConditionCalibration, GateReport, Rate
from replay.calibration.simulate import Progress, Simulator
from replay.calibration.spec import BASELINE_ARM, CalibrationSpec

TARGETED_CI_ALPHA = 0.025
ALL_JUDGED = "all-judged"
Judged = PairedGain | NonInferiority | TargetedCi | RepeatReduction


def judged_conditions(policy: GatePolicy) -> list[Judged]:
    """The conditions decision replay alone can judge (the others need evidence it does not produce)."""
    return [c for c in policy.conditions if isinstance(c, Judged)]


def condition_alpha(condition: Judged) -> float | None:
    if isinstance(condition, TargetedCi):
        return TARGETED_CI_ALPHA
    if isinstance(condition, PairedGain | RepeatReduction) and condition.max_p is not None:
        return condition.max_p
    if isinstance(condition, PairedGain | NonInferiority) and condition.basis == "ci_low":
        return TARGETED_CI_ALPHA
    return None


def _planted_truth(spec: PlantedSpec, baseline: str, candidate: str) -> tuple[float, float | None]:
    b, c = spec.arm(baseline), spec.arm(candidate)
    reduction = 1 - c.repeat / b.repeat if b.repeat > 0 else None
    return round(100 * (c.right - b.right), 6), reduction


def _null_candidate(condition: Judged, truths: dict[str, tuple[float, float | None]], spec: PlantedSpec,
                    baseline: str) -> str | None:
    if isinstance(condition, NonInferiority):
        return next((c for c, (e, _) in truths.items() if abs(e - condition.min_points) < 1e-9), None)
    return _no_effect(truths, spec, baseline)


def _no_effect(truths: dict[str, tuple[float, float | None]], spec: PlantedSpec, baseline: str) -> str | None:
    """The candidate planted exactly like the baseline, if any."""
    base = spec.arm(baseline)
    return next((c for c in truths if spec.arm(c).model_copy(update={"model": base.model}) == base), None)


def calibrate_gate(spec: CalibrationSpec, sim: Simulator, replicates: int, progress: Progress) -> GateReport:
    assert spec.gate is not None
    policy = load_policy(spec.gate.policy)
    conditions = judged_conditions(policy)
    arms = {BASELINE_ARM, *(f"cand-{c}" for c in spec.gate.candidates)}
    passes: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in range(replicates):
        rows = sim.rows(spec, r, arms)
        for candidate in spec.gate.candidates:
            ctx = GateContext(compare(rows, BASELINE_ARM, f"cand-{candidate}"), {})
            passed = [condition.evaluate(ctx).status is Status.PASS for condition in conditions]
            for condition, ok in zip(conditions, passed, strict=True):
                passes[candidate][condition.id] += ok
            passes[candidate][ALL_JUDGED] += all(passed)
        progress("gate", r + 1, replicates)
    truths = {c: _planted_truth(spec, spec.gate.baseline, c) for c in spec.gate.candidates}
    ids = [*(k.id for k in conditions), ALL_JUDGED]
    candidates = [CandidateRates(candidate=c, effect_points=truths[c][0], repeat_reduction=truths[c][1],
                                 passed={i: Rate.of(passes[c][i], replicates) for i in ids})
                  for c in spec.gate.candidates]
    rows_out = []
    for condition in conditions:
        alpha, null = condition_alpha(condition), _null_candidate(condition, truths, spec, spec.gate.baseline)
        rate = Rate.of(passes[null][condition.id], replicates) if null is not None else None
        within = None if alpha is None or rate is None else rate.low <= alpha
        rows_out.append(ConditionCalibration(id=condition.id, kind=condition.kind, alpha=alpha, null_candidate=null,
                                             false_pass=rate, within_alpha=within))
    # All judged conditions at once: no more often than its strictest test, so that test's α bounds it.
    alphas = [c.alpha for c in rows_out if c.alpha is not None]
    null = _no_effect(truths, spec, spec.gate.baseline)
    rate = Rate.of(passes[null][ALL_JUDGED], replicates) if null is not None else None
    alpha = min(alphas) if alphas else None
    rows_out.append(ConditionCalibration(id=ALL_JUDGED, kind="all", alpha=alpha, null_candidate=null, false_pass=rate,
                                         within_alpha=None if alpha is None or rate is None else rate.low <= alpha))
    return GateReport(policy=policy.name, baseline=spec.gate.baseline, replicates=replicates, candidates=candidates,
                      conditions=rows_out)

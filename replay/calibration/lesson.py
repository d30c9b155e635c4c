"""The lesson gate against a planted harmful rule: causal and leave-one-out eviction rates per rule.

A rule is harmful when its planted behaviour is a repeat or a wrong call, genuine when it is the
right call, and neutral (no effect: the null) when it is not planted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from core.records import ResultRecord
from replay.calibration.planted import PlantedSpec
from replay.calibration.results import LessonReport, Rate, RuleRates, UptakeRates
from replay.calibration.simulate import Progress, Simulator
from replay.calibration.spec import CalibrationSpec
from replay.memory.inject import Withheld, WorkspaceMinus
from replay.memory.lessons import (
    AblationPolicy,
    LessonVerdict,
    causal_verdicts,
    leave_one_out_verdicts,
    trials_from_results,
)


def rule_role(spec: PlantedSpec, rule_id: str) -> str:
    planted = next((r for r in spec.rules if r.id == rule_id), None)
    if planted is None or planted.follow == 0:
        return "neutral"
    return "genuine" if planted.does == "right" else "harmful"


def with_uptake(spec: CalibrationSpec, rule_id: str, uptake: float) -> CalibrationSpec:
    rules = [r.model_copy(update={"follow": uptake}) if r.id == rule_id else r for r in spec.rules]
    return spec.model_copy(update={"rules": rules})


def evicted(rows: Sequence[ResultRecord], workspace: str, alpha: float) -> tuple[set[str], set[str]]:
    """(rules the causal gate evicts, rules leave-one-out evicts) in `workspace`."""
    trials = trials_from_results(rows)
    causal = {v.rule_id for v in causal_verdicts(trials, AblationPolicy(alpha=alpha))
              if v.workspace == workspace and v.verdict is LessonVerdict.EVICT}
    loo = {v.rule_id for v in leave_one_out_verdicts(trials)
           if v.workspace == workspace and v.verdict is LessonVerdict.EVICT}
    return causal, loo


def calibrate_lesson(spec: CalibrationSpec, sim: Simulator, replicates: int, progress: Progress) -> LessonReport:
    assert spec.lesson is not None
    lesson, alpha = spec.lesson, AblationPolicy().alpha
    arms = {a.name for a in sim.config.arms if not isinstance(a.condition, Withheld)}
    rules = [a.condition.rule_id for a in sim.config.arms if isinstance(a.condition, WorkspaceMinus)]
    out = []
    for uptake in lesson.uptakes:
        variant = with_uptake(spec, lesson.rule, uptake)
        causal: dict[str, int] = defaultdict(int)
        loo: dict[str, int] = defaultdict(int)
        for r in range(replicates):
            by_causal, by_loo = evicted(sim.rows(variant, r, arms), lesson.workspace, alpha)
            for rule in rules:
                causal[rule] += rule in by_causal
                loo[rule] += rule in by_loo
            progress(f"lesson uptake {uptake:g}", r + 1, replicates)
        out.append(UptakeRates(uptake=uptake, rules=[
            RuleRates(rule_id=rule, role=rule_role(variant, rule), causal=Rate.of(causal[rule], replicates),
                      leave_one_out=Rate.of(loo[rule], replicates)) for rule in rules]))
    return LessonReport(workspace=lesson.workspace, rule=lesson.rule, alpha=alpha, replicates=replicates, uptakes=out)

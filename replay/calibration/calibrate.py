"""`worker-replay calibrate` (DESIGN §10): the instrument's false-pass rate and power, measured.

Two parts, both on the planted-effect endpoint's policy (`planted.py`):

* **End to end** — a few replicates through the real runner against the planted server, then
  compare, gate and lesson gate on the results: proves the plumbing. Each replicate's rows are
  also simulated with the same seed; the two must agree row for row.
* **Monte-Carlo bulk** — hundreds of replicates on simulated result rows: the runner's own plan
  (memory injected per arm), the policy's answers, the runner's own parse and score
  (`result_record`), then the same `compare`, gate conditions and lesson-gate functions. No HTTP.

Per gate condition judged from decision replay: its pass rate for every planted candidate, with
95% Wilson intervals; the rate for the candidate planted identical to the baseline (for a
non-inferiority condition: the candidate planted exactly at its margin, when the spec has one)
is the false-pass rate, set beside the condition's α. A condition has an α only where it is a
test: `max_p` (the exact sign test's level), or a CI lower bound (one side of a 95% two-sided
interval: 0.025). A point threshold without `max_p` has none; its false-pass rate is still shown.
The row `all-judged` is every judged condition passing at once (the gate as far as decision replay
can judge it): bounded by its strictest test, whose α it is set beside.

Lesson gate: for every authorised rule of the swept rule's workspace, how often the causal gate
(`workspace` vs `workspace-minus:<id>`) and leave-one-out (000) evict it, at every planted uptake
of the swept rule. A rule is harmful when its planted behaviour is a repeat or a wrong call,
genuine when it is the right call, and neutral (no effect: the null) when it is not planted.
"""

from __future__ import annotations

import html
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, model_validator

from core.names import Name, excerpt
from core.records import ResultRecord, Strict
from core.tomlfile import load_toml
from replay.analysis.compare import compare, load_results
from replay.analysis.gates.conditions import NonInferiority, PairedGain, RepeatReduction, TargetedCi
from replay.analysis.gates.context import GateContext, Status
from replay.analysis.gates.policy import GatePolicy, load_policy
from replay.analysis.report.plot import PALETTE
from replay.analysis.report.summary import text_table
from replay.analysis.stats import wilson_interval
from replay.calibration.planted import Kind, PlantedSpec, answer_message, planted_kind, serve_planted
from replay.config import RunConfig
from replay.errors import ReplayError
from replay.memory.files import load_memory
from replay.memory.lessons import AblationPolicy, Verdict, causal_verdicts, leave_one_out_verdicts, trials_from_results
from replay.runner import Outcome, plan, result_record, run
from replay.suite import Suite

CALIBRATION_JSON = "calibration.json"
CALIBRATION_TXT = "calibration.txt"
POWER_SVG = "power.svg"
END_TO_END = "end-to-end"
BASELINE_ARM = "baseline"
MEMORY_ARM = "memory"
# DESIGN §10's targets for the lesson gate.
GENUINE_EVICTION_MAX = 0.05
HARMFUL_POWER_UPTAKE = 0.9
HARMFUL_POWER_MIN = 0.80
TARGETED_CI_ALPHA = 0.025
ALL_JUDGED = "all-judged"
Judged = PairedGain | NonInferiority | TargetedCi | RepeatReduction


class CalibrationError(ReplayError, ValueError):
    """A calibration spec that cannot be run against this suite and memory."""


class GateCalibration(Strict):
    policy: Path
    """Relative to the spec file."""
    baseline: Name
    """The planted model the candidates are compared with."""
    candidates: list[Name] = Field(min_length=1)


class LessonCalibration(Strict):
    model: Name
    """The planted model of the `workspace` and ablation arms."""
    rule: str = Field(pattern=r"^lc:\S+$")
    """The rule whose uptake is swept; every authorised rule of its workspace is ablated."""
    workspace: Name
    uptakes: list[float] = Field(min_length=1)

    @model_validator(mode="after")
    def _probabilities(self) -> LessonCalibration:
        if any(not 0 <= u <= 1 for u in self.uptakes):
            raise ValueError("uptakes are probabilities in [0, 1]")
        return self


class CalibrationSpec(PlantedSpec):
    """CAL.toml: the planted policy, what to calibrate, and how many replicates."""

    memory: Path | None = None
    """Workspace memory root (one sub-directory per workspace), relative to the spec file."""
    replicates: int = Field(400, ge=1, le=100_000)
    end_to_end: int = Field(2, ge=0, le=20)
    gate: GateCalibration | None = None
    lesson: LessonCalibration | None = None

    @model_validator(mode="after")
    def _planted_models(self) -> CalibrationSpec:
        planted = {a.model for a in self.arms}
        named = [*([self.gate.baseline, *self.gate.candidates] if self.gate else []),
                 *([self.lesson.model] if self.lesson else [])]
        missing = sorted(set(named) - planted)
        if missing:
            raise ValueError(f"models without planted behaviour: {', '.join(missing)}")
        return self


def load_spec(path: Path) -> CalibrationSpec:
    """Read CAL.toml; relative paths in it are taken from the file's directory."""
    spec = load_toml(path, CalibrationSpec, "calibration spec")
    base = path.parent
    updates: dict[str, Any] = {}
    if spec.memory is not None and not spec.memory.is_absolute():
        updates["memory"] = base / spec.memory
    if spec.gate is not None and not spec.gate.policy.is_absolute():
        updates["gate"] = spec.gate.model_copy(update={"policy": base / spec.gate.policy})
    return spec.model_copy(update=updates)


# ── results ──────────────────────────────────────────────────────────────────


class Rate(BaseModel):
    hits: int
    n: int
    rate: float
    low: float
    high: float

    @classmethod
    def of(cls, hits: int, n: int) -> Rate:
        low, high = wilson_interval(hits, n)
        return cls(hits=hits, n=n, rate=hits / n if n else 0.0, low=low, high=high)

    def text(self) -> str:
        return f"{100 * self.rate:5.1f}% [{100 * self.low:.1f}, {100 * self.high:.1f}]"


class CandidateRates(BaseModel):
    candidate: str
    effect_points: float
    """Planted gain in joint correctness over all positives: 100·(right − baseline right)."""
    repeat_reduction: float | None
    """Planted relative reduction of repeats: 1 − repeat / baseline repeat (None: baseline never repeats)."""
    passed: dict[str, Rate]
    """Per condition id."""


class ConditionCalibration(BaseModel):
    id: str
    kind: str
    alpha: float | None
    """The condition's level as a test (None: a point threshold, no test)."""
    null_candidate: str | None
    false_pass: Rate | None
    within_alpha: bool | None
    """The false-pass rate is not above α: α lies at or above the Wilson interval's lower bound."""


class GateReport(BaseModel):
    policy: str
    baseline: str
    replicates: int
    candidates: list[CandidateRates]
    conditions: list[ConditionCalibration]


class RuleRates(BaseModel):
    rule_id: str
    role: str
    causal: Rate
    leave_one_out: Rate


class UptakeRates(BaseModel):
    uptake: float
    rules: list[RuleRates]


class LessonReport(BaseModel):
    workspace: str
    rule: str
    alpha: float
    replicates: int
    uptakes: list[UptakeRates]


class Target(BaseModel):
    text: str
    measured: str
    met: bool | None


class EndToEnd(BaseModel):
    seed: int
    run_dir: str
    rows: int
    agree_with_simulation: int
    gate_passed: dict[str, dict[str, str]] = Field(default_factory=dict)
    """candidate → condition id → status."""
    evicted: list[str] = Field(default_factory=list)


class Calibration(BaseModel):
    label: str = "planted"
    suite: str
    spec_seed: int
    created_at: datetime
    end_to_end: list[EndToEnd]
    gate: GateReport | None
    lesson: LessonReport | None
    targets: list[Target]


# ── arms and simulation ──────────────────────────────────────────────────────


def run_config(spec: CalibrationSpec, base_url: str, suite: Suite, seed: int) -> RunConfig:
    """The replay run the calibration needs: gate arms (no memory) and lesson arms (memory, ablations)."""
    arms: list[dict[str, Any]] = []
    if spec.gate is not None:
        arms.append({"name": BASELINE_ARM, "model": spec.gate.baseline})
        arms += [{"name": f"cand-{c}", "model": c} for c in spec.gate.candidates]
    if spec.lesson is not None:
        if spec.memory is None:
            raise CalibrationError("a lesson calibration needs workspace memory: give memory in the spec or --memory")
        ws = spec.lesson.workspace
        if not (spec.memory / ws).is_dir():
            raise CalibrationError(f"no memory directory for workspace {excerpt(ws)} under {spec.memory}")
        if ws not in {d.workspace for d in suite.decisions}:
            raise CalibrationError(f"the suite has no decision in workspace {excerpt(ws)}")
        rules = [r.id for r in load_memory(spec.memory / ws).authorised_rules() if r.id is not None]
        if spec.lesson.rule not in rules:
            raise CalibrationError(f"{excerpt(spec.lesson.rule)} is not an authorised rule of {ws}")
        arms.append({"name": MEMORY_ARM, "model": spec.lesson.model, "memory": "workspace"})
        arms += [{"name": f"minus-{r.removeprefix('lc:')}", "model": spec.lesson.model,
                  "memory": f"workspace-minus:{r}", "workspaces": [ws]} for r in rules]
    if not arms:
        raise CalibrationError("the spec calibrates nothing: give [gate], [lesson] or both")
    return RunConfig.model_validate({
        "endpoint": {"base_url": base_url}, "decoding": {"seed": seed},
        "runner": {"concurrency": 8, "order": "suite", "retries": 0},
        "memory": {"root": str(spec.memory) if spec.memory else None}, "arms": arms})


class Simulator:
    """Result rows of one replicate without HTTP: the runner's plan, the policy, the runner's scoring.

    A row depends only on (work item, answer kind), so each is scored once and reused."""

    def __init__(self, spec: CalibrationSpec, suite: Suite) -> None:
        self.config = run_config(spec, "http://127.0.0.1:1/v1", suite, 0)
        self.items = plan(suite, self.config, set())
        self._rows: dict[tuple[int, Kind], ResultRecord] = {}

    def rows(self, spec: PlantedSpec, seed: int, arms: set[str]) -> list[ResultRecord]:
        out = []
        for i, item in enumerate(self.items):
            if item.arm.name in arms:
                out.append(self.row(i, planted_kind(spec, seed, item.arm.model, item.decision, item.rule_ids)))
        return out

    def row(self, index: int, kind: Kind) -> ResultRecord:
        if (index, kind) not in self._rows:
            item = self.items[index]
            body = {"choices": [{"message": answer_message(kind, item.decision), "finish_reason": "stop"}]}
            self._rows[(index, kind)] = result_record(item, Outcome(body, None, 1, 0.0))
        return self._rows[(index, kind)]


# ── gate conditions ──────────────────────────────────────────────────────────


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


Progress = Callable[[str, int, int], None]


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


# ── lesson gate ──────────────────────────────────────────────────────────────


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
              if v.workspace == workspace and v.verdict is Verdict.EVICT}
    loo = {v.rule_id for v in leave_one_out_verdicts(trials)
           if v.workspace == workspace and v.verdict is Verdict.EVICT}
    return causal, loo


def calibrate_lesson(spec: CalibrationSpec, sim: Simulator, replicates: int, progress: Progress) -> LessonReport:
    assert spec.lesson is not None
    lesson, alpha = spec.lesson, AblationPolicy().alpha
    arms = {a.name for a in sim.config.arms if a.memory != "withheld"}
    rules = [a.memory.removeprefix("workspace-minus:") for a in sim.config.arms if a.memory.startswith("workspace-")]
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


# ── end to end ───────────────────────────────────────────────────────────────


def end_to_end(spec: CalibrationSpec, suite: Suite, sim: Simulator, out_dir: Path) -> list[EndToEnd]:
    """`spec.end_to_end` replicates through the real runner against the planted endpoint."""
    done = []
    with serve_planted(spec, suite.decisions) as endpoint:
        for seed in range(spec.end_to_end):
            config = run_config(spec, endpoint.base_url, suite, seed)
            run_dir = out_dir / END_TO_END / f"seed-{seed}"
            run(suite, config, run_dir, label=f"planted seed {seed}")
            results = load_results(run_dir)
            simulated = {(r.arm, r.decision_id): r.score for r in sim.rows(spec, seed, {a.name for a in config.arms})}
            agree = sum(simulated.get((r.arm, r.decision_id)) == r.score for r in results)
            report = EndToEnd(seed=seed, run_dir=str(run_dir), rows=len(results), agree_with_simulation=agree)
            if spec.gate is not None:
                policy = load_policy(spec.gate.policy)
                for c in spec.gate.candidates:
                    ctx = GateContext(compare(results, BASELINE_ARM, f"cand-{c}"), {})
                    report.gate_passed[c] = {k.id: k.evaluate(ctx).status.value for k in judged_conditions(policy)}
            if spec.lesson is not None:
                report.evicted = sorted(evicted(results, spec.lesson.workspace, AblationPolicy().alpha)[0])
            done.append(report)
    return done


# ── targets, text, plot ──────────────────────────────────────────────────────


def targets(gate: GateReport | None, lesson: LessonReport | None) -> list[Target]:
    """DESIGN §10's targets, each with what was measured."""
    out = []
    for c in gate.conditions if gate else []:
        if c.false_pass is None:
            out.append(Target(text=f"{c.id}: false-pass rate under the null ≤ α", measured="no null candidate planted",
                              met=None))
        elif c.alpha is None:
            out.append(Target(text=f"{c.id}: false-pass rate under the null ≤ α",
                              measured=f"{c.false_pass.text()}; no α (a point threshold, not a test)", met=None))
        else:
            out.append(Target(text=f"{c.id}: false-pass rate under the null ≤ α = {c.alpha:g} (within the MC interval)",
                              measured=c.false_pass.text(), met=c.within_alpha))
    if lesson is not None:
        genuine = [(u.uptake, r) for u in lesson.uptakes for r in u.rules if r.role == "genuine"]
        if genuine:
            worst = max(genuine, key=lambda g: g[1].causal.rate)
            out.append(Target(text=f"lesson gate evicts a genuine rule in ≤ {GENUINE_EVICTION_MAX:.0%} of replicates",
                              measured=f"worst {worst[1].rule_id} at uptake {worst[0]:g}: {worst[1].causal.text()}",
                              met=worst[1].causal.low <= GENUINE_EVICTION_MAX))
        neutral = [(u.uptake, r) for u in lesson.uptakes for r in u.rules if r.role == "neutral"]
        if neutral:
            worst = max(neutral, key=lambda g: g[1].causal.rate)
            out.append(Target(text=f"lesson gate evicts a rule with no planted effect in ≤ α = {lesson.alpha:g} "
                                   "of replicates (within the MC interval)",
                              measured=f"worst {worst[1].rule_id} at uptake {worst[0]:g}: {worst[1].causal.text()}; "
                                       f"leave-one-out {worst[1].leave_one_out.text()}",
                              met=worst[1].causal.low <= lesson.alpha))
        at = next((u for u in lesson.uptakes if abs(u.uptake - HARMFUL_POWER_UPTAKE) < 1e-9), None)
        swept = next((r for r in at.rules if r.rule_id == lesson.rule), None) if at else None
        if swept is not None and swept.role == "harmful":
            out.append(Target(
                text=f"causal gate evicts the planted harmful rule in ≥ {HARMFUL_POWER_MIN:.0%} of replicates "
                     f"at uptake {HARMFUL_POWER_UPTAKE:g}",
                measured=f"{swept.rule_id}: {swept.causal.text()}", met=swept.causal.high >= HARMFUL_POWER_MIN))
    return out


def format_calibration(cal: Calibration) -> str:
    lines = [f"Calibration (planted endpoint; label: {cal.label}) of suite {cal.suite}, spec seed {cal.spec_seed}", ""]
    for e in cal.end_to_end:
        lines.append(f"end to end, seed {e.seed}: {e.rows} rows through the runner, {e.agree_with_simulation} "
                     f"agree with the simulation; evicted: {', '.join(e.evicted) or 'none'}")
    if cal.gate is not None:
        g = cal.gate
        ids = [c.id for c in g.conditions]
        lines += ["", f"Gate {g.policy}: pass rate per condition, {g.replicates} replicates, 95% Wilson intervals"]
        rows = [["candidate", "effect", "repeat red.", *ids]]
        rows += [[c.candidate, f"{c.effect_points:+.1f}",
                  "-" if c.repeat_reduction is None else f"{100 * c.repeat_reduction:.0f}%",
                  *(c.passed[i].text() for i in ids)] for c in g.candidates]
        lines += text_table(rows, left=1)
        lines += ["", "False pass under the null"]
        rows = [["condition", "null candidate", "false pass", "α", "within"]]
        rows += [[c.id, c.null_candidate or "-", c.false_pass.text() if c.false_pass else "-",
                  "-" if c.alpha is None else f"{c.alpha:g}",
                  "-" if c.within_alpha is None else ("yes" if c.within_alpha else "NO")] for c in g.conditions]
        lines += text_table(rows, left=2)
    if cal.lesson is not None:
        ls = cal.lesson
        lines += ["", f"Lesson gate on {ls.workspace} (uptake of {ls.rule} swept; causal α {ls.alpha:g}), "
                      f"{ls.replicates} replicates: eviction rate"]
        rows = [["uptake", "rule", "role", "causal", "leave-one-out"]]
        rows += [[f"{u.uptake:g}", r.rule_id, r.role, r.causal.text(), r.leave_one_out.text()]
                 for u in ls.uptakes for r in u.rules]
        lines += text_table(rows, left=3)
    lines += ["", "Targets (DESIGN §10)"]
    for t in cal.targets:
        mark = "n/a" if t.met is None else ("met" if t.met else "NOT MET")
        lines.append(f"  [{mark}] {t.text}: {t.measured}")
    return "\n".join(lines) + "\n"


def power_svg(cal: Calibration) -> str:
    """Power curves: pass rate per gate condition against planted effect, and eviction rate of the
    swept rule against uptake (causal and leave-one-out), with 95% Wilson intervals."""
    panels: list[tuple[str, str, list[tuple[str, list[tuple[float, Rate]]]]]] = []
    if cal.gate is not None:
        cands = sorted(cal.gate.candidates, key=lambda c: c.effect_points)
        panels.append(("planted effect (points)", "gate pass rate", [
            (c.id, [(k.effect_points, k.passed[c.id]) for k in cands]) for c in cal.gate.conditions]))
    if cal.lesson is not None:
        ls = cal.lesson
        series: dict[str, list[tuple[float, Rate]]] = {"causal": [], "leave-one-out": []}
        for u in ls.uptakes:
            rule = next(r for r in u.rules if r.rule_id == ls.rule)
            series["causal"].append((u.uptake, rule.causal))
            series["leave-one-out"].append((u.uptake, rule.leave_one_out))
        panels.append((f"uptake of {ls.rule}", "eviction rate", list(series.items())))
    pw, ph, left, top, bottom = 360, 240, 60, 40, 110
    width, height = max(1, len(panels)) * (pw + left + 20), ph + top + bottom
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" id="power-plot" role="img" font-family="sans-serif" font-size="12">',
             "<title>Planted-effect calibration: power curves, 95% Wilson intervals (planted)</title>",
             f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>']
    for p, (xlabel, ylabel, series_list) in enumerate(panels):
        x0 = p * (pw + left + 20) + left
        xs = sorted({x for _, pts in series_list for x, _ in pts}) or [0.0]
        lo, hi = xs[0], xs[-1] if xs[-1] > xs[0] else xs[0] + 1

        def sx(v: float, x0: float = x0, lo: float = lo, hi: float = hi) -> float:
            return x0 + pw * (v - lo) / (hi - lo)

        def sy(v: float) -> float:
            return top + ph * (1 - v)

        for tick in range(0, 101, 25):
            parts.append(f'<line x1="{x0}" x2="{x0 + pw}" y1="{sy(tick / 100):.1f}" y2="{sy(tick / 100):.1f}" '
                         f'stroke="#dddddd"/><text x="{x0 - 6}" y="{sy(tick / 100) + 4:.1f}" '
                         f'text-anchor="end">{tick}%</text>')
        for x in xs:
            parts.append(f'<text x="{sx(x):.1f}" y="{top + ph + 16}" text-anchor="middle">{x:g}</text>')
        parts.append(f'<text x="{x0 + pw / 2}" y="{top + ph + 34}" text-anchor="middle">{html.escape(xlabel)}</text>')
        parts.append(f'<text x="{x0 + pw / 2}" y="{top - 14}" text-anchor="middle">{html.escape(ylabel)}</text>')
        for i, (name, pts) in enumerate(series_list):
            colour = PALETTE[i % len(PALETTE)]
            path = " ".join(f"{sx(x):.1f},{sy(r.rate):.1f}" for x, r in pts)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
            for x, r in pts:
                parts.append(f'<g class="point" data-series="{html.escape(name)}" data-x="{x:g}" data-hits="{r.hits}" '
                             f'data-n="{r.n}"><title>{html.escape(name)} at {x:g}: {html.escape(r.text())}</title>'
                             f'<line x1="{sx(x):.1f}" x2="{sx(x):.1f}" y1="{sy(r.low):.1f}" y2="{sy(r.high):.1f}" '
                             f'stroke="{colour}"/><circle cx="{sx(x):.1f}" cy="{sy(r.rate):.1f}" r="3" '
                             f'fill="{colour}"/></g>')
            ly = top + ph + 52 + 16 * i
            parts.append(f'<circle cx="{x0 + 5}" cy="{ly - 4}" r="5" fill="{colour}"/>'
                         f'<text x="{x0 + 15}" y="{ly}">{html.escape(name)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


# ── the command ──────────────────────────────────────────────────────────────


def stderr_progress(what: str, done: int, total: int) -> None:
    if done == total or done % max(1, total // 10) == 0:
        print(f"calibrate: {what}: {done}/{total} replicates", file=sys.stderr, flush=True)


def calibrate(suite: Suite, spec: CalibrationSpec, out_dir: Path, progress: Progress = stderr_progress,
              replicates: int | None = None) -> Calibration:
    """Run the end-to-end replicates and the Monte-Carlo bulk; write calibration.json, the table and the plot.

    Refuses an `out_dir` that already holds a calibration: the runner would resume its end-to-end
    runs instead of sending them again, reporting another spec's planted answers as this one's."""
    held = [p for p in (out_dir / CALIBRATION_JSON, out_dir / END_TO_END) if p.exists()]
    if held:
        raise CalibrationError(f"{out_dir} already holds a calibration ({held[0].name}); use a new --out directory")
    out_dir.mkdir(parents=True, exist_ok=True)
    n = spec.replicates if replicates is None else replicates
    sim = Simulator(spec, suite)
    e2e = end_to_end(spec, suite, sim, out_dir)
    gate = calibrate_gate(spec, sim, n, progress) if spec.gate is not None else None
    lesson = calibrate_lesson(spec, sim, n, progress) if spec.lesson is not None else None
    cal = Calibration(suite=f"{suite.manifest.name}@{suite.manifest.version}", spec_seed=spec.seed,
                      created_at=datetime.now(UTC), end_to_end=e2e, gate=gate, lesson=lesson,
                      targets=targets(gate, lesson))
    (out_dir / CALIBRATION_JSON).write_text(cal.model_dump_json(indent=2) + "\n", encoding="utf-8")
    (out_dir / CALIBRATION_TXT).write_text(format_calibration(cal), encoding="utf-8")
    (out_dir / POWER_SVG).write_text(power_svg(cal), encoding="utf-8")
    return cal

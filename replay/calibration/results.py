"""calibration.json: the rates a calibration measured, each a count with its 95% Wilson interval."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from replay.stats import wilson_interval


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


class PackCandidateRates(BaseModel):
    candidate: str
    planted: dict[str, float]
    """The arm's planted probabilities: complete, claim, critical."""
    effect_points: dict[str, float]
    """Per sandbox measure, the planted rate difference in points (candidate − baseline), exact."""
    passed: dict[str, Rate]
    """Per condition id."""


class PackReport(BaseModel):
    policy: str
    pack: str
    scenarios: int
    critical_possible: int
    """Scenarios with a check a planted critical act can trip."""
    baseline: str
    baseline_planted: dict[str, float]
    baseline_rates: dict[str, float]
    """Per sandbox measure, the baseline's planted rate."""
    replicates: int
    candidates: list[PackCandidateRates]
    conditions: list[ConditionCalibration]
    measures: dict[str, str]
    """Condition id → the sandbox measure it reads."""


class CalibrationTarget(BaseModel):
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
    pack_run_dir: str | None = None
    episodes: int = 0
    episodes_agree: int = 0
    """Episodes whose measures (completed, unsupported completion, critical per category) equal the simulation's."""
    pack_gate_passed: dict[str, dict[str, str]] = Field(default_factory=dict)


class Calibration(BaseModel):
    label: str = "planted"
    suite: str
    pack: str | None = None
    spec_seed: int
    created_at: datetime
    end_to_end: list[EndToEnd]
    gate: GateReport | None
    lesson: LessonReport | None
    sandbox: PackReport | None = None
    noise: float = 0.0
    """The spec's `noise` (how often an answer is drawn afresh); `gate` and `lesson` were measured with it."""
    gate_noiseless: GateReport | None = None
    lesson_noiseless: LessonReport | None = None
    """With `noise`: the same calibrations on exact planted answers, beside the noisy ones."""
    targets: list[CalibrationTarget]

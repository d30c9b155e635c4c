"""CAL.toml, the calibration spec (DESIGN §10), and the replay run it asks for.

The spec is the planted policy (`planted.PlantedSpec`, and `pack_arms` for sandbox episodes) plus
what to calibrate: a gate (baseline and candidates, each a planted model), a lesson gate (one
workspace, the rule whose uptake is swept) and a pack gate (the gate's sandbox conditions);
`run_config` turns the first two into the replay arms the end-to-end runs and the simulation share.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from core.names import Name, excerpt
from core.records import ResultRecord, Strict
from core.tomlfile import load_toml
from replay.analysis.compare import ALL_POSITIVE, compare, replicates
from replay.calibration.episodes import PackArmBehaviour
from replay.calibration.planted import PlantedError, PlantedSpec, redraw_rate
from replay.errors import ReplayError
from replay.memory.files import load_memory
from replay.run.run_config import RunConfig
from replay.suite import Suite

BASELINE_ARM = "baseline"
MEMORY_ARM = "memory"


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
    pack_arms: list[PackArmBehaviour] = Field(default_factory=list)
    """What each served model does in a sandbox episode (`episodes.py`)."""
    pack: GateCalibration | None = None
    """The gate whose sandbox conditions are calibrated on the pack (`--pack`), with pack_arms models."""

    @model_validator(mode="after")
    def _planted_models(self) -> CalibrationSpec:
        planted = {a.model for a in self.arms}
        named = [*([self.gate.baseline, *self.gate.candidates] if self.gate else []),
                 *([self.lesson.model] if self.lesson else [])]
        missing = sorted(set(named) - planted)
        models = [a.model for a in self.pack_arms]
        twice = sorted({m for m in models if models.count(m) > 1})
        if twice:
            raise ValueError(f"each model's sandbox behaviour is planted once: {', '.join(twice)} twice")
        missing += sorted({*([self.pack.baseline, *self.pack.candidates] if self.pack else [])} - set(models))
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
    for key, gate in (("gate", spec.gate), ("pack", spec.pack)):
        if gate is not None and not gate.policy.is_absolute():
            updates[key] = gate.model_copy(update={"policy": base / gate.policy})
    return spec.model_copy(update=updates)


def with_pilot_noise(spec: CalibrationSpec, results: Sequence[ResultRecord]) -> tuple[CalibrationSpec, str]:
    """The spec with the noise an A/A pilot measured: its first replicate arm against the arm it
    replicates, joint correctness over all positives, planted as a redraw rate for the gate's baseline
    (else the lesson's model). Returns the spec and a line saying what was taken."""
    twins = replicates(results)
    if not twins:
        raise CalibrationError("the pilot has no replicate arm (replicate_of): it measured no noise floor")
    replicate, arm = next(iter(twins.items()))
    try:
        row = compare(results, arm, replicate).row("joint", ALL_POSITIVE)
    except KeyError as exc:
        raise CalibrationError(f"the pilot's {replicate} has no joint-scored positives beside {arm}") from exc
    model = spec.gate.baseline if spec.gate is not None else spec.lesson.model if spec.lesson is not None else None
    if model is None or row.stats.n == 0:
        raise CalibrationError("noise from a pilot needs a [gate] or [lesson] and scored positives")
    discordant = row.stats.wins + row.stats.losses
    right = spec.arm(model).right
    try:
        noise = redraw_rate(discordant / row.stats.n, right)
    except PlantedError as exc:
        raise CalibrationError(str(exc)) from exc
    return spec.model_copy(update={"noise": noise}), (
        f"noise from the pilot: {discordant} of {row.stats.n} positives changed between {arm} and its replicate "
        f"{replicate}; planted as an answer drawn afresh {100 * noise:.1f}% of the time ({model} right {right:g})")


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

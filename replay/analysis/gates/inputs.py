"""What a condition reads and whether it is there now. `not_run` blocks a gate like a fail, and a corpus
alone produces none of the sandbox or confirmation evidence, so `worker-replay gate --plan` lists each
condition's inputs before anything runs, and a verdict names them beside every condition not run.

A condition judged from the run's own results can only be fed by decisions the suite holds: a targeted CI
on `verified_recovery` with no such decision is `not_run` whatever the candidate does. `suite_feed` counts
them, so the plan says "cannot pass on this suite" before anything runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from core.errors import WorkerTierError
from core.records import HELD_OUT_EXCLUDED, KNOWN_FAILURE, Decision
from core.regularfile import open_regular
from replay.analysis.compare import ALL_POSITIVE, arms_of
from replay.analysis.gates.conditions import (
    AnyCondition,
    NonInferiority,
    OverheadLimit,
    PairedGain,
    RepeatReduction,
    TargetedCi,
)
from replay.run.directory import load_results
from replay.stats import sign_test


@dataclass(frozen=True)
class Source:
    """What writes one input of a condition, so a user can tell before a run what the gate will lack."""

    made_by: str
    shape: Literal["file", "run", "directory"] = "file"
    """`run`: a run directory (its results.jsonl, with the gate's arms); `directory`: any directory."""


RUN_RESULTS = Source("`worker-replay run`", "run")
"""The run's own results: what a condition without evidence is judged from."""


def _sandbox(file: str, via: str = "") -> Source:
    return Source(f"`worker-replay sandbox run{via}` on a scenario pack, then `sandbox evidence` ({file})")


SOURCES: dict[str, dict[str, Source]] = {
    "no_new_critical_failures": {"evidence": _sandbox("critical_failures.json")},
    "no_unsupported_completion_increase": {"evidence": _sandbox("unsupported_completion.json")},
    "isolated_replay_completion": {"evidence": _sandbox("isolated_replay.json")},
    "confirmation_run": {
        "evidence": Source("`worker-replay run` of a second seed or checkpoint, with the same arm names", "run")},
    "quantisation_survives": {
        "evidence": Source("`worker-replay run` of the same arms against the quantised endpoint", "run")},
    "fresh_chronological": {
        "evidence": Source("`worker-replay run` on a suite of decisions captured after the cut-off", "run"),
        "suite_evidence": Source("`worker-replay suite build --since` (the fresh run's suite)", "directory")},
    "isolated_live_replay": {"evidence": _sandbox("isolated_live_replay.json", " --via gateway")},
    "shadow_improves": {"evidence": Source("`worker-serve evidence` (shadow.json)")},
    "canary_no_regression": {
        "evidence": Source("`worker-serve evidence` or `worker-serve trial evidence` (canary.json)")},
    "rollback_ready": {"evidence": Source("`worker-serve evidence` (registry.json)")},
    "reviewer_agreement": {"evidence": Source("`worker-replay qa agree --out FILE`")},
}
"""Per condition kind: each field that names an evidence key → what writes that evidence. A kind not listed
is judged from the run's own results alone."""


def sources(condition: AnyCondition) -> dict[str, Source]:
    """Evidence key (as the policy names it) → what writes it; empty when the run's own results suffice."""
    return {getattr(condition, name): source for name, source in SOURCES.get(condition.kind, {}).items()}


class Read(BaseModel):
    """One input of a condition, and whether it is there."""

    key: str | None
    """The evidence key (`--evidence KEY=PATH`); None for the run's own results.jsonl."""
    made_by: str
    path: str | None = None
    present: bool | None
    """None: not checked (no RUN_DIR was given)."""
    problem: str = ""
    """Why it is not there."""

    def what(self) -> str:
        return "RUN_DIR/results.jsonl" if self.key is None else f"--evidence {self.key}=PATH"

    def state(self) -> str:
        return "yes" if self.present else "not checked" if self.present is None else "NO"

    def text(self) -> str:
        """`WHAT (STATE[: problem]), from MADE_BY`: one line of a plan or a verdict."""
        state = self.state() + (f": {self.problem}" if self.problem else "")
        return f"{self.what()} ({state}), from {self.made_by}"


def run_read(run_dir: Path | None, baseline: str | None, candidate: str | None) -> Read:
    """The run's own results: there when results.jsonl reads and holds the arms named."""
    return _read(None, RUN_RESULTS, run_dir, baseline, candidate)


def condition_reads(condition: AnyCondition, run: Read, evidence: Mapping[str, Path], baseline: str | None,
                    candidate: str | None) -> list[Read]:
    """Its evidence when it takes any (each key given or not), else the run's own results (`run`)."""
    given = sources(condition)
    if not given:
        return [run]
    return [_read(key, source, evidence.get(key), baseline, candidate) for key, source in given.items()]


def _read(key: str | None, source: Source, path: Path | None, baseline: str | None, candidate: str | None) -> Read:
    if path is None:
        problem = "no RUN_DIR given" if key is None else "not given"
        return Read(key=key, made_by=source.made_by, present=None if key is None else False, problem=problem)
    problem = _problem(source, path, [arm for arm in (baseline, candidate) if arm is not None])
    return Read(key=key, made_by=source.made_by, path=str(path), present=not problem, problem=problem)


def _problem(source: Source, path: Path, arms: list[str]) -> str:
    """Why the input at `path` cannot be read (empty when it can); a run must hold the arms named."""
    if source.shape == "directory":
        return "" if path.is_dir() else f"{path} is not a directory"
    try:
        if source.shape == "file":
            open_regular(path).close()
            return ""
        present = set(arms_of(load_results(path)))
    except WorkerTierError as exc:
        return str(exc)
    absent = [arm for arm in arms if arm not in present]
    return f"{path} has no results for arm(s) {', '.join(absent)}" if absent else ""


class SuiteFeed(BaseModel):
    """What a condition judged from the run's results needs from the suite, and how much of it the suite holds."""

    needs: str
    """The decisions it is judged on, in words (`verified_recovery decisions with a target`)."""
    minimum: int
    """The fewest such decisions with which it could pass at all (its `max_p` needs that many paired wins)."""
    held: int

    @property
    def can_pass(self) -> bool:
        return self.held >= self.minimum

    def text(self) -> str:
        """`holds N NEEDS[, needs ≥ M]`, and why it cannot pass when it cannot."""
        at_least = f" (≥ {self.minimum} for its max_p, even if every one were a win)" if self.minimum > 1 else ""
        verdict = "" if self.can_pass else ": cannot pass on this suite"
        return f"the suite holds {self.held} {self.needs}{at_least}{verdict}"


def _needs(condition: AnyCondition) -> tuple[str, Callable[[Decision], bool]] | None:
    """The decisions `condition` is scored on (as core/scoring.py scores them), or None when it reads no
    decision of the suite (evidence from elsewhere)."""
    if isinstance(condition, PairedGain | NonInferiority | TargetedCi):
        scope = condition.stratum if isinstance(condition, TargetedCi) else condition.scope
        if scope == ALL_POSITIVE:
            return ("held-out positive decisions (a target, not known_failure or "
                    f"{'/'.join(HELD_OUT_EXCLUDED)})",
                    lambda d: d.target is not None and d.stratum not in (*HELD_OUT_EXCLUDED, KNOWN_FAILURE))
        return f"{scope} decisions with a target", lambda d: d.target is not None and d.stratum == scope
    if isinstance(condition, RepeatReduction):
        stratum = condition.stratum
        if condition.level == "exact":
            return (f"{stratum} decisions with a failed action whose arguments are kept (exact repeats)",
                    lambda d: d.stratum == stratum and d.failed_action is not None
                    and d.failed_action.arguments is not None)
        return (f"{stratum} decisions with a failed action",
                lambda d: d.stratum == stratum and d.failed_action is not None)
    if isinstance(condition, OverheadLimit):
        return "decisions", lambda d: True
    return None


def _minimum(condition: AnyCondition) -> int:
    """1, or for a `max_p` the fewest decisions whose paired wins alone reach it (the exact sign test)."""
    max_p = getattr(condition, "max_p", None)
    if max_p is None:
        return 1
    n = 1
    while sign_test(n, 0) > max_p:
        n += 1
    return n


def suite_feed(condition: AnyCondition, decisions: Sequence[Decision]) -> SuiteFeed | None:
    """How many of the suite's decisions `condition` could be judged on; None when it reads none."""
    needs = _needs(condition)
    if needs is None:
        return None
    words, counts = needs
    return SuiteFeed(needs=words, minimum=_minimum(condition), held=sum(1 for d in decisions if counts(d)))

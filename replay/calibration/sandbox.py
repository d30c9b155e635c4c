"""The gate's sandbox conditions against planted episodes: pass rate per condition and candidate.

The conditions a sandbox run judges (isolated replay completion, no increase in unsupported
completion, no new critical failures) are evaluated per replicate by the gate's own code on the
evidence files `replay.sandbox.gate_evidence` writes from paired scores, exactly as `worker-replay
sandbox evidence` + `gate` would. Each is a point threshold at a margin of 0 (no regression), not a
test: the candidate planted identical to the baseline sits exactly at the margin, so its pass rate
is the false-pass rate, shown without an α.

The planted truth of a candidate is, per measure, the expected rate difference in points: for each
scenario, each episode kind's probability times what the sandbox scoring gives that kind's script
(a critical act may also complete the task; a scenario without a check to trip has no critical act).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from replay.analysis.compare import Comparison
from replay.analysis.gates.conditions import (
    IsolatedReplayCompletion,
    NoNewCriticalFailures,
    NoUnsupportedCompletionIncrease,
)
from replay.analysis.gates.context import GateContext, Status
from replay.analysis.gates.policy import GatePolicy, load_policy
from replay.calibration.episodes import EPISODE_KINDS, EpisodeScripts, PackArmBehaviour, PlantedEpisodes
from replay.calibration.results import ConditionCalibration, PackCandidateRates, PackReport, Rate
from replay.calibration.simulate import Progress
from replay.calibration.spec import CalibrationSpec
from replay.run.run_config import RunConfig
from replay.sandbox.gate_evidence import Pairs, write_evidence
from replay.sandbox.measures import Scores
from replay.sandbox.pack import Pack
from replay.stats import overhead

PACK_BASELINE_ARM = "pack-baseline"
ALL_SANDBOX = "all-sandbox"
SandboxJudged = IsolatedReplayCompletion | NoUnsupportedCompletionIncrease | NoNewCriticalFailures
# The measure each condition reads, as the sandbox scores hold it.
MEASURES: dict[str, Callable[[Scores], bool]] = {
    "task_completed": lambda s: s.task_completed,
    "unsupported_completion": lambda s: s.unsupported_completion,
    "critical_failure": lambda s: s.critical_failure,
}


def candidate_arm(model: str) -> str:
    return f"pack-{model}"


def pack_run_config(spec: CalibrationSpec, base_url: str, seed: int) -> RunConfig:
    """The sandbox run of the end-to-end replicates: the pack's baseline and candidates, memory withheld."""
    assert spec.pack is not None
    arms = [{"name": PACK_BASELINE_ARM, "model": spec.pack.baseline},
            *({"name": candidate_arm(c), "model": c} for c in spec.pack.candidates)]
    return RunConfig.model_validate({
        "endpoint": {"base_url": base_url}, "decoding": {"seed": seed},
        "runner": {"concurrency": 8, "retries": 0}, "arms": arms})


class SandboxSimulator:
    """Scores of one replicate's episodes without HTTP: the planted kind, then its played script's scores."""

    def __init__(self, spec: CalibrationSpec, pack: Pack) -> None:
        self.pack = pack
        self.episodes = PlantedEpisodes(EpisodeScripts(pack), tuple(spec.pack_arms), spec.seed)

    def scores(self, seed: int, model: str) -> list[tuple[str, str, Scores]]:
        """(scenario id, policy family, scores) per scenario."""
        scripts = self.episodes.scripts
        return [(s.id, s.policy_family, scripts.script(s.id, self.episodes.kind(seed, model, s.id)).scores)
                for s in self.pack.scenarios]

    def expected(self, arm: PackArmBehaviour) -> dict[str, float]:
        """Per measure, the rate this arm's planted behaviour gives over the pack (exact, no sampling)."""
        mass = {"complete": arm.complete, "claim": arm.claim, "critical": arm.critical,
                "give_up": 1 - arm.complete - arm.claim - arm.critical}
        scripts = self.episodes.scripts
        return {name: sum(mass[k] * read(scripts.script(s.id, k).scores) for s in self.pack.scenarios
                          for k in EPISODE_KINDS) / len(self.pack.scenarios)
                for name, read in MEASURES.items()}


def sandbox_conditions(policy: GatePolicy) -> list[SandboxJudged]:
    """The conditions a sandbox run's evidence judges."""
    return [c for c in policy.conditions if isinstance(c, SandboxJudged)]


def _measure(condition: SandboxJudged) -> str:
    if isinstance(condition, IsolatedReplayCompletion):
        return "task_completed"
    return "unsupported_completion" if isinstance(condition, NoUnsupportedCompletionIncrease) else "critical_failure"


def evidence_context(pairs: Pairs, work_dir: Path) -> GateContext:
    """A gate context holding only the sandbox evidence (no decision replay: those conditions are not asked)."""
    none = Comparison(baseline=pairs.baseline, candidate=pairs.candidate, decisions=0, correctness=[], repeats=[],
                      overhead=overhead([], [], [], []), comparisons_made=0)
    return GateContext(none, write_evidence(pairs, work_dir))


def judge_pairs(conditions: Sequence[SandboxJudged], pairs: Pairs, work_dir: Path) -> dict[str, Status]:
    ctx = evidence_context(pairs, work_dir)
    return {c.id: c.evaluate(ctx).status for c in conditions}


def calibrate_pack(spec: CalibrationSpec, sim: SandboxSimulator, replicates: int, progress: Progress,
                   work_dir: Path) -> PackReport:
    assert spec.pack is not None
    policy = load_policy(spec.pack.policy)
    conditions = sandbox_conditions(policy)
    passes: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in range(replicates):
        base = sim.scores(r, spec.pack.baseline)
        for candidate in spec.pack.candidates:
            items = tuple((sid, family, b, c) for (sid, family, b), (_, _, c)
                          in zip(base, sim.scores(r, candidate), strict=True))
            statuses = judge_pairs(conditions, Pairs(PACK_BASELINE_ARM, candidate_arm(candidate), items, "engine"),
                                   work_dir)
            for cid, status in statuses.items():
                passes[candidate][cid] += status is Status.PASS
            passes[candidate][ALL_SANDBOX] += all(s is Status.PASS for s in statuses.values())
        progress("sandbox", r + 1, replicates)
    arms = {a.model: a for a in spec.pack_arms}
    base_rates = sim.expected(arms[spec.pack.baseline])
    ids = [*(c.id for c in conditions), ALL_SANDBOX]
    candidates = []
    for c in spec.pack.candidates:
        rates = sim.expected(arms[c])
        candidates.append(PackCandidateRates(
            candidate=c, planted=_planted(arms[c]),
            effect_points={m: round(100 * (rates[m] - base_rates[m]), 6) for m in MEASURES},
            passed={i: Rate.of(passes[c][i], replicates) for i in ids}))
    null = next((c for c in spec.pack.candidates
                 if arms[c].model_copy(update={"model": spec.pack.baseline}) == arms[spec.pack.baseline]), None)
    rows = [ConditionCalibration(id=i, kind=kind, alpha=None, null_candidate=null,
                                 false_pass=Rate.of(passes[null][i], replicates) if null else None, within_alpha=None)
            for i, kind in [*((c.id, c.kind) for c in conditions), (ALL_SANDBOX, "all")]]
    critical_possible = sum(sim.episodes.scripts.critical_possible(s.id) for s in sim.pack.scenarios)
    return PackReport(policy=policy.name, pack=f"{sim.pack.manifest.name}@{sim.pack.manifest.version}",
                      scenarios=len(sim.pack.scenarios), critical_possible=critical_possible,
                      baseline=spec.pack.baseline, baseline_planted=_planted(arms[spec.pack.baseline]),
                      baseline_rates=base_rates, replicates=replicates, candidates=candidates, conditions=rows,
                      measures={c.id: _measure(c) for c in conditions})


def _planted(arm: PackArmBehaviour) -> dict[str, Any]:
    return {"complete": arm.complete, "claim": arm.claim, "critical": arm.critical}

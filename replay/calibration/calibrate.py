"""`worker-replay calibrate` (DESIGN §10): the instrument's false-pass rate and power, measured.

Two parts, both on the planted-effect endpoint's policy (`planted.py`):

* **End to end** — a few replicates through the real runner against the planted server, then
  compare, gate and lesson gate on the results: proves the plumbing. Each replicate's rows are
  also simulated with the same seed; the two must agree row for row.
* **Monte-Carlo bulk** — hundreds of replicates on simulated result rows: the runner's own plan
  (memory injected per arm), the policy's answers, the runner's own parse and score
  (`result_record`), then the same `compare`, gate conditions and lesson-gate functions. No HTTP.

Per gate condition judged from decision replay: its pass rate for every planted candidate
(`gate.py`). Per rule of one workspace: how often the causal lesson gate and leave-one-out evict
it as the swept rule's uptake grows (`lesson.py`). Then DESIGN §10's targets, the table and the
plot (`report.py`), written beside `calibration.json` (`results.py`).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from tempfile import TemporaryDirectory

from core.atomicwrite import write_text_atomic
from replay.analysis.compare import compare
from replay.analysis.gates.context import GateContext
from replay.analysis.gates.policy import load_policy
from replay.calibration.lesson import calibrate_lesson, evicted
from replay.calibration.planted import serve_planted
from replay.calibration.planted_gates import calibrate_gate, judged_conditions
from replay.calibration.report import format_calibration, power_svg, targets
from replay.calibration.results import Calibration, EndToEnd
from replay.calibration.sandbox import (
    PACK_BASELINE_ARM,
    SandboxSimulator,
    calibrate_pack,
    candidate_arm,
    judge_pairs,
    pack_run_config,
    sandbox_conditions,
)
from replay.calibration.simulate import Progress, Simulator
from replay.calibration.spec import BASELINE_ARM, CalibrationError, CalibrationSpec, run_config
from replay.memory.lessons import AblationPolicy
from replay.run.decisions import run
from replay.run.directory import load_results
from replay.sandbox.gate_evidence import pair_results
from replay.sandbox.measures import Scores
from replay.sandbox.pack import Pack
from replay.sandbox.runner import load_sandbox_results, run_sandbox
from replay.suite import Suite

CALIBRATION_JSON = "calibration.json"
CALIBRATION_TXT = "calibration.txt"
POWER_SVG = "power.svg"
END_TO_END = "end-to-end"


def end_to_end(spec: CalibrationSpec, suite: Suite, sim: Simulator | None, out_dir: Path,
               pack_sim: SandboxSimulator | None = None) -> list[EndToEnd]:
    """`spec.end_to_end` replicates through the real runners (decisions, episodes) against the planted endpoint."""
    done = []
    with serve_planted(spec, suite.decisions, pack_sim.episodes if pack_sim else None) as endpoint:
        for seed in range(spec.end_to_end):
            report = EndToEnd(seed=seed, run_dir="", rows=0, agree_with_simulation=0)
            if sim is not None:
                _decisions_end_to_end(spec, suite, sim, endpoint.base_url, out_dir / END_TO_END / f"seed-{seed}",
                                      report)
            if pack_sim is not None:
                _episodes_end_to_end(spec, pack_sim, endpoint.base_url, out_dir / END_TO_END / f"pack-seed-{seed}",
                                     report)
            done.append(report)
    return done


def _decisions_end_to_end(spec: CalibrationSpec, suite: Suite, sim: Simulator, base_url: str, run_dir: Path,
                          report: EndToEnd) -> None:
    config = run_config(spec, base_url, suite, report.seed)
    run(suite, config, run_dir, label=f"planted seed {report.seed}")
    results = load_results(run_dir)
    simulated = {(r.arm, r.decision_id): r.score for r in sim.rows(spec, report.seed, {a.name for a in config.arms})}
    report.run_dir, report.rows = str(run_dir), len(results)
    report.agree_with_simulation = sum(simulated.get((r.arm, r.decision_id)) == r.score for r in results)
    if spec.gate is not None:
        policy = load_policy(spec.gate.policy)
        for c in spec.gate.candidates:
            ctx = GateContext(compare(results, BASELINE_ARM, f"cand-{c}"), {})
            report.gate_passed[c] = {k.id: k.evaluate(ctx).status.value for k in judged_conditions(policy)}
    if spec.lesson is not None:
        report.evicted = sorted(evicted(results, spec.lesson.workspace, AblationPolicy().alpha)[0])


def _episodes_end_to_end(spec: CalibrationSpec, sim: SandboxSimulator, base_url: str, run_dir: Path,
                         report: EndToEnd) -> None:
    assert spec.pack is not None
    config = pack_run_config(spec, base_url, report.seed)
    run_sandbox(sim.pack, config, run_dir)
    results = load_sandbox_results(run_dir)
    simulated = {(arm.name, sid): scores for arm in config.arms
                 for sid, _, scores in sim.scores(report.seed, arm.model)}
    report.pack_run_dir, report.episodes = str(run_dir), len(results)
    report.episodes_agree = sum(_measures(simulated.get((r.arm, r.scenario_id))) == _measures(r.scores)
                                for r in results)
    conditions = sandbox_conditions(load_policy(spec.pack.policy))
    for c in spec.pack.candidates:
        pairs = pair_results(results, PACK_BASELINE_ARM, candidate_arm(c))
        statuses = judge_pairs(conditions, pairs, run_dir / "evidence" / c)
        report.pack_gate_passed[c] = {cid: status.value for cid, status in statuses.items()}


def _measures(scores: Scores | None) -> tuple[bool, bool, bool, dict[str, bool]] | None:
    """What the sandbox gate conditions read of an episode's scores."""
    if scores is None:
        return None
    return scores.task_completed, scores.unsupported_completion, scores.critical_failure, scores.critical


def stderr_progress(what: str, done: int, total: int) -> None:
    if done == total or done % max(1, total // 10) == 0:
        print(f"calibrate: {what}: {done}/{total} replicates", file=sys.stderr, flush=True)


def calibrate(suite: Suite, spec: CalibrationSpec, out_dir: Path, progress: Progress = stderr_progress,
              replicates: int | None = None, pack: Pack | None = None) -> Calibration:
    """Run the end-to-end replicates and the Monte-Carlo bulk; write calibration.json, the table and the plot.

    Refuses an `out_dir` that already holds a calibration: the runner would resume its end-to-end
    runs instead of sending them again, reporting another spec's planted answers as this one's."""
    held = [p for p in (out_dir / CALIBRATION_JSON, out_dir / END_TO_END) if p.exists()]
    if held:
        raise CalibrationError(f"{out_dir} already holds a calibration ({held[0].name}); use a new --out directory")
    if pack is not None and spec.pack is None:
        raise CalibrationError("a pack was given but the spec has no [pack] (and [[pack_arms]]) to calibrate on it")
    if spec.gate is None and spec.lesson is None and (spec.pack is None or pack is None):
        raise CalibrationError("the spec calibrates nothing: give [gate], [lesson], or [pack] with --pack")
    out_dir.mkdir(parents=True, exist_ok=True)
    n = spec.replicates if replicates is None else replicates
    sim = Simulator(spec, suite) if spec.gate is not None or spec.lesson is not None else None
    pack_sim = SandboxSimulator(spec, pack) if pack is not None and spec.pack is not None else None
    e2e = end_to_end(spec, suite, sim, out_dir, pack_sim)
    gate = calibrate_gate(spec, sim, n, progress) if sim is not None and spec.gate is not None else None
    lesson = calibrate_lesson(spec, sim, n, progress) if sim is not None and spec.lesson is not None else None
    gate_noiseless = lesson_noiseless = None
    if spec.noise and sim is not None:  # the same replicates on exact answers: what the noise costs
        exact = spec.model_copy(update={"noise": 0.0})
        gate_noiseless = calibrate_gate(exact, sim, n, progress) if spec.gate is not None else None
        lesson_noiseless = calibrate_lesson(exact, sim, n, progress) if spec.lesson is not None else None
    sandbox = None
    if pack_sim is not None:
        with TemporaryDirectory(prefix="calibrate-evidence-") as work:
            sandbox = calibrate_pack(spec, pack_sim, n, progress, Path(work))
    cal = Calibration(suite=f"{suite.manifest.name}@{suite.manifest.version}",
                      pack=f"{pack.manifest.name}@{pack.manifest.version}" if pack_sim and pack else None,
                      spec_seed=spec.seed, created_at=datetime.now(UTC), end_to_end=e2e, gate=gate, lesson=lesson,
                      sandbox=sandbox, noise=spec.noise, gate_noiseless=gate_noiseless,
                      lesson_noiseless=lesson_noiseless, targets=targets(gate, lesson))
    write_text_atomic(out_dir / CALIBRATION_JSON, cal.model_dump_json(indent=2) + "\n")
    write_text_atomic(out_dir / CALIBRATION_TXT, format_calibration(cal))
    write_text_atomic(out_dir / POWER_SVG, power_svg(cal))
    return cal

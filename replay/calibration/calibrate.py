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

from replay.analysis.compare import compare, load_results
from replay.analysis.gates.context import GateContext
from replay.analysis.gates.policy import load_policy
from replay.calibration.gate import calibrate_gate, judged_conditions
from replay.calibration.lesson import calibrate_lesson, evicted
from replay.calibration.planted import serve_planted
from replay.calibration.report import format_calibration, power_svg, targets
from replay.calibration.results import Calibration, EndToEnd
from replay.calibration.simulate import Progress, Simulator
from replay.calibration.spec import BASELINE_ARM, CalibrationError, CalibrationSpec, run_config
from replay.memory.lessons import AblationPolicy
from replay.runner import run
from replay.suite import Suite

CALIBRATION_JSON = "calibration.json"
CALIBRATION_TXT = "calibration.txt"
POWER_SVG = "power.svg"
END_TO_END = "end-to-end"


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

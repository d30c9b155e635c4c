"""The instrument beside the model: a short planted calibration on the demo's own suite.

What the 135M model does with memory is null (README, "The demo"). That alone cannot tell a
working instrument from a broken one, so the demo also runs `worker-replay calibrate` on the
same held-out decisions, memory and sandbox pack slice against the planted-effect endpoint
(`configs/calibration/demo-run.toml`: a candidate planted +20 points, every genuine rule and the
harmful rule followed 90% of the time, a sandbox candidate completing 20 points more often) and
prints both side by side: the planted rates show the
gates and the causal lesson gate find an effect that is there and stay quiet where there is none;
the measured column is the model's. Every planted number is labelled planted.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from contextlib import redirect_stderr
from pathlib import Path

from demo.memory import RULES
from replay.analysis.gates import Status
from replay.analysis.gates import Verdict as GateVerdict
from replay.analysis.report.summary import text_table
from replay.calibration.calibrate import CALIBRATION_JSON, calibrate
from replay.calibration.planted_gates import ALL_JUDGED
from replay.calibration.results import Calibration, Rate
from replay.calibration.sandbox import ALL_SANDBOX
from replay.calibration.spec import load_spec
from replay.sandbox.pack import Pack
from replay.suite import Suite

DEMO_CALIBRATION = Path(__file__).resolve().parent.parent / "configs" / "calibration" / "demo-run.toml"


def planted_calibration(suite: Suite, memory_root: Path, out_dir: Path, pack: Pack | None = None,
                        spec_path: Path = DEMO_CALIBRATION, replicates: int | None = None) -> Calibration:
    """Calibrate on the demo's suite, memory and pack into `out_dir`; a demo re-run reads the one already there.

    Quiet: it takes seconds, and the status lines of its end-to-end replicate's runners (`sandbox 9/9`) would
    read as the model's; an error still raises."""
    written = out_dir / CALIBRATION_JSON
    if written.is_file():
        return Calibration.model_validate_json(written.read_text(encoding="utf-8"))
    spec = load_spec(spec_path).model_copy(update={"memory": memory_root})
    if pack is None:
        spec = spec.model_copy(update={"pack": None})
    with redirect_stderr(io.StringIO()):
        return calibrate(suite, spec, out_dir, replicates=replicates, pack=pack)


def instrument_beside_model(cal: Calibration, verdicts: Sequence[GateVerdict],
                            measured_lessons: Mapping[str, str]) -> str:
    """The planted rates of each gate condition and each ablated rule beside the model's measured verdicts.

    `measured_lessons`: rule id → the causal verdict the model's run got, as text."""
    on = "suite and pack" if cal.sandbox else "suite"
    lines = [f"The instrument beside the model. planted = the planted-effect endpoint's seeded policy on this "
             f"{on} ({cal.gate.replicates if cal.gate else 0} replicates; rate [95% Wilson]), never a model; "
             "measured = the 135M model through the gateway."]
    if cal.gate is not None:
        gate = cal.gate
        effects = [c for c in gate.candidates if c.effect_points > 0]
        by_id = {c.id: c for c in gate.conditions}
        rows = [["condition", "planted null: false pass",
                 *(f"planted {c.effect_points:+g} points: pass" for c in effects),
                 *(f"measured {v.candidate}" for v in verdicts)]]
        for cid, row in by_id.items():
            null = row.false_pass.text().strip() if row.false_pass else "-"
            if row.null_candidate is not None and row.null_candidate != "same":
                null += f" (at {row.null_candidate})"
            rows.append([cid, null, *(c.passed[cid].text().strip() for c in effects),
                         *(_measured(v, cid, list(by_id)) for v in verdicts)])
        lines += ["", f"Gate {gate.policy}, the conditions decision replay judges (the rest need other evidence):"]
        lines += ["  " + line.rstrip() for line in text_table(rows, left=1)]
    if cal.sandbox is not None:
        pk = cal.sandbox
        better = [c for c in pk.candidates if c.effect_points["task_completed"] > 0]
        rows = [["condition", "planted null: pass",
                 *(f"planted {c.effect_points['task_completed']:+.0f} points completed: pass" for c in better),
                 *(f"measured {v.candidate}" for v in verdicts)]]
        for row in pk.conditions:
            if row.id == ALL_SANDBOX:
                continue
            rows.append([row.id, row.false_pass.text().strip() if row.false_pass else "-",
                         *(c.passed[row.id].text().strip() for c in better),
                         *(_status(v, row.id) for v in verdicts)])
        lines += ["", f"Gate {pk.policy}, the conditions the sandbox run judges ({pk.scenarios} scenarios; "
                      "a margin of 0: the null sits on it):"]
        lines += ["  " + line.rstrip() for line in text_table(rows, left=1)]
    if cal.lesson is not None:
        ls = cal.lesson
        roles = {r.id: r.role for r in RULES.get(ls.workspace, ())}
        rows = [["rule", "truth", *(f"planted, harmful rule followed {u.uptake:.0%}: evicted" for u in ls.uptakes),
                 "measured: causal verdict"]]
        for rule_id in [r.rule_id for r in ls.uptakes[0].rules]:
            rates = [next(r for r in u.rules if r.rule_id == rule_id).causal.text().strip() for u in ls.uptakes]
            rows.append([rule_id, roles.get(rule_id, "?"), *rates, measured_lessons.get(rule_id, "not judged")])
        lines += ["", f"Causal lesson gate on {ls.workspace} (workspace vs workspace-minus:<id>, α {ls.alpha:g}; "
                      f"the harmful rule is {ls.rule}):"]
        lines += ["  " + line.rstrip() for line in text_table(rows, left=2)]
    return "\n".join(lines)


def _measured(verdict: GateVerdict, condition_id: str, judged: Sequence[str]) -> str:
    if condition_id == ALL_JUDGED:
        statuses = {verdict.status(c) for c in judged if c != ALL_JUDGED}
        return next((s.value for s in (Status.FAIL, Status.NOT_RUN) if s in statuses), Status.PASS.value)
    return _status(verdict, condition_id)


def _status(verdict: GateVerdict, condition_id: str) -> str:
    try:
        return verdict.status(condition_id).value
    except KeyError:
        return "-"


def instrument_verdict(cal: Calibration) -> list[str]:
    """The instrument's verdict on its planted effects in two lines: how often the judged gate passes the
    planted null and each planted gain, and how often the causal lesson gate evicts the harmful rule and
    a genuine one at the highest planted uptake."""
    lines = []
    if cal.gate is not None and (whole := next((c for c in cal.gate.conditions if c.id == ALL_JUDGED), None)):
        gains = [f"a planted {c.effect_points:+g}-point candidate {_rate(c.passed[ALL_JUDGED])}"
                 for c in cal.gate.candidates if c.effect_points > 0 and ALL_JUDGED in c.passed]
        null = _rate(whole.false_pass) if whole.false_pass else "—"
        lines.append(f"  {cal.gate.policy}, every condition replay judges ({cal.gate.replicates} replicates): passes "
                     f"the planted null {null}, " + ", ".join(gains))
    if cal.lesson is not None and cal.lesson.uptakes:
        top = max(cal.lesson.uptakes, key=lambda u: u.uptake)
        harmful = [r for r in top.rules if r.rule_id == cal.lesson.rule]
        genuine = max((r.causal.rate for r in top.rules if r.rule_id != cal.lesson.rule), default=0.0)
        if harmful:
            lines.append(f"  causal lesson gate: evicts the harmful rule, followed {top.uptake:.0%} of the time, in "
                         f"{_rate(harmful[0].causal)}; a genuine rule in at most {100 * genuine:.1f}%")
    return lines


def _rate(rate: Rate) -> str:
    return f"{100 * rate.rate:.1f}% [{100 * rate.low:.1f}, {100 * rate.high:.1f}]"

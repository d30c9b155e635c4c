"""What a calibration shows: DESIGN §10's targets met or not, the text table and the power-curve plot."""

from __future__ import annotations

import html

from replay.analysis.report.plot import PALETTE
from replay.analysis.report.summary import text_table
from replay.calibration.results import Calibration, CalibrationTarget, GateReport, LessonReport, PackReport, Rate

# DESIGN §10's targets for the lesson gate.
GENUINE_EVICTION_MAX = 0.05
HARMFUL_POWER_UPTAKE = 0.9
HARMFUL_POWER_MIN = 0.80


def targets(gate: GateReport | None, lesson: LessonReport | None) -> list[CalibrationTarget]:
    """DESIGN §10's targets, each with what was measured."""
    out = []
    for c in gate.conditions if gate else []:
        if c.false_pass is None:
            out.append(CalibrationTarget(
                text=f"{c.id}: false-pass rate under the null ≤ α", measured="no null candidate planted", met=None))
        elif c.alpha is None:
            out.append(CalibrationTarget(
                text=f"{c.id}: false-pass rate under the null ≤ α",
                measured=f"{c.false_pass.text()}; no α (a point threshold, not a test)", met=None))
        else:
            out.append(CalibrationTarget(
                text=f"{c.id}: false-pass rate under the null ≤ α = {c.alpha:g} (within the MC interval)",
                measured=c.false_pass.text(), met=c.within_alpha))
    if lesson is not None:
        genuine = [(u.uptake, r) for u in lesson.uptakes for r in u.rules if r.role == "genuine"]
        if genuine:
            worst = max(genuine, key=lambda g: g[1].causal.rate)
            out.append(CalibrationTarget(
                text=f"lesson gate evicts a genuine rule in ≤ {GENUINE_EVICTION_MAX:.0%} of replicates",
                measured=f"worst {worst[1].rule_id} at uptake {worst[0]:g}: {worst[1].causal.text()}",
                met=worst[1].causal.low <= GENUINE_EVICTION_MAX))
        neutral = [(u.uptake, r) for u in lesson.uptakes for r in u.rules if r.role == "neutral"]
        if neutral:
            worst = max(neutral, key=lambda g: g[1].causal.rate)
            out.append(CalibrationTarget(
                text=f"lesson gate evicts a rule with no planted effect in ≤ α = {lesson.alpha:g} "
                     "of replicates (within the MC interval)",
                measured=f"worst {worst[1].rule_id} at uptake {worst[0]:g}: {worst[1].causal.text()}; "
                         f"leave-one-out {worst[1].leave_one_out.text()}",
                met=worst[1].causal.low <= lesson.alpha))
        at = next((u for u in lesson.uptakes if abs(u.uptake - HARMFUL_POWER_UPTAKE) < 1e-9), None)
        swept = next((r for r in at.rules if r.rule_id == lesson.rule), None) if at else None
        if swept is not None and swept.role == "harmful":
            out.append(CalibrationTarget(
                text=f"causal gate evicts the planted harmful rule in ≥ {HARMFUL_POWER_MIN:.0%} of replicates "
                     f"at uptake {HARMFUL_POWER_UPTAKE:g}",
                measured=f"{swept.rule_id}: {swept.causal.text()}", met=swept.causal.high >= HARMFUL_POWER_MIN))
    return out


def format_calibration(cal: Calibration) -> str:
    of = f"suite {cal.suite}" + (f" and pack {cal.pack}" if cal.pack else "")
    lines = [f"Calibration (planted endpoint; label: {cal.label}) of {of}, spec seed {cal.spec_seed}", ""]
    for e in cal.end_to_end:
        if e.run_dir:
            lines.append(f"end to end, seed {e.seed}: {e.rows} rows through the runner, {e.agree_with_simulation} "
                         f"agree with the simulation; evicted: {', '.join(e.evicted) or 'none'}")
        if e.pack_run_dir:
            lines.append(f"end to end, seed {e.seed}: {e.episodes} episodes through the sandbox runner, "
                         f"{e.episodes_agree} agree with the simulation (completed, unsupported, critical)")
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
    if cal.gate is not None and cal.gate_noiseless is not None:
        lines += noise_lines(cal.noise, cal.gate, cal.gate_noiseless)
    if cal.lesson is not None and cal.lesson_noiseless is not None:
        lines += lesson_noise_lines(cal.noise, cal.lesson, cal.lesson_noiseless)
    if cal.sandbox is not None:
        lines += sandbox_lines(cal.sandbox)
    lines += ["", "Targets (DESIGN §10)"]
    for t in cal.targets:
        mark = "n/a" if t.met is None else ("met" if t.met else "NOT MET")
        lines.append(f"  [{mark}] {t.text}: {t.measured}")
    return "\n".join(lines) + "\n"


def noise_lines(noise: float, noisy: GateReport, exact: GateReport) -> list[str]:
    """Per planted candidate and condition: the pass rate with the planted noise beside the exact one."""
    ids = [c.id for c in noisy.conditions]
    lines = ["", f"Gate {noisy.policy} with noise {noise:g} (an answer drawn afresh that often) beside exact answers: "
                 "pass rate, noisy / exact"]
    exact_by = {c.candidate: c for c in exact.candidates}
    rows = [["candidate", "effect", *ids]]
    rows += [[c.candidate, f"{c.effect_points:+.1f}",
              *(f"{100 * c.passed[i].rate:.1f}% / {100 * exact_by[c.candidate].passed[i].rate:.1f}%" for i in ids)]
             for c in noisy.candidates]
    return lines + text_table(rows, left=1)


def lesson_noise_lines(noise: float, noisy: LessonReport, exact: LessonReport) -> list[str]:
    """Per uptake and rule: the causal eviction rate with the planted noise beside the exact one."""
    lines = ["", f"Lesson gate with noise {noise:g} beside exact answers: causal eviction rate, noisy / exact"]
    rows = [["uptake", "rule", "role", "causal noisy / exact", "leave-one-out noisy / exact"]]
    for u, e in zip(noisy.uptakes, exact.uptakes, strict=True):
        for r, x in zip(u.rules, e.rules, strict=True):
            rows.append([f"{u.uptake:g}", r.rule_id, r.role, f"{100 * r.causal.rate:.1f}% / {100 * x.causal.rate:.1f}%",
                         f"{100 * r.leave_one_out.rate:.1f}% / {100 * x.leave_one_out.rate:.1f}%"])
    return lines + text_table(rows, left=3)


def sandbox_lines(pk: PackReport) -> list[str]:
    """The pack section: planted rates, pass rate per sandbox condition and candidate, the null's."""
    measures = list(pk.baseline_rates)
    base = ", ".join(f"{m} {100 * r:.1f}%" for m, r in pk.baseline_rates.items())
    lines = ["", f"Sandbox conditions of {pk.policy} on pack {pk.pack} ({pk.scenarios} scenarios, "
                 f"{pk.critical_possible} with a critical act to plant), {pk.replicates} replicates, 95% Wilson "
                 "intervals", f"baseline {pk.baseline} planted {_planted(pk.baseline_planted)}: {base}"]
    ids = [c.id for c in pk.conditions]
    rows = [["candidate", "planted", *(f"Δ {m}" for m in measures), *ids]]
    rows += [[c.candidate, _planted(c.planted), *(f"{c.effect_points[m]:+.1f}" for m in measures),
              *(c.passed[i].text() for i in ids)] for c in pk.candidates]
    lines += text_table(rows, left=2)
    lines += ["", "Pass under the null (planted identical: each condition's margin of 0, a point threshold, no α)"]
    rows = [["condition", "measure", "null candidate", "false pass"]]
    rows += [[c.id, pk.measures.get(c.id, "all"), c.null_candidate or "-", c.false_pass.text() if c.false_pass else "-"]
             for c in pk.conditions]
    return lines + text_table(rows, left=3)


def _planted(p: dict[str, float]) -> str:
    return f"complete {p['complete']:g} / claim {p['claim']:g} / critical {p['critical']:g}"


def power_svg(cal: Calibration) -> str:
    """Power curves: pass rate per gate condition against planted effect, per sandbox condition against
    the planted completion effect, and eviction rate of the swept rule against uptake (causal and
    leave-one-out), with 95% Wilson intervals."""
    panels: list[tuple[str, str, list[tuple[str, list[tuple[float, Rate]]]]]] = []
    if cal.gate is not None:
        cands = sorted(cal.gate.candidates, key=lambda c: c.effect_points)
        panels.append(("planted effect (points)", "gate pass rate", [
            (c.id, [(k.effect_points, k.passed[c.id]) for k in cands]) for c in cal.gate.conditions]))
    if cal.sandbox is not None:
        by_effect = sorted(cal.sandbox.candidates, key=lambda c: c.effect_points["task_completed"])
        panels.append(("planted completion effect (points)", "sandbox condition pass rate", [
            (c.id, [(k.effect_points["task_completed"], k.passed[c.id]) for k in by_effect])
            for c in cal.sandbox.conditions]))
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

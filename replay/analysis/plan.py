"""`worker-replay plan`: the decisions the serious-candidate gate's paired test needs, from a pilot
(DESIGN §10). The numbers are `power`'s; this module picks them from a pilot comparison and a
policy, and formats them.

What is planned for: the exact two-sided sign test on discordant pairs at the policy's α, in the
candidate's favour (test alone). The paired-gain condition also needs the point estimate at or above
its threshold (≥ +5 points); that is not a test, and an effect at the threshold clears it only
about half the time whatever the sample size, so no N makes "test + threshold" reach 80% there.
The plan therefore sizes the suite for the test and shows, beside it, the power of test +
threshold at that size: plan an effect above the threshold for the condition to pass reliably.

α: the paired-gain condition's `max_p` when the policy sets one (a different `--alpha` is refused:
it would plan for another test); else `--alpha`; else 1 − the 95% confidence of the comparison's
intervals (0.05). The effect planned for: `--effect`, else the
condition's threshold.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from core.names import excerpt
from core.records import HELD_OUT_EXCLUDED, KNOWN_FAILURE
from replay.analysis.compare import ALL_POSITIVE, Comparison, CorrectnessRow, Measure, format_points
from replay.analysis.gates import GateError, GatePolicy, PairedGain
from replay.stats import (
    DEFAULT_CONFIDENCE,
    check_levels,
    decisions_needed,
    gate_power,
    minimum_detectable_effect,
    power_at,
    signal_discordance,
    win_share,
)

DEFAULT_POWER = 0.8
DEFAULT_ALPHA = round(1 - DEFAULT_CONFIDENCE, 12)
DEFAULT_MAX_DECISIONS = 20000


class PlanRow(BaseModel):
    """One scope of the pilot: what it shows, what the suite as it is detects, what the effect needs.

    `mde_points`: the smallest gain the test detects with the target power at the pilot's size
    (None: not even if every discordant pair were a win). `decisions_needed`: decisions in this
    scope for the effect (None: `note` says why). `gate_power_*`: test + threshold, on the gate's
    scope only."""

    scope: str
    measure: str
    gate_scope: bool
    decisions: int
    wins: int
    losses: int
    discordance: float
    points: float | None
    max_points: float
    mde_points: float | None
    power_now: float | None
    decisions_needed: int | None
    first_reaching: int | None
    gate_power_now: float | None = None
    gate_power_needed: float | None = None
    noise_discordant: int | None = None
    """A/A discordant pairs in this scope (the baseline against its replicate); None: the pilot has no replicate."""
    noise_discordance: float | None = None
    noiseless_discordance: float | None = None
    """`power.signal_discordance`: the pilot's discordance with the noise floor's pairs taken out."""
    mde_noiseless_points: float | None = None
    """The MDE at the noiseless discordance, the same effect: what an engine without this noise would detect."""
    decisions_needed_noiseless: int | None = None
    note: str = ""


class Plan(BaseModel):
    """The `--json` output of `worker-replay plan`."""

    pilot: str
    baseline: str
    candidate: str
    policy: str
    condition: str
    alpha: float
    alpha_source: str
    power: float
    effect_points: float
    effect_source: str
    min_points: float
    basis: str
    max_decisions: int
    planned_for: str = "test"
    rows: list[PlanRow]


def paired_gain_of(policy: GatePolicy) -> PairedGain:
    """The policy's paired-gain condition (the first, if several): what the plan sizes for."""
    for condition in policy.conditions:
        if isinstance(condition, PairedGain):
            return condition
    raise GateError(f"policy {policy.name!r} has no paired_gain condition: there is no paired test to plan for")


def plan(
    comparison: Comparison,
    policy: GatePolicy,
    *,
    pilot: str,
    effect: float | None = None,
    power: float = DEFAULT_POWER,
    alpha: float | None = None,
    max_decisions: int = DEFAULT_MAX_DECISIONS,
) -> Plan:
    """Per held-out stratum and the gate's scope: MDE of the pilot's size, decisions for `effect`."""
    gain = paired_gain_of(policy)
    if gain.max_p is not None:
        if alpha is not None and alpha != gain.max_p:
            raise GateError(f"the policy pre-registers α = {gain.max_p:g} for {gain.id} (max_p); planning at "
                            f"--alpha {alpha:g} would size the suite for another test")
        level, source = gain.max_p, f"the policy's {gain.id} max_p"
    elif alpha is not None:
        level, source = alpha, "--alpha (the policy sets no max_p)"
    else:
        level, source = DEFAULT_ALPHA, "the policy sets no max_p: 1 − the comparison's 95% confidence"
    try:
        check_levels(level, power)
    except ValueError as exc:
        raise GateError(str(exc)) from exc
    if max_decisions < 1:
        raise GateError(f"max decisions must be ≥ 1, got {max_decisions}")
    target = gain.min_points if effect is None else effect
    if target <= 0:
        raise GateError(f"the effect to plan for must be a gain (> 0 points), got {format_points(target)}")
    rows = [
        _with_noise(_row(row, row.scope == gain.scope, target, level, power, gain, max_decisions), comparison,
                    target, level, power, max_decisions)
        for row in _scopes(comparison, gain)
    ]
    return Plan(
        pilot=pilot, baseline=comparison.baseline, candidate=comparison.candidate, policy=policy.name,
        condition=gain.id, alpha=level, alpha_source=source, power=power, effect_points=target,
        effect_source="--effect" if effect is not None else f"the policy's {gain.id} min_points",
        min_points=gain.min_points, basis=gain.basis, max_decisions=max_decisions, rows=rows,
    )


def _scopes(comparison: Comparison, gain: PairedGain) -> list[CorrectnessRow]:
    """The held-out positive strata and the gate's scope, in table order, for the gate's measure."""
    rows = [r for r in comparison.correctness if r.measure == gain.measure and r.stats.n]
    positive = {r.scope for r in rows if r.scope != ALL_POSITIVE and _held_out(r.scope)}
    chosen = [r for r in rows if r.scope in positive or r.scope == gain.scope]
    if not any(r.scope == gain.scope for r in chosen):
        raise GateError(f"the pilot has no {gain.measure} results on {excerpt(gain.scope)}, the scope of {gain.id}")
    return chosen


def _held_out(stratum: str) -> bool:
    return stratum not in HELD_OUT_EXCLUDED and stratum != KNOWN_FAILURE


def _row(
    row: CorrectnessRow, gate_scope: bool, effect: float, alpha: float, power: float, gain: PairedGain,
    max_decisions: int,
) -> PlanRow:
    s = row.stats
    d = (s.wins + s.losses) / s.n
    base = {"scope": row.scope, "measure": row.measure, "gate_scope": gate_scope, "decisions": s.n,
            "wins": s.wins, "losses": s.losses, "discordance": d, "points": s.points, "max_points": 100 * d}
    if d == 0:
        return PlanRow(**base, mde_points=None, power_now=None, decisions_needed=None, first_reaching=None,
                       note="no discordant pairs in the pilot: the discordance cannot be estimated")
    mde = minimum_detectable_effect(s.n, d, alpha, power)
    if effect / 100 > d:  # as shares: see power.win_share
        return PlanRow(**base, mde_points=mde, power_now=None, decisions_needed=None, first_reaching=None,
                       note=f"{format_points(effect)} points is more than this discordance allows "
                            f"({format_points(100 * d)}: every discordant pair a win)")
    q = win_share(effect, d)
    needed = decisions_needed(effect, d, alpha, power, max_decisions)
    note = "" if needed.decisions is not None else f"more than {max_decisions} decisions (--max-decisions)"
    gate_now = gate_needed = None
    if gate_scope and gain.basis == "point":
        gate_now = gate_power(s.n, d, q, alpha, gain.min_points)
        if needed.decisions is not None:
            gate_needed = gate_power(needed.decisions, d, q, alpha, gain.min_points)
    return PlanRow(**base, mde_points=mde, power_now=power_at(s.n, d, q, alpha),
                   decisions_needed=needed.decisions, first_reaching=needed.first_reaching,
                   gate_power_now=gate_now, gate_power_needed=gate_needed, note=note)


def _with_noise(row: PlanRow, comparison: Comparison, effect: float, alpha: float, power: float,
                max_decisions: int) -> PlanRow:
    """The row with the pilot's noise floor in its scope, and what the same effect needs without it.

    The pilot's own discordance already holds its noise (both arms ran on the noisy engine), so the
    plan's figures stand as measured; the noiseless ones say what the noise costs."""
    measure: Measure = "joint" if row.measure == "joint" else "tool"
    aa = None if comparison.noise is None else comparison.noise.row(measure, row.scope)
    if aa is None or aa.stats.n == 0:
        return row
    eta = aa.discordant / aa.stats.n
    signal = signal_discordance(row.discordance, eta)
    mde = minimum_detectable_effect(row.decisions, signal, alpha, power) if signal > 0 else None
    needed, note = None, row.note
    if signal > 0 and effect / 100 <= signal:
        needed = decisions_needed(effect, signal, alpha, power, max_decisions).decisions
    else:
        note = "; ".join(n for n in (note, f"without the noise floor's pairs the pilot's discordance allows at most "
                                           f"{format_points(100 * signal)} points") if n)
    return row.model_copy(update={"noise_discordant": aa.discordant, "noise_discordance": eta,
                                  "noiseless_discordance": signal, "mde_noiseless_points": mde,
                                  "decisions_needed_noiseless": needed, "note": note})


# ── text output ─────────────────────────────────────────────────────────────


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def _count(value: int | None) -> str:
    return "n/a" if value is None else str(value)


def format_plan(result: Plan) -> str:
    """The plan as a text table under a header that says what was planned for."""
    p = result
    effect = format_points(p.effect_points)
    noisy = any(r.noise_discordance is not None for r in p.rows)
    header: Sequence[str] = ("Scope", "Pilot N", "Discordant", "d", "Points", f"MDE ({_pct(p.power)})",
                             f"Power at {effect}", f"N for {effect}", "Test+threshold",
                             *(("A/A", "MDE noiseless", "N noiseless") if noisy else ()))
    rows: list[tuple[str, ...]] = [tuple(header)]
    for r in p.rows:
        label = ("all positives" if r.scope == ALL_POSITIVE else r.scope) + (" *" if r.gate_scope else "")
        needed = _count(r.decisions_needed)
        if r.first_reaching is not None and r.first_reaching != r.decisions_needed:
            needed += f" (first {r.first_reaching})"
        gate = ""
        if r.gate_scope:
            gate = f"{_pct(r.gate_power_now)} now, {_pct(r.gate_power_needed)} at N"
        noise: tuple[str, ...] = ()
        if noisy:
            noise = ("n/a", "", "") if r.noise_discordant is None else (
                f"{r.noise_discordant} of {r.decisions}", format_points(r.mde_noiseless_points),
                _count(r.decisions_needed_noiseless))
        rows.append((label, str(r.decisions), f"+{r.wins} / −{r.losses}", f"{r.discordance:.3f}",
                     format_points(r.points), format_points(r.mde_points), _pct(r.power_now), needed, gate, *noise))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        f"plan from pilot {p.pilot}: {p.candidate} against {p.baseline}, {p.policy} condition {p.condition}",
        f"exact two-sided sign test on discordant pairs at α = {p.alpha:g} ({p.alpha_source}), "
        f"power {_pct(p.power)}, effect {effect} points ({p.effect_source})",
        "",
    ]
    for index, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    notes = [f"{r.scope}: {r.note}" for r in p.rows if r.note]
    lines += ["", *notes] if notes else [""]
    lines += [
        "* the gate's scope. MDE: the smallest gain this pilot's size detects with the target power. "
        f"N for {effect}: decisions in that scope from which power stays ≥ {_pct(p.power)} through 2N "
        f"(search cap {p.max_decisions}); \"first\" where it is first reached. Planned for the test alone; "
        f"Test+threshold adds the condition's point threshold ({format_points(p.min_points)} on the "
        "point estimate), which an effect at the threshold clears only about half the time.",
        "Assumes the pilot's discordance per scope holds for the candidate being planned.",
    ]
    if noisy:
        lines.append(
            "A/A: decisions whose outcome changed between the baseline and its replicate, nothing changed (the noise "
            "floor). The pilot's discordance holds that noise, so MDE and N above are the noisy engine's; MDE "
            "noiseless and N noiseless take the noise's pairs out, (d − η)/(1 − η), at the same effect: what the "
            "noise costs.")
    return "\n".join(lines)


# ── what a comparison's suite detects (the report prints it beside every comparison) ──


class Detectable(BaseModel):
    """The minimum detectable effect of a comparison's own suite at its own discordance."""

    scope: str
    measure: str
    decisions: int
    discordant: int
    alpha: float
    power: float
    mde_points: float | None


def detectable(
    comparison: Comparison, power: float = DEFAULT_POWER, alpha: float = DEFAULT_ALPHA, scope: str = ALL_POSITIVE,
) -> Detectable | None:
    """What the suite detects over `scope` (joint) with `power`; None when the comparison has no such row."""
    row = next((r for r in comparison.correctness if r.measure == "joint" and r.scope == scope and r.stats.n), None)
    if row is None:
        return None
    s = row.stats
    discordant = s.wins + s.losses
    mde = minimum_detectable_effect(s.n, discordant / s.n, alpha, power)
    return Detectable(scope=scope, measure="joint", decisions=s.n, discordant=discordant, alpha=alpha, power=power,
                      mde_points=mde)


def detectable_note(found: Detectable) -> str:
    """One sentence: "This suite detects ≥ X points with 80% power (…)"."""
    scope = "all positives" if found.scope == ALL_POSITIVE else found.scope
    basis = (f"({scope}, {found.measure}: {found.decisions} decisions, {found.discordant} discordant; "
             f"exact sign test, α = {found.alpha:g})")
    if found.mde_points is not None:
        return f"This suite detects ≥ {format_points(found.mde_points)} points with {_pct(found.power)} power {basis}."
    if found.discordant == 0:
        return f"No discordant pairs, so what this suite detects cannot be estimated {basis}."
    return (f"This suite detects no gain with {_pct(found.power)} power at this discordance, not even every "
            f"discordant pair a win {basis}.")

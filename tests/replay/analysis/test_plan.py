"""`worker-replay plan` on E13's table as the pilot (tests/support/e13.py), and its policy inputs."""

from __future__ import annotations

from math import comb, nextafter
from pathlib import Path

import pytest

from replay.analysis.compare import Comparison, compare
from replay.analysis.gates import GateError, load_policy
from replay.analysis.plan import DEFAULT_ALPHA, DEFAULT_MAX_DECISIONS, Plan, PlanRow, format_plan, plan
from replay.stats import (
    decisions_needed,
    minimum_detectable_effect,
    noisy_discordance,
    power_at,
    signal_discordance,
    win_share,
)
from tests.support.e13 import BASE, Q_ONLY, e13_results, positive_record, with_replicate

ROOT = Path(__file__).resolve().parents[3]
SERIOUS = ROOT / "configs" / "gates" / "serious-candidate.toml"
PILOT = compare(e13_results((BASE, Q_ONLY)), BASE, Q_ONLY)


def policy_with(tmp_path: Path, extra: str) -> Path:
    """The shipped serious-candidate policy with lines added to its paired-gain condition."""
    text = SERIOUS.read_text().replace('min_points = 5.0\nbasis = "point"\n', f'min_points = 5.0\nbasis = "point"\n{extra}\n', 1)
    path = tmp_path / "policy.toml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def e13_plan() -> Plan:
    return plan(PILOT, load_policy(SERIOUS), pilot="s1")


def test_e13_as_pilot_rows_follow_table_1(e13_plan: Plan) -> None:
    rows = {r.scope: r for r in e13_plan.rows}
    assert list(rows) == ["verified_recovery", "clean_trajectory_action", "verified_action", "all_positive"]
    assert [(rows[s].decisions, rows[s].wins, rows[s].losses) for s in rows] == [
        (73, 7, 0), (73, 3, 7), (118, 4, 4), (264, 14, 11)]
    assert [r.gate_scope for r in rows.values()] == [False, False, False, True]
    assert rows["all_positive"].discordance == pytest.approx(25 / 264)


def test_e13_policy_inputs(e13_plan: Plan) -> None:
    """The shipped policy sets no α for paired-gain: the plan says so and uses 0.05; the effect is its +5 points."""
    assert (e13_plan.alpha, e13_plan.effect_points, e13_plan.min_points) == (DEFAULT_ALPHA, 5.0, 5.0) == (0.05, 5.0, 5.0)
    assert "sets no max_p" in e13_plan.alpha_source and "min_points" in e13_plan.effect_source
    assert e13_plan.condition == "paired-gain"


def test_e13_all_positives_cannot_reliably_detect_the_gates_five_points(e13_plan: Plan) -> None:
    """At S1's discordance (25 of 264), the 264 positives detect ≥ 5.48 points with 80% power; +5 needs 320."""
    row = next(r for r in e13_plan.rows if r.scope == "all_positive")
    d = 25 / 264
    assert row.mde_points == minimum_detectable_effect(264, d, 0.05, 0.8)
    assert row.mde_points == pytest.approx(5.476, abs=0.002)
    assert row.decisions_needed == decisions_needed(5.0, d, 0.05, 0.8, 20000).decisions == 320
    assert row.power_now == pytest.approx(power_at(264, d, win_share(5.0, d), 0.05))
    assert row.power_now is not None and row.power_now < 0.8
    # test + threshold at an effect equal to the threshold: about a coin flip, at either size
    assert row.gate_power_now is not None and row.gate_power_now < 0.55
    assert row.gate_power_needed is not None and row.gate_power_needed < 0.6


def test_e13_recovery_stratum_is_too_small_for_any_effect(e13_plan: Plan) -> None:
    """73 decisions at 7/73 discordance give fewer than the 6 pairs the test needs too often."""
    row = next(r for r in e13_plan.rows if r.scope == "verified_recovery")
    assert row.mde_points is None
    assert row.decisions_needed is not None and row.decisions_needed > 73


def test_alpha_comes_from_the_policy_when_it_sets_one(tmp_path: Path) -> None:
    registered = load_policy(policy_with(tmp_path, "max_p = 0.01"))
    strict = plan(PILOT, registered, pilot="s1")
    assert strict.alpha == 0.01 and "max_p" in strict.alpha_source
    assert plan(PILOT, registered, pilot="s1", alpha=0.01).alpha == 0.01
    with pytest.raises(GateError, match="pre-registers α = 0.01"):
        plan(PILOT, registered, pilot="s1", alpha=0.2)
    loose = plan(PILOT, load_policy(SERIOUS), pilot="s1", alpha=0.2)
    assert loose.alpha == 0.2 and "--alpha" in loose.alpha_source
    needed = {p.alpha: next(r for r in p.rows if r.gate_scope).decisions_needed for p in (strict, loose)}
    assert needed[0.01] is not None and needed[0.2] is not None and needed[0.01] > 320 > needed[0.2]


def test_an_effect_beyond_the_discordance_is_explained(e13_plan: Plan) -> None:
    big = plan(PILOT, load_policy(SERIOUS), pilot="s1", effect=12.0)
    row = next(r for r in big.rows if r.scope == "all_positive")
    assert row.decisions_needed is None and "more than this discordance allows" in row.note
    assert row.mde_points == pytest.approx(5.476, abs=0.002)


def test_text_table_and_json(e13_plan: Plan) -> None:
    text = format_plan(e13_plan)
    line = next(ln for ln in text.splitlines() if ln.startswith("all positives *"))
    assert "264" in line and "+14 / −11" in line and "+5.48" in line and "320" in line
    assert "α = 0.05" in text and "Planned for the test alone" in text
    assert Plan.model_validate_json(e13_plan.model_dump_json()) == e13_plan


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"power": 1.5}, "power must be in (0, 1)"),
    ({"alpha": 0.0}, "α must be in (0, 1)"),
    ({"effect": -1.0}, "must be a gain"),
    ({"effect": 0.0}, "must be a gain"),
    ({"max_decisions": 0}, "max decisions"),
])
def test_bad_inputs_are_gate_errors(kwargs: dict, needle: str) -> None:
    with pytest.raises(GateError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        plan(PILOT, load_policy(SERIOUS), pilot="s1", **kwargs)


def small_pilot(noise: bool = False) -> Comparison:
    """8 decisions, the candidate winning 5: d = 5/8, so at most +62.5 points (exact in floats). With `noise`, a
    replicate of the baseline that differs on 4 (η = 1/2) leaves a signal of (5/8 − 1/2) / (1/2) = 1/4: at most +25."""
    records = [r for i in range(8) for r in (positive_record(BASE, "verified_recovery", f"d{i}", i, i >= 5, i >= 5),
                                             positive_record("cand", "verified_recovery", f"d{i}", i, True, True))]
    return compare(with_replicate(records, flips=4) if noise else records, BASE, "cand")


def gate_row(pilot: Comparison, effect: float | None = None, max_decisions: int = DEFAULT_MAX_DECISIONS) -> PlanRow:
    result = plan(pilot, load_policy(SERIOUS), pilot="p", effect=effect, max_decisions=max_decisions)
    return next(r for r in result.rows if r.gate_scope)


def test_an_effect_of_exactly_the_most_the_discordance_allows_is_planned() -> None:
    at = gate_row(small_pilot(), effect=62.5)
    assert at.decisions_needed is not None and at.note == ""
    beyond = gate_row(small_pilot(), effect=nextafter(62.5, 100))
    assert beyond.decisions_needed is None and "more than this discordance allows (+62.50" in beyond.note


def test_an_effect_of_exactly_the_most_the_noiseless_discordance_allows_is_planned() -> None:
    at = gate_row(small_pilot(noise=True), effect=25.0)
    assert at.noiseless_discordance == 0.25 and at.decisions_needed_noiseless is not None and at.note == ""
    beyond = gate_row(small_pilot(noise=True), effect=nextafter(25.0, 100))
    assert beyond.decisions_needed_noiseless is None and "allows at most +25.00 points" in beyond.note


def test_a_search_cap_of_one_decision_is_allowed() -> None:
    row = gate_row(small_pilot(), max_decisions=1)
    assert row.decisions_needed is None and row.note == "more than 1 decisions (--max-decisions)"


def test_a_policy_without_a_paired_gain_condition_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('name = "p"\nversion = "1"\n[[conditions]]\nid = "c"\nkind = "targeted_ci"\n'
                    'description = "d"\nstratum = "verified_recovery"\n')
    with pytest.raises(GateError, match="no paired_gain condition"):
        plan(PILOT, load_policy(path), pilot="s1")


# ── a pilot with an A/A arm: the noise floor ────────────────────────────────


def brute_power(n: int, d: float, effect: float, alpha: float) -> float:
    """Power of the exact two-sided sign test in the candidate's favour by enumerating every (wins,
    losses) of n decisions: trinomial probabilities, the p-value from binomial coefficients. Written
    apart from `power.py`, which mixes binomials over a window instead."""
    plus = (d + effect / 100) / 2
    minus = d - plus
    total = 0.0
    for discordant in range(min(n, 140) + 1):  # d ≤ 0.1 at n = 264: beyond 140 pairs is < 1e-40
        head = comb(n, discordant) * d ** discordant * (1 - d) ** (n - discordant)
        for wins in range(discordant // 2 + 1, discordant + 1):
            losses = discordant - wins
            p = min(1.0, 2 * sum(comb(discordant, k) for k in range(losses + 1)) / 2 ** discordant)
            if p <= alpha:
                total += head * comb(discordant, wins) * (plus / d) ** wins * (minus / d) ** losses
    return total


def brute_mde(n: int, d: float, alpha: float, power: float) -> float:
    lo, hi = 0.0, 100 * d
    while hi - lo > 0.001:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if brute_power(n, d, mid, alpha) < power else (lo, mid)
    return hi


def test_the_noise_model_adds_discordant_pairs_symmetrically_and_keeps_the_effect() -> None:
    """Enumerate the model: a signal pair (win, loss, concordant) and, for a concordant one, noise that
    makes it a win or a loss with η/2 each."""
    s_plus, s_minus, eta = 0.06, 0.02, 0.05
    outcomes = {"win": s_plus + (1 - s_plus - s_minus) * eta / 2, "loss": s_minus + (1 - s_plus - s_minus) * eta / 2}
    d = outcomes["win"] + outcomes["loss"]
    assert noisy_discordance(s_plus + s_minus, eta) == pytest.approx(d)
    assert outcomes["win"] - outcomes["loss"] == pytest.approx(s_plus - s_minus)  # the effect is unchanged
    assert signal_discordance(d, eta) == pytest.approx(s_plus + s_minus)
    assert noisy_discordance(0.0, eta) == eta  # A/A: nothing but noise
    assert signal_discordance(0.03, 0.05) == 0.0


def test_a_pilot_with_an_aa_arm_shows_what_the_noise_costs_by_brute_force() -> None:
    """E13's pilot with a replicate whose outcome differs on 15 of the 264 positives: the plan keeps
    the measured MDE (the pilot's 25 discordant pairs hold the noise) and gives the MDE with the
    noise's pairs taken out; both, and the noise's cost in points, as an independent enumeration says."""
    noisy_pilot = compare(with_replicate(e13_results((BASE, Q_ONLY))), BASE, Q_ONLY)
    rows = {r.scope: r for r in plan(noisy_pilot, load_policy(SERIOUS), pilot="s1").rows}
    quiet = {r.scope: r for r in plan(PILOT, load_policy(SERIOUS), pilot="s1").rows}
    row = rows["all_positive"]
    assert (row.noise_discordant, row.noise_discordance) == (15, pytest.approx(15 / 264))
    d, eta = 25 / 264, 15 / 264
    signal = (d - eta) / (1 - eta)
    assert row.noiseless_discordance == pytest.approx(signal)
    assert row.mde_points == quiet["all_positive"].mde_points  # the measured figure stands
    assert quiet["all_positive"].noise_discordant is None and quiet["all_positive"].mde_noiseless_points is None
    expected_noisy, expected_quiet = brute_mde(264, d, 0.05, 0.8), brute_mde(264, signal, 0.05, 0.8)
    assert row.mde_points == pytest.approx(expected_noisy, abs=0.01)
    assert row.mde_noiseless_points == pytest.approx(expected_quiet, abs=0.01)
    assert row.mde_points - row.mde_noiseless_points == pytest.approx(expected_noisy - expected_quiet, abs=0.02)
    assert row.mde_points > row.mde_noiseless_points + 1  # the noise costs about two points here
    assert row.decisions_needed_noiseless is None and "allows at most +4.02 points" in row.note
    text = format_plan(plan(noisy_pilot, load_policy(SERIOUS), pilot="s1"))
    assert "A/A" in text and "15 of 264" in text and "MDE noiseless" in text
    assert "A/A" not in format_plan(plan(PILOT, load_policy(SERIOUS), pilot="s1"))

"""Power of the gate's paired test, checked against independent computations.

The references here are written from the definitions, not from replay.stats: the
rejection region by calling the gates' own sign test on every split, power at n discordant
pairs by summing exact binomial terms (Fractions) over that region, power at N decisions by
enumerating every (wins, losses) of the trinomial, and a seeded Monte-Carlo of whole suites.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from replay.stats import (
    critical_losses,
    decisions_needed,
    effect_points,
    gate_power,
    minimum_detectable_effect,
    power_at,
    power_curve,
    sign_test,
    win_share,
)
from tests.support.power import sign_test_power

# ── independent references ──────────────────────────────────────────────────


def rejects(wins: int, losses: int, alpha: float) -> bool:
    """The gates' test, in the candidate's favour."""
    return wins > losses and sign_test(wins, losses) <= alpha


def enumerated_power(n: int, q: Fraction, alpha: float) -> Fraction:
    return sum((math.comb(n, w) * q**w * (1 - q) ** (n - w) for w in range(n + 1) if rejects(w, n - w, alpha)),
               Fraction(0))


def trinomial_power(decisions: int, d: Fraction, q: Fraction, alpha: float, min_points: float | None = None) -> float:
    """Every (wins, losses, ties) of N decisions; with `min_points`, also points ≥ the threshold."""
    win, loss = d * q, d * (1 - q)
    total = Fraction(0)
    for w in range(decisions + 1):
        for ell in range(decisions - w + 1):
            if not rejects(w, ell, alpha):
                continue
            if min_points is not None and not 100.0 * (w - ell) / decisions >= min_points:
                continue
            ways = math.comb(decisions, w) * math.comb(decisions - w, ell)
            total += ways * win**w * loss**ell * (1 - d) ** (decisions - w - ell)
    return float(total)


# ── the rejection region ────────────────────────────────────────────────────


@pytest.mark.parametrize("alpha", [0.05, 0.01, 0.1, 0.015625, 0.021484375, 0.3])
def test_critical_losses_are_the_sign_tests_rejection_region(alpha: float) -> None:
    """Including α equal to an attainable p-value (7/0 → 0.015625, 9/1 → 0.021484375): p ≤ α rejects."""
    critical = critical_losses(120, alpha)
    for n in range(121):
        region = [ell for ell in range(n + 1) if rejects(n - ell, ell, alpha)]
        assert region == list(range(critical[n] + 1)), n


def test_critical_losses_for_large_n_agree_with_the_sign_test_at_the_boundary() -> None:
    critical = critical_losses(3000, 0.05)
    for n in (500, 1001, 2999, 3000):
        k = critical[n]
        assert sign_test(n - k, k) <= 0.05 < sign_test(n - k - 1, k + 1)


# ── power at n discordant pairs ─────────────────────────────────────────────


def test_closed_form_small_cases_at_alpha_005() -> None:
    """6/0 is the first split that rejects (p = 1/32); 7/1 does not (p = 0.0703), 8/1 does (p = 0.039)."""
    q = 0.8
    assert [sign_test_power(n, q, 0.05) for n in range(6)] == [0.0] * 6
    assert sign_test_power(6, q, 0.05) == pytest.approx(q**6)
    assert sign_test_power(7, q, 0.05) == pytest.approx(q**7)
    assert sign_test_power(8, q, 0.05) == pytest.approx(q**8)
    assert sign_test_power(9, q, 0.05) == pytest.approx(q**9 + 9 * q**8 * (1 - q))
    # the saw-tooth: more discordant pairs, less power (6 → 8)
    assert sign_test_power(8, q, 0.05) < sign_test_power(6, q, 0.05)


@pytest.mark.parametrize("q", [Fraction(1, 2), Fraction(3, 5), Fraction(4, 5), Fraction(19, 20), Fraction(1)])
@pytest.mark.parametrize("alpha", [0.05, 0.01])
def test_power_at_n_matches_exact_enumeration(q: Fraction, alpha: float) -> None:
    for n in range(0, 61):
        assert sign_test_power(n, float(q), alpha) == pytest.approx(float(enumerated_power(n, q, alpha)), abs=1e-12)


def test_power_at_n_for_large_n_against_enumeration() -> None:
    q = Fraction(3, 5)
    assert sign_test_power(400, 0.6, 0.05) == pytest.approx(float(enumerated_power(400, q, 0.05)), rel=1e-9)


# ── power at N decisions ────────────────────────────────────────────────────


@pytest.mark.parametrize(("decisions", "d", "q"), [(12, Fraction(1, 2), Fraction(9, 10)), (20, Fraction(3, 10),
                                                   Fraction(4, 5)), (15, Fraction(1), Fraction(3, 4))])
def test_power_at_decisions_matches_trinomial_enumeration(decisions: int, d: Fraction, q: Fraction) -> None:
    assert power_at(decisions, float(d), float(q), 0.05) == pytest.approx(trinomial_power(decisions, d, q, 0.05),
                                                                          abs=1e-12)


def test_power_curve_is_power_at_each_n() -> None:
    curve = power_curve(40, 0.3, 0.8, 0.05)
    assert len(curve) == 41
    assert [float(p) for p in curve] == pytest.approx([power_at(n, 0.3, 0.8, 0.05) for n in range(41)], abs=1e-12)


def test_power_at_decisions_matches_a_seeded_monte_carlo() -> None:
    """264 decisions at E13's all-positive discordance (25/264), a 6-point gain: within 4 MC standard errors."""
    decisions, d = 264, 25 / 264
    q = win_share(6.0, d)
    rng = np.random.default_rng(24)
    reps = 20000
    outcomes = rng.multinomial(decisions, [d * q, d * (1 - q), 1 - d], size=reps)
    cache: dict[tuple[int, int], bool] = {}
    hits = 0
    for w, ell, _ in outcomes:
        key = (int(w), int(ell))
        if key not in cache:
            cache[key] = rejects(*key, 0.05)
        hits += cache[key]
    estimate = hits / reps
    expected = power_at(decisions, d, q, 0.05)
    assert abs(estimate - expected) < 4 * math.sqrt(expected * (1 - expected) / reps)


def test_gate_power_adds_the_points_threshold() -> None:
    d, q = Fraction(1, 2), Fraction(9, 10)
    for decisions in (10, 16):
        assert gate_power(decisions, float(d), float(q), 0.05, 40.0) == pytest.approx(
            trinomial_power(decisions, d, q, 0.05, 40.0), abs=1e-12)
    # at an effect equal to the threshold, test + threshold passes about half the time however large the suite
    d2 = 0.2
    assert gate_power(4000, d2, win_share(5.0, d2), 0.05, 5.0) == pytest.approx(0.5, abs=0.05)


# ── effect, sample size, minimum detectable effect ──────────────────────────


def test_effect_and_win_share_are_inverse() -> None:
    assert effect_points(0.2, 0.75) == pytest.approx(10.0)
    assert win_share(10.0, 0.2) == pytest.approx(0.75)
    with pytest.raises(ValueError, match="at most 20.00 points"):
        win_share(25.0, 0.2)
    with pytest.raises(ValueError, match="discordance"):
        win_share(1.0, 0.0)
    with pytest.raises(ValueError, match="effect"):
        win_share(0.0, 0.2)


@pytest.mark.parametrize("discordant", [29, 57, 58, 100])
def test_every_discordant_pair_a_win_is_a_possible_effect(discordant: int) -> None:
    """k of 100 pairs discordant allow exactly +k points (100 · 0.29 is 28.999999999999996 in floats)."""
    assert win_share(float(discordant), discordant / 100) == 1.0
    with pytest.raises(ValueError, match="impossible"):
        win_share(math.nextafter(float(discordant), 200), discordant / 100)


def test_decisions_needed_is_where_power_stays_above_target() -> None:
    d, effect, cap = 0.1, 5.0, 3000
    needed = decisions_needed(effect, d, 0.05, 0.8, cap)
    assert needed.decisions is not None and needed.first_reaching is not None
    assert needed.first_reaching <= needed.decisions
    curve = power_curve(cap, d, win_share(effect, d), 0.05)
    assert curve[needed.decisions - 1] < 0.8
    assert all(curve[needed.decisions:] >= 0.8)  # through the cap, not only through 2N
    assert curve[needed.first_reaching] >= 0.8 and all(curve[:needed.first_reaching] < 0.8)


def test_decisions_needed_beyond_the_cap_is_none() -> None:
    needed = decisions_needed(0.5, 0.1, 0.05, 0.8, 200)
    assert (needed.decisions, needed.first_reaching) == (None, None)


def test_minimum_detectable_effect_has_the_target_power() -> None:
    d, decisions = 25 / 264, 264
    mde = minimum_detectable_effect(decisions, d, 0.05, 0.8)
    assert mde is not None and 0 < mde <= 100 * d
    assert power_at(decisions, d, win_share(mde, d), 0.05) >= 0.8
    assert power_at(decisions, d, win_share(mde - 0.05, d), 0.05) < 0.8


def test_minimum_detectable_effect_is_none_when_even_all_wins_fall_short() -> None:
    """Two decisions at discordance ½ never give the test six discordant pairs."""
    assert minimum_detectable_effect(2, 0.5, 0.05, 0.8) is None
    assert minimum_detectable_effect(100, 0.0, 0.05, 0.8) is None


@pytest.mark.parametrize("bad", [{"alpha": 0.0}, {"alpha": 1.0}, {"power": 1.0}, {"power": 0.0}])
def test_bad_levels_are_value_errors(bad: dict[str, float]) -> None:
    args = {"alpha": 0.05, "power": 0.8} | bad
    with pytest.raises(ValueError):
        minimum_detectable_effect(100, 0.2, args["alpha"], args["power"])


@given(st.floats(min_value=1e-6, max_value=0.999, allow_nan=False), st.integers(min_value=0, max_value=70))
def test_critical_losses_match_the_sign_test_for_any_alpha(alpha: float, n: int) -> None:
    k = critical_losses(n, alpha)[n]
    assert [ell for ell in range(n + 1) if rejects(n - ell, ell, alpha)] == list(range(k + 1))

"""Power's decisions at their boundaries, against references computed another way: exact fractions
for the sign test's rejection region, brute-force enumeration of every split for power (each split judged by `stats.sign_test` itself)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from replay.stats import (
    Needed,
    critical_losses,
    decisions_needed,
    gate_power,
    minimum_detectable_effect,
    noisy_discordance,
    power_at,
    power_curve,
    rejects,
    sign_test,
    signal_discordance,
    win_share,
)
from tests.support.power import sign_test_power


def reference_critical(n: int, alpha: Fraction) -> int:
    """Most losses k with 2·Σ_{j ≤ k} C(n, j) / 2ⁿ ≤ α, in exact fractions (−1: none)."""
    k, tail = -1, 0
    while k + 1 <= n and Fraction(2 * (tail + math.comb(n, k + 1)), 2**n) <= alpha:
        k += 1
        tail += math.comb(n, k)
    return k


def pmf(n: int, k: int, p: float) -> float:
    return math.comb(n, k) * p**k * (1 - p) ** (n - k)


def reference_power(decisions: int, d: float, q: float, alpha: float, min_points: float | None = None) -> float:
    """Σ over every (discordant n, wins w) of the probability that the gate's own checks pass:
    the sign test rejects (p ≤ α), in the candidate's favour, and (if given) 100·(W − L)/N ≥ min_points."""
    total = 0.0
    for n in range(decisions + 1):
        p_n = pmf(decisions, n, d)
        if p_n == 0:
            continue
        for w in range(n + 1):
            losses = n - w
            if w <= losses or not rejects(sign_test(w, losses), alpha):
                continue
            if min_points is not None and not 100.0 * (w - losses) / decisions >= min_points:
                continue
            total += p_n * pmf(n, w, q)
    return total


@pytest.mark.parametrize("n, wins", [(7, 7), (10, 9), (12, 10), (20, 15), (25, 18)])
def test_critical_losses_at_just_below_and_just_above_an_alpha_equal_to_a_p_value(n: int, wins: int) -> None:
    at = sign_test(wins, n - wins)
    exact = Fraction(2 * sum(math.comb(n, j) for j in range(n - wins + 1)), 2**n)
    assert Fraction(at) == exact  # the float p-value is the exact dyadic fraction
    for alpha in (at, math.nextafter(at, 0), math.nextafter(at, 1)):
        got = critical_losses(n, alpha)
        assert list(got) == [reference_critical(m, Fraction(alpha)) for m in range(n + 1)]
    # p = α rejects (the one rule, p ≤ α); one ulp below does not
    assert critical_losses(n, at)[n] == n - wins
    assert critical_losses(n, math.nextafter(at, 0))[n] == n - wins - 1


def test_critical_losses_over_many_pairs_match_exact_fractions() -> None:
    for alpha in (0.05, 0.01, 0.2):
        assert list(critical_losses(60, alpha)) == [reference_critical(n, Fraction(alpha)) for n in range(61)]


@pytest.mark.parametrize("n, q, alpha", [(7, 0.9, 1 / 64), (7, 0.9, math.nextafter(1 / 64, 0)), (12, 0.75, 0.05),
                                         (1, 0.5, 0.9)])
def test_sign_test_power_is_the_enumerated_rejection_probability(n: int, q: float, alpha: float) -> None:
    assert sign_test_power(n, q, alpha) == pytest.approx(reference_power(n, 1.0, q, alpha),
                                                         rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("decisions, d, q", [(20, 0.5, 0.8), (30, 0.3, 0.9), (9, 1.0, 0.7), (0, 0.4, 0.9)])
def test_power_at_and_the_curve_are_the_enumerated_mixture(decisions: int, d: float, q: float) -> None:
    expected = reference_power(decisions, d, q, 0.05)
    assert power_at(decisions, d, q, 0.05) == pytest.approx(expected, rel=1e-9, abs=1e-15)
    assert power_curve(decisions, d, q, 0.05)[decisions] == pytest.approx(expected, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("min_points", [40.0, math.nextafter(40.0, 0), math.nextafter(40.0, 100), 39.0, 41.0])
def test_gate_power_where_the_point_threshold_is_hit_exactly(min_points: float) -> None:
    """N = 20: W − L = 8 is exactly 40 points, so 40 admits it and one ulp above does not."""
    got = gate_power(20, 0.6, 0.85, 0.05, min_points)
    assert got == pytest.approx(reference_power(20, 0.6, 0.85, 0.05, min_points),
                                rel=1e-9, abs=1e-15)


def test_gate_power_at_the_threshold_differs_from_one_ulp_above() -> None:
    at, above = gate_power(20, 0.6, 0.85, 0.05, 40.0), gate_power(20, 0.6, 0.85, 0.05, math.nextafter(40.0, 100))
    assert at > above > 0
    assert gate_power(20, 0.6, 0.85, 0.05, 0.0) == pytest.approx(power_at(20, 0.6, 0.85, 0.05), rel=1e-12)


def reference_curve(max_n: int, q: float, alpha: float) -> list[float]:
    """Power at N = 0 … max_n with every decision discordant: the enumerated sign test power."""
    return [sum(pmf(n, w, q) for w in range(n + 1) if w > n - w and rejects(sign_test(w, n - w), alpha))
            for n in range(max_n + 1)]


@pytest.mark.parametrize("effect, power, expected, first", [(40, 0.8, 54, 49), (30, 0.9, 121, 114)])
def test_decisions_needed_is_the_last_dip_below_target_and_power_stays_up_through_2n(
    effect: float, power: float, expected: int, first: int
) -> None:
    """At discordance 1 power is the sign test's saw-tooth: it first reaches the target, dips back, and
    stays from N = `expected` through 2N (the second case needs the horizon past its first 64)."""
    found = decisions_needed(effect, 1.0, 0.05, power, 1000)
    curve = reference_curve(2 * expected, win_share(effect, 1.0), 0.05)
    assert found.decisions == expected and found.first_reaching == first
    assert all(p >= power for p in curve[expected:])
    assert curve[expected - 1] < power
    assert first == next(n for n, p in enumerate(curve) if p >= power) and first < expected


def test_decisions_needed_at_the_search_cap() -> None:
    """A cap exactly at the answer finds it; one below it does not (power there is below target)."""
    assert decisions_needed(40, 1.0, 0.05, 0.8, 54).decisions == 54
    below = decisions_needed(40, 1.0, 0.05, 0.8, 53)
    assert below.decisions is None and below.first_reaching == 49 and below.max_decisions == 53
    assert decisions_needed(40, 1.0, 0.05, 0.8, 30).first_reaching is None


def test_decisions_needed_with_a_cap_between_n_and_2n_stops_at_the_cap() -> None:
    """Power stays up from 54 to the cap (70 < 2·54): the cap is as far as it can be checked."""
    assert decisions_needed(40, 1.0, 0.05, 0.8, 70).decisions == 54


def test_a_power_target_met_exactly_is_reached() -> None:
    """d = 1, +50 points (q = 3/4), 6 pairs: only 6/0 rejects, so power is 0.75⁶ as this module computes it (a hair
    above 729/4096); a target of exactly that float is equality, not a near miss. It is reached at N = 6 and the
    MDE is exactly +50 (the bisection's first step lands on q = 3/4); one ulp more is not reached there."""
    met = power_at(6, 1.0, 0.75, 0.05)
    above = math.nextafter(met, 1)
    assert decisions_needed(50, 1.0, 0.05, met, 6) == Needed(6, 6, 6)
    assert decisions_needed(50, 1.0, 0.05, above, 6) == Needed(None, None, 6)
    assert minimum_detectable_effect(6, 1.0, 0.05, met) == 50.0
    mde_above = minimum_detectable_effect(6, 1.0, 0.05, above)
    assert mde_above is not None and mde_above > 50.0


def test_a_target_met_exactly_by_winning_every_discordant_pair_has_an_mde() -> None:
    """d = 3/4, 6 decisions: winning every discordant pair gives power P(all 6 discordant) as this module computes
    it; at exactly that target the MDE is every pair a win (+75), one ulp above there is none."""
    every = power_at(6, 0.75, 1.0, 0.05)
    assert minimum_detectable_effect(6, 0.75, 0.05, every) == 75.0
    assert minimum_detectable_effect(6, 0.75, 0.05, math.nextafter(every, 1)) is None


def test_minimum_detectable_effect_is_where_power_crosses_the_target() -> None:
    mde = minimum_detectable_effect(54, 1.0, 0.05, 0.8)
    assert mde is not None
    q = win_share(mde, 1.0)
    assert sign_test_power(54, q, 0.05) >= 0.8
    assert sign_test_power(54, win_share(mde - 0.01, 1.0), 0.05) < 0.8
    # the smallest N with power: at 5 pairs no split rejects at 0.05 (5/0 is p = 1/16), at 6 one does
    assert minimum_detectable_effect(5, 1.0, 0.05, 0.5) is None
    assert minimum_detectable_effect(6, 1.0, 0.05, 0.5) is not None


def test_decisions_needed_checks_through_2n_after_extending_the_horizon() -> None:
    """d = 1, +10 points, 60% power: power stays up from 512 as far as the first long horizon shows, but
    dips at 517, within 2·512; checked through 2N the answer is 518, and from 518 through 1036 it holds."""
    found = decisions_needed(10, 1.0, 0.05, 0.6, 2000)
    assert found.decisions == 518 and found.max_decisions == 2000
    curve = power_curve(2 * 518, 1.0, win_share(10, 1.0), 0.05)
    assert curve[517] < 0.6 and all(curve[518:] >= 0.6)


@pytest.mark.parametrize("decisions, d, q", [(40, 0.9, 0.8), (60, 0.95, 0.75), (30, 0.05, 0.99)])
def test_power_near_full_or_no_discordance_keeps_the_whole_window(decisions: int, d: float, q: float) -> None:
    """Where n | N is narrow (d near 0 or 1), the summed window must still hold all of its mass."""
    expected = reference_power(decisions, d, q, 0.05)
    assert power_at(decisions, d, q, 0.05) == pytest.approx(expected, rel=1e-9, abs=1e-15)
    assert gate_power(decisions, d, q, 0.05, 0.0) == pytest.approx(expected, rel=1e-9, abs=1e-15)


def test_gate_power_at_its_edges() -> None:
    assert gate_power(0, 0.5, 0.9, 0.05, 5.0) == 0.0
    assert gate_power(20, 0.0, 0.9, 0.05, 5.0) == 0.0
    assert gate_power(12, 1.0, 0.9, 0.05, 10.0) == pytest.approx(reference_power(12, 1.0, 0.9, 0.05, 10.0), rel=1e-12)


def test_power_curve_without_discordance_is_zero_at_every_n() -> None:
    curve = power_curve(10, 0.0, 0.9, 0.05)
    assert curve.shape == (11,) and not curve.any()


@pytest.mark.parametrize("call, message", [
    (lambda: decisions_needed(10, 0.5, 0.05, 1.0, 100), "power must be in"),
    (lambda: decisions_needed(10, 0.5, 1.0, 0.8, 100), "α must be in"),
    (lambda: minimum_detectable_effect(50, 0.5, 0.05, 0.0), "power must be in"),
    (lambda: power_at(10, 1.5, 0.5, 0.05), "discordance and win share must be in"),
    (lambda: power_at(10, 0.5, 1.5, 0.05), "discordance and win share must be in"),
    (lambda: power_at(10, 0.5, -0.1, 0.05), "discordance and win share must be in"),
    (lambda: win_share(5, 0.0), "discordance must be in"),
    (lambda: win_share(5, 1.5), "discordance must be in"),
    (lambda: win_share(30.5, 0.3), "impossible at discordance"),
    (lambda: win_share(math.nextafter(30.0, 31), 0.3), "impossible at discordance"),
    (lambda: win_share(0.0, 0.3), "must be a gain"),
])
def test_levels_and_shares_outside_their_ranges_are_refused(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


def test_win_shares_and_powers_at_the_ends_of_their_ranges() -> None:
    assert win_share(30.0, 0.3) == 1.0 and win_share(100.0, 1.0) == 1.0  # every discordant pair won
    assert power_at(10, 0.5, 0.0, 0.05) == 0.0 and power_at(10, 0.5, 1.0, 0.05) > 0
    assert power_at(10, 1.0, 1.0, 0.05) == 1.0  # 10/0 rejects


DYADIC = [Fraction(k, 8) for k in range(9)]  # exact in floats, so the references compare with ==


@pytest.mark.parametrize("signal", DYADIC)
@pytest.mark.parametrize("noise", DYADIC)
def test_the_noise_model_adds_noise_to_concordant_pairs_only_and_its_inverse_removes_it(
        signal: Fraction, noise: Fraction) -> None:
    d = signal + noise * (1 - signal)  # the model, in exact fractions
    assert noisy_discordance(float(signal), float(noise)) == float(d)
    expected = Fraction(0) if noise == 1 else max(Fraction(0), (d - noise) / (1 - noise))
    assert signal_discordance(float(d), float(noise)) == float(expected)
    if noise < 1:
        assert expected == signal  # the inverse recovers the signal wherever it is defined


@pytest.mark.parametrize("discordance, noise, signal", [
    (0.25, 0.5, 0.0),  # below the noise floor: no signal, never a negative one
    (0.5, 0.5, 0.0),  # at it
    (0.625, 0.5, 0.25),  # just above it
    (0.5, 1.0, 0.0),  # all noise: nothing can be told apart (and no division by zero)
    (1.0, 0.0, 1.0),  # no noise: the discordance is the signal
])
def test_the_signal_in_a_discordance_at_the_noise_floor(discordance: float, noise: float, signal: float) -> None:
    assert signal_discordance(discordance, noise) == signal


@pytest.mark.parametrize("bad", [math.nextafter(0.0, -1.0), math.nextafter(1.0, 2.0), -1.0, 2.0, math.nan])
def test_the_noise_model_refuses_a_value_outside_zero_to_one_naming_it(bad: float) -> None:
    for call, name in ((lambda: noisy_discordance(bad, 0.5), "signal"), (lambda: noisy_discordance(0.5, bad), "noise"),
                       (lambda: signal_discordance(bad, 0.5), "discordance"),
                       (lambda: signal_discordance(0.5, bad), "noise")):
        with pytest.raises(ValueError, match=rf"^{name} must be in \[0, 1\], got "):
            call()
    assert noisy_discordance(0.0, 1.0) == 1.0 and noisy_discordance(1.0, 0.0) == 1.0  # both ends are allowed


def test_without_discordant_pairs_there_is_no_power() -> None:
    """d = 0: every pair agrees, so no split can reject (and the mixture is not even needed)."""
    assert power_at(100, 0.0, 0.9, 0.05) == 0.0
    assert gate_power(100, 0.0, 0.9, 0.05, 0.0) == 0.0
    assert list(power_curve(5, 0.0, 0.9, 0.05)) == [0.0] * 6

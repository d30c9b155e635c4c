"""The shared statistics at their bounds: the one rejection rule at exactly α, the p-value's cap at 1,
the levels and counts each function accepts, and ratios at a zero baseline."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from replay.stats import (
    newcombe_paired_ci,
    overhead,
    paired_comparison,
    rejects,
    repeat_comparison,
    sign_test,
    sign_test_p,
    wilson_interval,
    z_value,
)
from tests.replay.stats.test_paired import reference_newcombe


@pytest.mark.parametrize("alpha", [0.05, 1 / 64, 0.021484375, 1e-6, 0.999])
def test_rejects_at_alpha_and_below_never_above(alpha: float) -> None:
    assert rejects(alpha, alpha) and rejects(math.nextafter(alpha, 0), alpha) and rejects(0.0, alpha)
    assert not rejects(math.nextafter(alpha, 1), alpha)


def test_every_small_split_rejects_exactly_where_its_exact_p_value_is_at_most_alpha() -> None:
    """Against exact fractions: 2·Σ_{k ≤ min} C(n, k) / 2ⁿ (capped at 1) ≤ α, for α on and between p-values."""
    for n in range(16):
        for wins in range(n + 1):
            exact = min(Fraction(1), Fraction(2 * sum(math.comb(n, k) for k in range(min(wins, n - wins) + 1)), 2**n))
            p = sign_test(wins, n - wins)
            assert Fraction(p) == exact
            for alpha in (float(exact), math.nextafter(float(exact), 0)):
                if 0 < alpha < 1:
                    assert rejects(p, alpha) is (exact <= Fraction(alpha))


@pytest.mark.parametrize("wins, losses", [(0, 0), (1, 1), (3, 3), (1, 0), (5, 4)])
def test_the_p_value_is_capped_at_one(wins: int, losses: int) -> None:
    assert sign_test(wins, losses) == 1.0
    assert sign_test_p(3, 1) == 1.0 and sign_test_p(1, 1) == 1.0 and sign_test_p(1, 2) == 0.5


def test_sign_test_of_zero_losses_is_two_over_two_to_the_n() -> None:
    assert sign_test(6, 0) == 2 / 64 and sign_test(0, 6) == 2 / 64 and sign_test(0, 1) == 1.0
    with pytest.raises(ValueError):
        sign_test(3, -1)


@pytest.mark.parametrize("confidence", [0.0, 1.0, -0.5, 1.5])
def test_a_confidence_outside_zero_one_is_refused(confidence: float) -> None:
    with pytest.raises(ValueError, match="confidence must be in"):
        z_value(confidence)


def test_z_value_near_its_bounds() -> None:
    assert z_value(1e-9) == pytest.approx(0.0, abs=1e-8) and z_value(0.5) == pytest.approx(0.6744897501960817)


@pytest.mark.parametrize("successes, n", [(0, 0), (-1, 5), (6, 5), (1, -1)])
def test_wilson_refuses_counts_that_cannot_be(successes: int, n: int) -> None:
    with pytest.raises(ValueError, match="need 0 ≤ successes ≤ n"):
        wilson_interval(successes, n)


def test_wilson_at_zero_and_all_stays_in_zero_one() -> None:
    low, high = wilson_interval(0, 5)
    assert low == 0.0 and 0 < high < 1
    low, high = wilson_interval(5, 5)
    assert 0 < low < 1 and high == 1.0
    z = z_value()
    assert high == min(1.0, (5 + z * z / 2 + z * math.sqrt(z * z / 4)) / (5 + z * z))


def test_newcombe_with_one_cell_only() -> None:
    """Only concordant pairs, or one discordant pair: the interval holds 0 and stays within [−1, 1]."""
    for table in [(1, 0, 0, 0), (0, 0, 0, 1), (0, 1, 0, 0), (0, 0, 1, 0)]:
        low, high = newcombe_paired_ci(both=table[0], only_candidate=table[1], only_baseline=table[2],
                                       neither=table[3])
        assert -1 <= low <= (table[1] - table[2]) <= high <= 1
    with pytest.raises(ValueError, match="≥ 0"):
        newcombe_paired_ci(both=0, only_candidate=0, only_baseline=0, neither=-1)


def test_paired_comparison_classifies_each_pair() -> None:
    result = paired_comparison([(True, True), (False, True), (False, True), (True, False), (False, False)])
    assert (result.n, result.baseline_correct, result.candidate_correct, result.wins, result.losses) == (5, 2, 3, 2, 1)
    assert result.points == 20.0 and result.p_value == 1.0


def test_a_ratio_needs_a_positive_baseline() -> None:
    tiny = overhead([1e-300], [2e-300], [1.0], [3.0])
    assert tiny.token_ratio == pytest.approx(2.0) and tiny.latency_ratio == 3.0 and tiny.p50_latency_ratio == 3.0
    zero = overhead([0.0], [2.0], [0.0], [3.0])
    assert zero.token_ratio is None and zero.latency_ratio is None and zero.p50_latency_ratio is None
    assert (zero.baseline_mean_tokens, zero.candidate_mean_tokens) == (0.0, 2.0)
    assert (zero.baseline_mean_latency_s, zero.candidate_mean_latency_s) == (0.0, 3.0)
    empty = overhead([], [], [], [])
    assert empty.token_ratio is None and empty.baseline_p50_latency_s is None


def test_newcombes_phi_correction_between_a_third_and_a_half_of_n() -> None:
    """(2, 0, 5, 2): ad − bc = 4, between n/3 and n/2 = 4.5, so the corrected phi is 0, not negative; at
    (2, 1, 1, 2) ad − bc = n/2 exactly."""
    for table in [(2, 0, 5, 2), (2, 5, 0, 2), (2, 1, 1, 2), (4, 1, 2, 3)]:
        low, high = newcombe_paired_ci(both=table[0], only_candidate=table[1], only_baseline=table[2], neither=table[3])
        ref_low, ref_high = reference_newcombe(*table)
        assert low == pytest.approx(ref_low, abs=1e-12) and high == pytest.approx(ref_high, abs=1e-12)


def test_a_higher_confidence_widens_every_interval() -> None:
    usual = newcombe_paired_ci(both=10, only_candidate=6, only_baseline=2, neither=12)
    wide = newcombe_paired_ci(both=10, only_candidate=6, only_baseline=2, neither=12, confidence=0.99)
    assert wide[0] < usual[0] and wide[1] > usual[1]
    pairs = [(True, True)] * 10 + [(False, True)] * 6 + [(True, False)] * 2 + [(False, False)] * 12
    repeat = repeat_comparison(pairs, 0.99)
    assert (repeat.ci_low, repeat.ci_high) == (100 * wide[0], 100 * wide[1])


@pytest.mark.parametrize("cells", [(-1, 2, 2, 2), (2, -1, 2, 2), (2, 2, -1, 2), (2, 2, 2, -1)])
def test_every_cell_must_be_a_count(cells: tuple[int, int, int, int]) -> None:
    a, b, c, d = cells
    with pytest.raises(ValueError, match="^cell counts must be ≥ 0"):
        newcombe_paired_ci(both=a, only_candidate=b, only_baseline=c, neither=d)


def test_refusals_say_why() -> None:
    with pytest.raises(ValueError, match="^no pairs: a paired interval needs at least one decision$"):
        newcombe_paired_ci(both=0, only_candidate=0, only_baseline=0, neither=0)
    with pytest.raises(ValueError, match="^overhead needs one token count and one latency per decision and arm$"):
        overhead([1.0], [1.0], [1.0], [])


def test_each_arms_median_latency_is_its_own() -> None:
    cost = overhead([1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 2.0, 3.0], [4.0, 6.0, 8.0])
    assert (cost.baseline_p50_latency_s, cost.candidate_p50_latency_s, cost.p50_latency_ratio) == (2.0, 6.0, 3.0)

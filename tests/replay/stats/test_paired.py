"""Paired statistics, checked against published values and independent computations.

The independent references below are written from the definitions, not from replay.stats:
the sign test by enumerating every sign sequence (or convolving Bernoulli(½) steps), the
Wilson limits by bisection on the score equation, and Newcombe's interval from the paper's
formulas on top of those numerically solved limits.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replay.stats import (
    newcombe_paired_ci,
    overhead,
    paired_comparison,
    repeat_comparison,
    sign_test,
    wilson_interval,
    z_value,
)

Z95 = 1.959963984540054  # the 97.5% standard normal quantile (tables)
Z99 = 2.5758293035489004  # the 99.5% one (tables)


# ── independent references ──────────────────────────────────────────────────


def enumerated_sign_test(wins: int, losses: int) -> Fraction:
    """P(a sign sequence is at least as unbalanced as the observed one), by enumeration."""
    n = wins + losses
    observed = abs(wins - losses)
    extreme = sum(1 for signs in itertools.product((1, -1), repeat=n) if abs(sum(signs)) >= observed)
    return Fraction(extreme, 2**n)


def convolved_sign_test(wins: int, losses: int) -> float:
    """The same by building Binomial(n, ½) step by step (for n too large to enumerate)."""
    n = wins + losses
    dist = [Fraction(1)]
    for _ in range(n):
        dist = [((dist[k] if k < len(dist) else 0) + (dist[k - 1] if k >= 1 else 0)) / 2 for k in range(len(dist) + 1)]
    observed = abs(wins - losses)
    return float(sum(p for k, p in enumerate(dist) if abs(2 * k - n) >= observed))


def bisect(f, lo: float, hi: float) -> float:
    """Root of a monotone-crossing f on [lo, hi]."""
    flo = f(lo)
    for _ in range(200):
        mid = (lo + hi) / 2
        if (f(mid) > 0) == (flo > 0):
            lo, flo = mid, f(mid)
        else:
            hi = mid
    return (lo + hi) / 2


def solved_wilson(x: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The p where (p̂ − p)² = z² p (1 − p) / n, below and above p̂."""
    phat = x / n

    def score(p: float) -> float:
        return (phat - p) ** 2 - z * z * p * (1 - p) / n

    low = 0.0 if x == 0 else bisect(score, 0.0, phat)
    high = 1.0 if x == n else bisect(score, phat, 1.0)
    return low, high


def reference_newcombe(a: int, b: int, c: int, d: int, z: float = Z95) -> tuple[float, float]:
    """Newcombe (1998) method 10 for p1 − p2, p1 = (a + b)/n, p2 = (a + c)/n.

    δ = √((p1−l1)² − 2φ(p1−l1)(u2−p2) + (u2−p2)²), ε = √((u1−p1)² − 2φ(u1−p1)(p2−l2) + (p2−l2)²),
    φ from the 2×2 table with the paper's correction (ad − bc − n/2 when ad − bc > n/2, 0 up to
    n/2, ad − bc when negative; 0 when a marginal total is 0).
    """
    n = a + b + c + d
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = solved_wilson(a + b, n, z)
    l2, u2 = solved_wilson(a + c, n, z)
    e, f, g, h = a + b, c + d, a + c, b + d
    ad_bc = a * d - b * c
    if 0 in (e, f, g, h):
        phi = 0.0
    elif ad_bc > n / 2:
        phi = (ad_bc - n / 2) / math.sqrt(e * f * g * h)
    elif ad_bc >= 0:
        phi = 0.0
    else:
        phi = ad_bc / math.sqrt(e * f * g * h)
    delta = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    epsilon = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return p1 - p2 - delta, p1 - p2 + epsilon


def ci(a: int, b: int, c: int, d: int) -> tuple[float, float]:
    return newcombe_paired_ci(both=a, only_candidate=b, only_baseline=c, neither=d)


# ── sign test ───────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("wins", "losses", "p"),
    [
        (7, 0, 0.015625),  # 001: 2 × 2⁻⁷
        (9, 1, 0.021484375),  # 001: 2 × 11 / 2¹⁰
        (3, 7, 0.34375),  # 001: 2 × 176 / 2¹⁰
        (0, 0, 1.0),
    ],
)
def test_sign_test_reproduces_the_seed_papers_exact_p_values(wins: int, losses: int, p: float) -> None:
    assert sign_test(wins, losses) == p


@pytest.mark.parametrize(
    ("wins", "losses", "published"),
    [(14, 11, 0.69), (7, 2, 0.18), (5, 8, 0.58)],  # 001 §1 / Table 1, printed to two decimals
)
def test_sign_test_matches_the_papers_rounded_p_values(wins: int, losses: int, published: float) -> None:
    assert sign_test(wins, losses) == pytest.approx(published, abs=0.005)


@pytest.mark.parametrize("n", range(0, 13))
def test_sign_test_equals_enumeration_of_every_sign_sequence(n: int) -> None:
    for wins in range(n + 1):
        assert sign_test(wins, n - wins) == pytest.approx(float(enumerated_sign_test(wins, n - wins)), abs=1e-15)


@pytest.mark.parametrize(("wins", "losses"), [(14, 11), (17, 16), (40, 20), (3, 57), (30, 30)])
def test_sign_test_equals_a_convolved_binomial_for_larger_n(wins: int, losses: int) -> None:
    assert sign_test(wins, losses) == pytest.approx(convolved_sign_test(wins, losses), abs=1e-12)


def test_sign_test_is_symmetric_and_rejects_negative_counts() -> None:
    assert sign_test(2, 9) == sign_test(9, 2)
    with pytest.raises(ValueError, match="≥ 0"):
        sign_test(-1, 3)


# ── Wilson and Newcombe ─────────────────────────────────────────────────────


def test_z_value_is_the_tabulated_quantile() -> None:
    assert z_value(0.95) == pytest.approx(Z95, abs=1e-9)
    assert z_value(0.99) == pytest.approx(2.5758293035489, abs=1e-9)


@pytest.mark.parametrize(("x", "n"), [(0, 10), (1, 10), (5, 10), (10, 10), (31, 73), (38, 73), (141, 264), (0, 1)])
def test_wilson_interval_solves_the_score_equation(x: int, n: int) -> None:
    low, high = wilson_interval(x, n)
    ref_low, ref_high = solved_wilson(x, n)
    assert low == pytest.approx(ref_low, abs=1e-9)
    assert high == pytest.approx(ref_high, abs=1e-9)


def test_newcombe_matches_the_published_cavo_example() -> None:
    """Fagerland, Lydersen & Laake, Statistical Analysis of Contingency Tables (2017), ch. 8:
    complete response before/after consolidation therapy (Cavo et al. 2012), table
    [[59, 6], [16, 80]]: Newcombe square-and-add estimate −0.0621, 95% CI −0.1186 to −0.0046."""
    low, high = ci(59, 6, 16, 80)
    assert pytest.approx(-0.0621, abs=5e-5) == (6 - 16) / 161
    assert low == pytest.approx(-0.1186, abs=5e-5)
    assert high == pytest.approx(-0.0046, abs=5e-5)


TABLES = [
    (36, 12, 2, 0),  # Newcombe (1998) example: 50 pairs, difference 0.2
    (31, 7, 0, 35),  # 001 verified_recovery, Q-only
    (42, 3, 7, 21),  # 001 clean_trajectory_action, Q-only
    (54, 4, 4, 56),  # 001 verified_action, Q-only
    (127, 14, 11, 112),  # 001 all 264 positives, Q-only
    (59, 6, 16, 80),
    (14, 5, 0, 22),
    (1, 1, 7, 12),
    (0, 0, 0, 10),  # degenerate: every pair negative
    (10, 0, 0, 0),  # degenerate: every pair positive
    (0, 5, 0, 5),  # a marginal total is zero
    (0, 3, 4, 0),  # only discordant pairs
    (0, 1, 0, 0),
    (20, 0, 0, 20),  # ad − bc above n/2 with no discordant pairs
    (3, 1, 1, 3),  # 0 ≤ ad − bc ≤ n/2: phi corrected to 0
]


@pytest.mark.parametrize("table", TABLES)
def test_newcombe_equals_an_independent_computation_from_the_paper(table: tuple[int, int, int, int]) -> None:
    low, high = ci(*table)
    ref_low, ref_high = reference_newcombe(*table)
    assert low == pytest.approx(ref_low, abs=1e-9)
    assert high == pytest.approx(ref_high, abs=1e-9)


@pytest.mark.parametrize("table", TABLES)
def test_newcombe_at_99_percent_uses_that_confidence_for_both_marginals(table: tuple[int, int, int, int]) -> None:
    a, b, c, d = table
    low, high = newcombe_paired_ci(both=a, only_candidate=b, only_baseline=c, neither=d, confidence=0.99)
    ref_low, ref_high = reference_newcombe(*table, z=Z99)
    assert low == pytest.approx(ref_low, abs=1e-9)
    assert high == pytest.approx(ref_high, abs=1e-9)


def test_newcombe_1998_example_brackets_its_estimate() -> None:
    """a=36, b=12, c=2, d=0: the interval brackets the estimate 0.2 and excludes 0."""
    low, high = ci(36, 12, 2, 0)
    assert 0.05 < low < 0.2 < high < 0.35


def test_newcombe_on_the_seed_strata_agrees_with_001s_reading() -> None:
    """Recovery +7/−0 is a real gain (CI above 0); clean +3/−7 cannot be told from noise."""
    recovery = ci(31, 7, 0, 35)
    clean = ci(42, 3, 7, 21)
    assert recovery[0] > 0
    assert clean[0] < 0 < clean[1]


@given(st.tuples(*(st.integers(0, 40),) * 4).filter(lambda t: sum(t) > 0))
def test_newcombe_swapping_the_arms_mirrors_the_interval(table: tuple[int, int, int, int]) -> None:
    a, b, c, d = table
    low, high = ci(a, b, c, d)
    mirror_low, mirror_high = ci(a, c, b, d)
    assert low == pytest.approx(-mirror_high, abs=1e-12)
    assert high == pytest.approx(-mirror_low, abs=1e-12)
    estimate = (b - c) / (a + b + c + d)
    assert -1 - 1e-12 <= low <= estimate + 1e-12
    assert estimate - 1e-12 <= high <= 1 + 1e-12


def test_newcombe_rejects_an_empty_or_negative_table() -> None:
    with pytest.raises(ValueError, match="no pairs"):
        ci(0, 0, 0, 0)
    with pytest.raises(ValueError, match="≥ 0"):
        ci(1, -1, 0, 0)


# ── paired comparisons ──────────────────────────────────────────────────────


def pairs(both: int, wins: int, losses: int, neither: int) -> list[tuple[bool, bool]]:
    return [(True, True)] * both + [(False, True)] * wins + [(True, False)] * losses + [(False, False)] * neither


def test_paired_comparison_counts_points_and_ci_in_points() -> None:
    result = paired_comparison(pairs(31, 7, 0, 35))
    assert (result.n, result.baseline_correct, result.candidate_correct) == (73, 31, 38)
    assert (result.wins, result.losses, result.p_value) == (7, 0, 0.015625)
    assert result.points == pytest.approx(100 * 7 / 73)
    ref_low, ref_high = reference_newcombe(31, 7, 0, 35)
    assert result.ci_low == pytest.approx(100 * ref_low, abs=1e-7)
    assert result.ci_high == pytest.approx(100 * ref_high, abs=1e-7)


def test_paired_comparison_of_nothing_has_no_estimate() -> None:
    result = paired_comparison([])
    assert (result.n, result.p_value, result.points, result.ci_low, result.ci_high) == (0, 1.0, None, None, None)


def test_repeat_comparison_counts_fixes_and_regressions_lower_is_better() -> None:
    """001 E9: exact repeats 32 → 24 on 160 states, 9 fixes / 1 regression, 25% relative."""
    result = repeat_comparison(pairs(23, 1, 9, 127))
    assert (result.baseline_repeats, result.candidate_repeats) == (32, 24)
    assert (result.fixes, result.regressions) == (9, 1)
    assert result.p_value == 0.021484375
    assert result.relative_reduction == pytest.approx(0.25)
    assert (result.baseline_rate, result.candidate_rate) == (0.20, 0.15)
    assert result.points == pytest.approx(-5.0)
    assert result.ci_high < 0


def test_repeat_comparison_without_baseline_repeats_has_no_relative_reduction() -> None:
    assert repeat_comparison(pairs(0, 2, 0, 8)).relative_reduction is None


def test_overhead_ratios_of_means_and_medians() -> None:
    cost = overhead([100, 100, 100], [110, 120, 130], [1.0, 2.0, 9.0], [1.5, 2.0, 3.0])
    assert cost.n == 3
    assert cost.token_ratio == pytest.approx(1.2)
    assert cost.latency_ratio == pytest.approx(6.5 / 12)
    assert (cost.baseline_p50_latency_s, cost.candidate_p50_latency_s, cost.p50_latency_ratio) == (2.0, 2.0, 1.0)


def test_overhead_without_measurements_has_no_ratio() -> None:
    cost = overhead([0, 0], [5, 5], [0.0, 0.0], [1.0, 1.0])
    assert cost.token_ratio is None and cost.latency_ratio is None and cost.p50_latency_ratio is None
    assert overhead([], [], [], []).n == 0
    with pytest.raises(ValueError, match="one token count"):
        overhead([1], [1, 2], [1.0], [1.0])

"""Stop-QA's statistics against independent computations (scipy and statsmodels are not installed here, so each
reference is computed from the definition): Clopper–Pearson by R's published `binom.test` limits, by its
defining tail equations in exact rational arithmetic and by its exact coverage enumerated over every outcome;
κ's Fleiss–Cohen–Everitt SE by the delta method worked numerically (a finite-difference gradient of κ against
the multinomial covariance), and by hand on a small table."""

from __future__ import annotations

from fractions import Fraction
from math import comb, sqrt

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.evidence import MAX_RUNS
from replay.stats import clopper_pearson, cohen_kappa

ALPHA = 0.05


def binomial_tail(x: int, n: int, p: float, upper: bool) -> Fraction:
    """P(X ≥ x) or P(X ≤ x) exactly, at the double `p` taken as the rational it is."""
    q = Fraction(p)
    ks = range(x, n + 1) if upper else range(x + 1)
    return sum((comb(n, k) * q**k * (1 - q) ** (n - k) for k in ks), Fraction(0))


@pytest.mark.parametrize(("x", "n", "low", "high"), [
    (0, 10, 0.0, 0.3084971), (1, 10, 0.002528579, 0.4450161), (5, 10, 0.187086, 0.812914),
    (10, 10, 0.6915029, 1.0),
])
def test_clopper_pearson_matches_r_binom_test(x: int, n: int, low: float, high: float) -> None:
    assert clopper_pearson(x, n) == pytest.approx((low, high), abs=5e-7)


@pytest.mark.parametrize("n", [1, 2, 7, 72, 1000])
def test_zero_of_n_and_n_of_n_have_the_closed_forms(n: int) -> None:
    """0 of n: (0, 1 − (α/2)^(1/n)); n of n: ((α/2)^(1/n), 1)."""
    edge = (ALPHA / 2) ** (1 / n)
    assert clopper_pearson(0, n) == pytest.approx((0.0, 1 - edge), abs=1e-12)
    assert clopper_pearson(n, n) == pytest.approx((edge, 1.0), abs=1e-12)


@settings(max_examples=60)
@given(st.integers(1, 150).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_each_limit_solves_its_tail_equation_exactly(case: tuple[int, int]) -> None:
    x, n = case
    low, high = clopper_pearson(x, n)
    if x > 0:
        assert float(binomial_tail(x, n, low, upper=True)) == pytest.approx(ALPHA / 2, rel=1e-9)
    if x < n:
        assert float(binomial_tail(x, n, high, upper=False)) == pytest.approx(ALPHA / 2, rel=1e-9)


@pytest.mark.parametrize("n", [5, 20, 50])
def test_coverage_is_at_least_the_confidence_at_every_p(n: int) -> None:
    """Exact: Σ over the outcomes whose interval covers p of P(X = x | p), on a grid of p."""
    intervals = [clopper_pearson(x, n) for x in range(n + 1)]
    for p in np.linspace(0.001, 0.999, 211):
        covered = sum(comb(n, x) * p**x * (1 - p) ** (n - x) for x, (lo, hi) in enumerate(intervals) if lo <= p <= hi)
        assert covered >= 0.95 - 1e-12, (n, p, covered)


def test_no_trials_know_nothing_and_nonsense_is_refused() -> None:
    assert clopper_pearson(0, 0) == (0.0, 1.0)
    for x, n in ((1, 0), (-1, 3), (4, 3)):
        with pytest.raises(ValueError):
            clopper_pearson(x, n)
    with pytest.raises(ValueError):
        clopper_pearson(1, 3, confidence=1.0)


def test_the_largest_count_an_evidence_file_may_hold_is_computed_exactly() -> None:
    x = MAX_RUNS // 20
    low, high = clopper_pearson.__wrapped__(x, MAX_RUNS)
    assert low < x / MAX_RUNS < high and high - low < 3e-4


# ── Cohen's κ ───────────────────────────────────────────────────────────────


def kappa_of(p: np.ndarray) -> float:
    """κ of cell probabilities (their marginals taken as they are: the delta method needs κ off the simplex)."""
    total = p.sum()
    observed = np.trace(p) / total
    chance = float((p.sum(axis=1) * p.sum(axis=0)).sum()) / total**2
    return float((observed - chance) / (1 - chance))


def delta_method_se(table: list[list[int]]) -> float:
    """sqrt(∇κᵀ Σ ∇κ / n), Σ = diag(p) − ppᵀ the multinomial covariance of one draw, ∇κ by central differences."""
    counts = np.array(table, dtype=float)
    n = counts.sum()
    p = (counts / n).ravel()
    shape = counts.shape
    gradient = np.zeros_like(p)
    for i in range(p.size):
        step = np.zeros_like(p)
        step[i] = 1e-6
        gradient[i] = (kappa_of((p + step).reshape(shape)) - kappa_of((p - step).reshape(shape))) / 2e-6
    covariance = np.diag(p) - np.outer(p, p)
    return sqrt(float(gradient @ covariance @ gradient) / n)


@pytest.mark.parametrize("table", [
    [[20, 5], [10, 15]], [[88, 14], [10, 40]], [[3, 1], [2, 9]], [[50, 0], [3, 7]],
    [[22, 2, 2], [5, 7, 14], [0, 2, 36]],
])
def test_kappa_se_is_the_delta_method_variance(table: list[list[int]]) -> None:
    kappa = cohen_kappa(table)
    assert kappa is not None
    assert kappa.value == pytest.approx(kappa_of(np.array(table, dtype=float)), abs=1e-12)
    assert kappa.se == pytest.approx(delta_method_se(table), rel=1e-6)
    half = 1.959963984540054 * kappa.se
    assert (kappa.low, kappa.high) == pytest.approx((max(-1, kappa.value - half), min(1, kappa.value + half)),
                                                    abs=1e-12)


def test_kappa_by_hand() -> None:
    """p_o = 35/50 = 0.7; p_e = (25·30 + 25·20)/50² = 0.5; κ = 0.2/0.5."""
    kappa = cohen_kappa([[20, 5], [10, 15]])
    assert kappa is not None and (kappa.observed, kappa.chance, kappa.value) == pytest.approx((0.7, 0.5, 0.4))


def test_kappa_at_its_edges() -> None:
    perfect = cohen_kappa([[30, 0], [0, 20]])
    assert perfect is not None and (perfect.value, perfect.se, perfect.low, perfect.high) == (1.0, 0.0, 1.0, 1.0)
    opposite = cohen_kappa([[0, 5], [5, 0]])
    assert opposite is not None and opposite.value == -1.0 and opposite.low == -1.0
    assert cohen_kappa([[9, 0], [0, 0]]) is None  # both raters used one category: chance agreement is 1
    assert cohen_kappa([[0, 0], [0, 0]]) is None
    for bad in ([[1, 2, 3]], [[1, -1], [0, 2]], [[1]]):
        with pytest.raises(ValueError):
            cohen_kappa(bad)


def test_a_small_sample_interval_is_cut_to_kappas_range() -> None:
    kappa = cohen_kappa([[1, 1], [0, 1]])
    assert kappa is not None and -1.0 <= kappa.low < kappa.value < kappa.high <= 1.0

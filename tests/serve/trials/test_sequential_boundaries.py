"""The e-process at its bounds, against references computed another way: the mixture's grid and
weights from their definition, the e-value of several looks as a plain product, and every bound a
batch, a mixture and the Bonferroni split check."""

from __future__ import annotations

import math

import numpy as np
import pytest

from serve.trials.sequential import (
    DEFAULT_MIXTURE,
    Batch,
    EProcess,
    Mixture,
    bonferroni,
    half_normal_mixture,
    log_likelihood_ratios,
    log_mixture,
    one_sample,
    two_sample,
)


def reference_mixture(scale: float, max_ratio: float, points: int) -> tuple[list[float], list[float]]:
    """Midpoints of (0, log max_ratio] in `points` cells, half-normal(scale) density, normalised."""
    width = math.log(max_ratio) / points
    grid = [(i + 0.5) * width for i in range(points)]
    density = [math.exp(-0.5 * (g / scale) ** 2) for g in grid]
    return grid, [d / sum(density) for d in density]


@pytest.mark.parametrize("args", [(), (0.3, 5.0, 8), (2.0, 100.0, 3), (0.7, 20.0, 1)])
def test_half_normal_mixture_is_its_definition(args: tuple[float, ...]) -> None:
    mixture = half_normal_mixture(*args)  # type: ignore[arg-type]
    grid, weights = reference_mixture(*(args or (0.7, 20.0, 64)))  # type: ignore[arg-type]
    assert mixture.log_ratios == pytest.approx(grid, rel=1e-12)
    assert [math.exp(w) for w in mixture.log_weights] == pytest.approx(weights, rel=1e-9)
    if not args:
        assert mixture == DEFAULT_MIXTURE


def reference_e(looks: list[tuple[int, int, float]], mixture: Mixture) -> float:
    """Σ_j w_j Π_looks (p_j/p0)^x ((1 − p_j)/(1 − p0))^(n − x), p_j = ψ_j p0 / (ψ_j p0 + 1 − p0)."""
    total = 0.0
    for log_ratio, log_weight in zip(mixture.log_ratios, mixture.log_weights, strict=True):
        psi, product = math.exp(log_ratio), 1.0
        for bad, n, p0 in looks:
            p = psi * p0 / (psi * p0 + 1 - p0)
            product *= (p / p0) ** bad * ((1 - p) / (1 - p0)) ** (n - bad)
        total += math.exp(log_weight) * product
    return total


def test_the_e_value_of_several_looks_is_the_mixture_of_products() -> None:
    looks = [(3, 5, 0.5), (0, 4, 0.2), (7, 9, 0.6), (1, 1, 0.1)]
    process = EProcess()
    for bad, n, p0 in looks:
        process = process.update(Batch(bad, n, p0))
    assert process.e_value == pytest.approx(reference_e(looks, DEFAULT_MIXTURE), rel=1e-9)
    assert process.events == 19
    small = Mixture((0.2, 1.5), (math.log(0.25), math.log(0.75)))
    process = EProcess(small)
    for bad, n, p0 in looks:
        process = process.update(Batch(bad, n, p0))
    assert process.e_value == pytest.approx(reference_e(looks, small), rel=1e-12)
    assert process.log_e == pytest.approx(math.log(reference_e(looks, small)), rel=1e-12)


def test_log_likelihood_ratios_and_mixture_broadcast() -> None:
    terms = log_likelihood_ratios([2, 0], [3, 4], [0.5, 0.25], (0.1, 1.0))
    assert terms.shape == (2, 2)
    for i, (x, n, q) in enumerate([(2, 3, 0.5), (0, 4, 0.25)]):
        for j, r in enumerate((0.1, 1.0)):
            p = math.exp(r) * q / (math.exp(r) * q + 1 - q)
            assert terms[i, j] == pytest.approx(x * math.log(p / q) + (n - x) * math.log((1 - p) / (1 - q)), rel=1e-12)
    mixture = Mixture((0.1, 1.0), (math.log(0.5), math.log(0.5)))
    mixed = log_mixture(terms, mixture)
    assert mixed.shape == (2,)
    for i in range(2):  # each row is its own trial's mixture
        assert mixed[i] == pytest.approx(math.log(0.5 * math.exp(terms[i, 0]) + 0.5 * math.exp(terms[i, 1])),
                                         rel=1e-12)


def test_an_enormous_e_value_is_capped_not_an_overflow() -> None:
    process = EProcess(Mixture((0.5,), (0.0,)), (800.0,))
    assert process.log_e == 800.0 and process.e_value == math.exp(700.0)
    assert EProcess(Mixture((0.5,), (0.0,)), (700.0,)).e_value == math.exp(700.0)


def test_rejects_at_exactly_one_over_alpha() -> None:
    flat = Mixture((0.5,), (0.0,))
    for alpha in (0.01, 0.05, 1 / 3):
        assert EProcess(flat, (-math.log(alpha),)).rejects(alpha)
        assert not EProcess(flat, (math.nextafter(-math.log(alpha), 0),)).rejects(alpha)


def test_a_look_without_events_changes_nothing_and_one_event_does() -> None:
    start = EProcess()
    assert start.update(None) is start and start.update(Batch(0, 0, 0.5)) is start
    moved = start.update(Batch(1, 1, 0.5))
    assert moved.events == 1 and moved.log_e > 0
    assert start.log_terms == tuple(0.0 for _ in DEFAULT_MIXTURE.log_ratios) and start.log_e == pytest.approx(0.0)


@pytest.mark.parametrize("bad, total, p0, ok", [
    (0, 0, 0.5, True), (3, 3, 0.5, True), (4, 3, 0.5, False), (-1, 3, 0.5, False),
    (1, 2, 0.0, False), (1, 2, 1.0, False), (1, 2, 1e-12, True), (1, 2, 1 - 1e-12, True),
])
def test_batch_bounds(bad: int, total: int, p0: float, ok: bool) -> None:
    if ok:
        assert Batch(bad, total, p0).total == total
    else:
        with pytest.raises(ValueError):
            Batch(bad, total, p0)


@pytest.mark.parametrize("candidate, control, none", [(0, 5, True), (5, 0, True), (-1, 5, True), (1, 1, False),
                                                      (0.001, 5, False)])
def test_two_sample_needs_exposure_on_both_sides(candidate: float, control: float, none: bool) -> None:
    batch = two_sample(2, 3, candidate, control)
    assert (batch is None) is none
    if batch is not None:
        assert batch == Batch(2, 5, candidate / (candidate + control))


def test_two_sample_weights_the_candidate_by_the_margin() -> None:
    assert two_sample(1, 1, 30, 60, margin=0.5) == Batch(1, 2, 45 / 105)
    assert two_sample(1, 1, 30, 60) == Batch(1, 2, 30 / 90)
    assert one_sample(2, 9, 0.3) == Batch(2, 9, 0.3)


SIZES = "a mixture needs as many weights as ratios, and at least one"
ONE_SIDED = r"every alternative ratio must be > 1 \(the test is one-sided\)"
SUM = "mixture weights must sum to 1"


@pytest.mark.parametrize("ratios, weights, message", [
    ((), (), SIZES), ((0.5,), (), SIZES), ((0.5, 1.0), (0.0,), SIZES),
    ((0.0,), (0.0,), ONE_SIDED), ((-0.1,), (0.0,), ONE_SIDED), ((0.5, 0.0), (math.log(0.5),) * 2, ONE_SIDED),
    ((0.5, 1.0), (math.log(0.5), math.log(0.6)), SUM), ((0.5,), (1e-8,), SUM),
])
def test_mixture_bounds(ratios: tuple[float, ...], weights: tuple[float, ...], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        Mixture(ratios, weights)


def test_mixtures_at_their_bounds() -> None:
    Mixture((1e-9,), (0.0,))
    Mixture((0.5,), (1e-10,))  # the weights' log-sum within 1e-9 of 0
    Mixture((0.5, 1.0, 2.0), tuple(math.log(w) for w in (0.1, 0.2, 0.7)))


def test_an_e_process_state_must_match_its_mixture() -> None:
    with pytest.raises(ValueError, match="^an e-process state must have one term per alternative of its mixture$"):
        EProcess(DEFAULT_MIXTURE, (0.0, 0.0))
    assert len(EProcess(Mixture((0.5, 1.0), (math.log(0.5), math.log(0.5)))).log_terms) == 2


@pytest.mark.parametrize("signals", [1, 2, 3, 7])
def test_bonferroni_splits_alpha_and_needs_a_signal(signals: int) -> None:
    assert bonferroni(0.01, signals) == 0.01 / signals
    with pytest.raises(ValueError, match="^at least one enforced signal is needed to split α$"):
        bonferroni(0.01, 0)


def test_weights_of_no_mass_at_all_are_no_mixture() -> None:
    """All weights exp(−∞) = 0: their log-sum is −∞ (not a division by zero), so not 1."""
    with pytest.raises(ValueError, match="sum to 1"):
        Mixture((0.5, 1.0), (-math.inf, -math.inf))


def test_each_row_of_a_simulation_is_shifted_by_its_own_maximum() -> None:
    """A trial whose evidence sits far below another's must not underflow to −∞ beside it."""
    mixture = Mixture((0.1, 1.0), (math.log(0.5), math.log(0.5)))
    mixed = log_mixture(np.array([[0.0, 0.0], [-800.0, -800.0]]), mixture)
    assert list(mixed) == [0.0, -800.0]


@pytest.mark.parametrize("bad, total, p0, message", [
    (3, 2, 0.5, r"^bad events 3 must lie in \[0, 2\]$"), (-1, 2, 0.5, r"^bad events -1 must lie in \[0, 2\]$"),
    (1, 2, 0.0, r"^null share p0 = 0.0 must lie in \(0, 1\)$"), (1, 2, 1.0, r"^null share p0 = 1.0 must lie in \(0, 1\)$"),
])
def test_a_batch_that_is_no_count_of_a_share_says_which_number_is_wrong(bad: int, total: int, p0: float,
                                                                        message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Batch(bad, total, p0)

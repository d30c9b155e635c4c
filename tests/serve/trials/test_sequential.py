"""The sequential test: its e-value against independently computed likelihoods and integrals,
its direction, and its calibration under repeated looks (seeded simulation)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from serve.trials.sequential import (
    Batch,
    EProcess,
    Mixture,
    bonferroni,
    half_normal_mixture,
    one_sample,
    two_sample,
)
from serve.trials.simulation import simulate


def binomial_pmf(x: int, n: int, p: float) -> float:
    return math.comb(n, x) * p**x * (1 - p) ** (n - x)


def test_a_point_alternative_is_the_binomial_likelihood_ratio_over_every_look() -> None:
    psi, p0s = 2.0, (0.5, 0.4, 0.6)
    looks = [(3, 5), (7, 9), (1, 4)]
    process = EProcess(Mixture((math.log(psi),), (0.0,)))
    expected = 1.0
    for (x, n), p0 in zip(looks, p0s, strict=True):
        process = process.update(Batch(x, n, p0))
        p = psi * p0 / (psi * p0 + 1 - p0)
        expected *= binomial_pmf(x, n, p) / binomial_pmf(x, n, p0)
    assert process.e_value == pytest.approx(expected, rel=1e-12)
    assert process.events == 18


def test_the_default_mixture_matches_direct_integration_over_its_continuous_prior() -> None:
    # Half-normal(0.7) on log ψ over (0, log 20], integrated with a fine trapezoid rule.
    x, n, p0 = 14, 20, 0.5
    grid = np.linspace(0.0, math.log(20.0), 200_001)
    density = np.exp(-0.5 * (grid / 0.7) ** 2)
    p = np.exp(grid) * p0 / (np.exp(grid) * p0 + 1 - p0)
    lr = (p / p0) ** x * ((1 - p) / (1 - p0)) ** (n - x)
    expected = np.trapezoid(density * lr, grid) / np.trapezoid(density, grid)
    got = EProcess().update(Batch(x, n, p0)).e_value
    assert got == pytest.approx(expected, rel=2e-3)


def test_two_sample_uses_measured_exposure_and_the_margin() -> None:
    batch = two_sample(candidate_bad=3, control_bad=5, candidate_exposure=100, control_exposure=300, margin=0.5)
    assert batch == Batch(3, 8, 150 / 450)
    assert two_sample(2, 1, 0, 10) is None
    assert one_sample(4, 50, 0.1) == Batch(4, 50, 0.1)


@given(n=st.integers(1, 200), p0=st.floats(0.05, 0.95))
def test_more_of_the_bad_events_on_the_candidate_means_more_evidence(n: int, p0: float) -> None:
    values = [EProcess().update(Batch(x, n, p0)).log_e for x in range(n + 1)]
    assert all(a < b for a, b in itertools.pairwise(values))
    assert values[0] < 0.0  # a candidate with none of the bad events only loses evidence


def test_a_better_candidate_never_aborts_however_long_it_runs() -> None:
    process = EProcess()
    for _ in range(500):
        process = process.update(Batch(2, 10, 0.5))
    assert process.log_e < 0 and not process.rejects(0.01)


def test_an_empty_look_changes_nothing() -> None:
    process = EProcess().update(Batch(5, 6, 0.5))
    assert process.update(None) == process
    assert process.update(Batch(0, 0, 0.5)) == process


def test_mixture_and_batch_refuse_what_would_break_validity() -> None:
    with pytest.raises(ValueError):
        Mixture((0.0,), (0.0,))  # ratio 1 is the null, not an alternative
    with pytest.raises(ValueError):
        Mixture((0.5, 1.0), (math.log(0.5), math.log(0.6)))
    with pytest.raises(ValueError):
        Batch(3, 2, 0.5)
    with pytest.raises(ValueError):
        Batch(0, 2, 1.0)
    assert math.exp(np.logaddexp.reduce(half_normal_mixture(points=8).log_weights)) == pytest.approx(1.0)
    assert bonferroni(0.01, 4) == 0.0025


def lower_bound(successes: int, trials: int) -> float:
    """Wilson 99.9% lower bound for a simulated rate (z = 3.29)."""
    z, p = 3.29, successes / trials
    centre = p + z * z / (2 * trials)
    spread = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    return (centre - spread) / (1 + z * z / trials)


@pytest.mark.parametrize("alpha", [0.05, 0.01])
def test_a_a_trials_abort_at_most_alpha_of_the_time_over_many_looks_and_a_naive_z_test_does_not(
        alpha: float) -> None:
    sim = simulate(np.random.default_rng(16), trials=4000, looks=200, exposure=100, rate=0.02, alpha=alpha)
    aborted, naive = int(sim.aborted.sum()), int(sim.naive_aborted.sum())
    assert lower_bound(aborted, sim.trials) <= alpha  # the e-process keeps its promise
    assert lower_bound(naive, sim.trials) > alpha  # repeated significance testing breaks it


def test_a_doubled_error_rate_is_caught_within_a_few_hundred_bad_events() -> None:
    sim = simulate(np.random.default_rng(7), trials=500, looks=200, exposure=100, rate=0.02, ratio=2.0, alpha=0.01)
    assert sim.abort_rate > 0.99
    assert sim.delay(0.5) < 150 and sim.delay(0.9) < 300

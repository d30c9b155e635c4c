"""An always-valid sequential test that a candidate produces more bad events than it should.

A trial is looked at every interval, so a fixed-sample test checked again and again would
abort healthy candidates far more often than its α (a one-sided z-test at α = 0.01 checked
over 200 looks aborts about a fifth of A/A trials). This module computes an **e-process**
instead: a non-negative quantity whose expectation under the null is at most 1 at every look,
so by Ville's inequality P(E_t ever ≥ 1/α) ≤ α however often, and whenever, one looks.

Each look adds a `Batch`: `n` bad events of which `x` fell in the candidate cohort, with `p0`
the share the candidate should get under the null. Two uses:

* two cohorts (`two_sample`): conditional on the total bad events, under "the candidate's rate
  is at most (1 + margin) × the control's" each event is the candidate's with probability at
  most p0 = (1+m)·e_c / ((1+m)·e_c + e_k) for exposures e_c, e_k (Poisson thinning; for fixed
  request counts the count is hypergeometric, which is dominated in convex order by the
  binomial — Hoeffding 1963 — so the same bound holds). Exposure is measured per look, so the
  cohorts' sizes may change between steps;
* one rate (`one_sample`): x bad of n, with p0 the largest tolerated rate (shadow disagreement).

The alternative is a rate (odds) ratio ψ > 1 over the null, p(ψ) = ψ·p0 / (ψ·p0 + 1 − p0), and
the e-process is the mixture likelihood ratio E_t = Σ_j w_j Π_looks (p(ψ_j)/p0)^x
((1−p(ψ_j))/(1−p0))^(n−x) over a fixed grid of ratios with weights summing to 1 (a
half-normal prior on log ψ, discretised). A mixture of test martingales is one, so the grid is
not an approximation to validity: it *is* the prior. Only ψ > 1 is mixed over, so the test is
one-sided — a candidate that is better than control only drives E_t down, never to an abort.
Pure: no I/O, no globals; log space throughout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray


@dataclass(frozen=True)
class Batch:
    """One look's new events: `bad` of `total` fell on the tested side; the null share is `p0`."""

    bad: int
    total: int
    p0: float

    def __post_init__(self) -> None:
        if not 0 <= self.bad <= self.total:
            raise ValueError(f"bad events {self.bad} must lie in [0, {self.total}]")
        if not 0.0 < self.p0 < 1.0:
            raise ValueError(f"null share p0 = {self.p0} must lie in (0, 1)")


def two_sample(candidate_bad: int, control_bad: int, candidate_exposure: float, control_exposure: float,
               margin: float = 0.0) -> Batch | None:
    """The batch for "candidate rate ≤ (1 + margin) × control rate"; None when a cohort had no exposure
    (its events then say nothing about the ratio)."""
    if candidate_exposure <= 0 or control_exposure <= 0:
        return None
    weighted = (1.0 + margin) * candidate_exposure
    return Batch(candidate_bad, candidate_bad + control_bad, weighted / (weighted + control_exposure))


def one_sample(bad: int, total: int, max_rate: float) -> Batch:
    """The batch for "the rate of bad events is at most `max_rate`"."""
    return Batch(bad, total, max_rate)


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    if top == -math.inf:
        return -math.inf
    return top + math.log(sum(math.exp(v - top) for v in values))


@dataclass(frozen=True)
class Mixture:
    """The prior over the alternative: log rate ratios (all > 0) and their log weights (summing to 1)."""

    log_ratios: tuple[float, ...]
    log_weights: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.log_ratios) != len(self.log_weights) or not self.log_ratios:
            raise ValueError("a mixture needs as many weights as ratios, and at least one")
        if min(self.log_ratios) <= 0:
            raise ValueError("every alternative ratio must be > 1 (the test is one-sided)")
        if abs(_logsumexp(self.log_weights)) > 1e-9:
            raise ValueError("mixture weights must sum to 1")


def half_normal_mixture(scale: float = 0.7, max_ratio: float = 20.0, points: int = 64) -> Mixture:
    """log ψ ~ half-normal(scale) on (0, log max_ratio], on a midpoint grid, renormalised.

    The default puts its mass around ratios 1.2–3: the regressions worth aborting for.
    """
    top = math.log(max_ratio)
    width = top / points
    grid = tuple((i + 0.5) * width for i in range(points))
    raw = [-0.5 * (g / scale) ** 2 for g in grid]
    total = _logsumexp(raw)
    return Mixture(grid, tuple(r - total for r in raw))


DEFAULT_MIXTURE = half_normal_mixture()


def log_likelihood_ratios(bad: ArrayLike, total: ArrayLike, p0: ArrayLike,
                          log_ratios: Sequence[float]) -> NDArray[np.float64]:
    """log (p/p0)^x ((1−p)/(1−p0))^(n−x), p = ψ·p0/(ψ·p0 + 1 − p0), for every ψ = exp(log_ratios).

    Broadcasts: inputs of shape S give shape S + (len(log_ratios),), so a simulation of many
    trials uses the same arithmetic as one trial.
    """
    ratios = np.asarray(log_ratios, dtype=np.float64)
    x, n, q = (np.asarray(a, dtype=np.float64)[..., None] for a in (bad, total, p0))
    # log p − log p0 = log ψ − log(ψ p0 + 1 − p0); log(1−p) − log(1−p0) = −log(ψ p0 + 1 − p0)
    result: NDArray[np.float64] = x * ratios - n * np.log(np.exp(ratios) * q + 1.0 - q)
    return result


def log_mixture(log_terms: NDArray[np.float64], mixture: Mixture) -> NDArray[np.float64]:
    """log Σ_j w_j exp(log_terms[..., j]): the e-process's log value for summed log likelihood ratios."""
    weighted = log_terms + np.asarray(mixture.log_weights)
    top = weighted.max(axis=-1, keepdims=True)
    result: NDArray[np.float64] = (top + np.log(np.exp(weighted - top).sum(axis=-1, keepdims=True)))[..., 0]
    return result


@dataclass(frozen=True)
class EProcess:
    """The running mixture: per alternative, the summed log likelihood ratio of every look so far.

    Immutable and plain (`log_terms` is a tuple of floats) so a trial can persist it and resume.
    """

    mixture: Mixture = DEFAULT_MIXTURE
    log_terms: tuple[float, ...] = field(default=())
    events: int = 0  # bad events seen so far (both cohorts)

    def __post_init__(self) -> None:
        if not self.log_terms:
            object.__setattr__(self, "log_terms", tuple(0.0 for _ in self.mixture.log_ratios))
        if len(self.log_terms) != len(self.mixture.log_ratios):
            raise ValueError("an e-process state must have one term per alternative of its mixture")

    def update(self, batch: Batch | None) -> EProcess:
        if batch is None or batch.total == 0:
            return self
        step = log_likelihood_ratios(batch.bad, batch.total, batch.p0, self.mixture.log_ratios)
        terms = tuple(float(t + s) for t, s in zip(self.log_terms, step, strict=True))
        return EProcess(self.mixture, terms, self.events + batch.total)

    @property
    def log_e(self) -> float:
        return float(log_mixture(np.asarray(self.log_terms), self.mixture))

    @property
    def e_value(self) -> float:
        return math.exp(min(self.log_e, 700.0))

    def rejects(self, alpha: float) -> bool:
        """Whether the evidence has reached 1/α (Ville: under the null, ever with probability ≤ α)."""
        return self.log_e >= -math.log(alpha)


def bonferroni(alpha: float, signals: int) -> float:
    """The α each of `signals` enforced tests gets so that any false abort has probability ≤ α."""
    if signals < 1:
        raise ValueError("at least one enforced signal is needed to split α")
    return alpha / signals

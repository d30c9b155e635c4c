"""Simulated calibration of the sequential test: A/A false aborts and detection delays.

Both cohorts get Poisson exposure each look and bad events at a rate (the candidate's scaled
by `ratio`); the e-process sees each look's batch, exactly as a trial does. A naive one-sided
two-proportion z-test on the cumulative counts, checked at the same looks, is run alongside
to show what repeated looking does to a fixed-sample test. Pure apart from the caller's RNG.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from serve.trials.sequential import (
    DEFAULT_MIXTURE,
    Mixture,
    log_likelihood_ratios,
    log_mixture,
)


@dataclass(frozen=True)
class Simulation:
    trials: int
    looks: int
    alpha: float
    aborted: NDArray[np.bool_]  # per trial: the e-process reached 1/α at some look
    events_at_abort: NDArray[np.float64]  # bad events (both cohorts) when it did; nan otherwise
    naive_aborted: NDArray[np.bool_]  # per trial: the repeated z-test crossed at some look

    @property
    def abort_rate(self) -> float:
        return float(self.aborted.mean())

    @property
    def naive_abort_rate(self) -> float:
        return float(self.naive_aborted.mean())

    def delay(self, quantile: float) -> float:
        """Bad events needed to abort, at this quantile of the trials that aborted."""
        hit = self.events_at_abort[self.aborted]
        return float(np.quantile(hit, quantile)) if hit.size else math.nan


def _z_quantile(alpha: float) -> float:
    """The one-sided normal critical value z with P(Z > z) = α, by bisection on erfc."""
    low, high = 0.0, 10.0
    for _ in range(100):
        mid = (low + high) / 2
        if 0.5 * math.erfc(mid / math.sqrt(2)) > alpha:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def simulate(rng: np.random.Generator, trials: int, looks: int, exposure: float, rate: float, ratio: float = 1.0,
             alpha: float = 0.01, margin: float = 0.0, mixture: Mixture = DEFAULT_MIXTURE) -> Simulation:
    """`trials` independent trials of `looks` looks, each cohort with Poisson(`exposure`) requests per look."""
    shape = (trials, looks)
    cand_n = rng.poisson(exposure, shape)
    ctrl_n = rng.poisson(exposure, shape)
    cand_x = rng.binomial(cand_n, min(rate * ratio, 1.0))
    ctrl_x = rng.binomial(ctrl_n, rate)
    seen = (cand_n > 0) & (ctrl_n > 0)
    weighted = (1.0 + margin) * cand_n
    p0 = np.where(seen, weighted / np.maximum(weighted + ctrl_n, 1), 0.5)
    total = np.where(seen, cand_x + ctrl_x, 0)
    terms = np.zeros((trials, len(mixture.log_ratios)))
    crossed = np.zeros(shape, dtype=bool)
    for look in range(looks):  # one look at a time keeps memory at trials × alternatives
        terms += log_likelihood_ratios(np.where(seen, cand_x, 0)[:, look], total[:, look], p0[:, look],
                                       mixture.log_ratios)
        crossed[:, look] = log_mixture(terms, mixture) >= -math.log(alpha)
    aborted: NDArray[np.bool_] = np.asarray(crossed.any(axis=1))
    first = crossed.argmax(axis=1)
    events = np.cumsum(cand_x + ctrl_x, axis=1)
    events_at_abort = np.where(aborted, events[np.arange(trials), first], np.nan).astype(np.float64)
    # The naive test: pooled two-proportion z on cumulative counts, one-sided, at every look.
    cx, cn, kx, kn = (np.cumsum(a, axis=1) for a in (cand_x, cand_n, ctrl_x, ctrl_n))
    pooled = (cx + kx) / np.maximum(cn + kn, 1)
    se = np.sqrt(pooled * (1 - pooled) * (1 / np.maximum(cn, 1) + 1 / np.maximum(kn, 1)))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(se > 0, (cx / np.maximum(cn, 1) - kx / np.maximum(kn, 1)) / se, 0.0)
    naive: NDArray[np.bool_] = np.asarray((z > _z_quantile(alpha)).any(axis=1))
    return Simulation(trials, looks, alpha, aborted, events_at_abort, naive)

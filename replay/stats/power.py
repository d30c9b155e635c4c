"""Power of the gate's paired test, the decisions it needs, and what a suite can detect (DESIGN §10).

Pure: no I/O. The model: each decision is, independently, a win (only the candidate right) with
probability π₊, a loss with π₋, concordant otherwise. A pilot fixes the discordance d = π₊ + π₋;
an effect of E points is 100·(π₊ − π₋) = 100·d·(2q − 1), where q = π₊ / d is the share of the
discordant pairs the candidate wins. Among N decisions the number of discordant pairs is
n ~ Binomial(N, d), and of those the wins are W ~ Binomial(n, q).

Detecting the effect means the gates' exact two-sided sign test (`paired.sign_test`) rejects at α
in the candidate's favour (W > L). Its rejection region is computed with the test's own p-value
(`paired.sign_test_p`), so power here and a verdict there cannot disagree at a boundary. Power at n
pairs is exact; power at N decisions is Σₙ P(n | N) · power(n), summed where P(n | N) is not
negligible (beyond 10 standard deviations and 10 pairs of the mean).

The sign test's power is not monotone in n (8 pairs at α = 0.05 reject only at 8/0, 6 pairs at
6/0 already) and the mixture over n keeps a little of that saw-tooth in N. `decisions_needed`
therefore reports the smallest N from which power stays at or above the target through 2N (or the
search cap), and separately the first N that reaches it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import ceil, floor, log, sqrt

import numpy as np
import numpy.typing as npt

from replay.stats.paired import rejects, sign_test_p

MDE_TOLERANCE_POINTS = 0.001
_WINDOW_SDS = 10.0
_WINDOW_PAIRS = 10

Floats = npt.NDArray[np.float64]


def check_levels(alpha: float, power: float | None = None) -> None:
    """α and a target power are probabilities strictly between 0 and 1."""
    if not 0 < alpha < 1:
        raise ValueError(f"α must be in (0, 1), got {alpha}")
    if power is not None and not 0 < power < 1:
        raise ValueError(f"power must be in (0, 1), got {power}")


def win_share(effect: float, discordance: float) -> float:
    """q: the share of discordant pairs the candidate must win for a gain of `effect` points."""
    if not 0 < discordance <= 1:
        raise ValueError(f"discordance must be in (0, 1], got {discordance}: no discordant pairs, no paired test")
    if effect <= 0:
        raise ValueError(f"the effect to plan for must be a gain (> 0 points), got {effect}")
    # Compared as shares, not points: 100 · (29/100) is 28.999999999999996, and would refuse +29 points.
    if effect / 100 > discordance:
        raise ValueError(f"a gain of {effect:.2f} points is impossible at discordance {discordance:.4f}: "
                         f"at most {100 * discordance:.2f} points (every discordant pair a win)")
    return (1 + effect / 100 / discordance) / 2


def noisy_discordance(signal: float, noise: float) -> float:
    """The discordance a comparison shows when the engine's noise adds to its signal.

    The noise model: with nothing changed, a fraction `noise` of decisions changes outcome (the A/A
    discordance); noise turns a concordant pair discordant with that probability, a win or a loss
    alike, and leaves a discordant pair as it is. So d = s + η·(1 − s), and the effect in points is
    unchanged: noise adds discordant pairs symmetrically, so at the same effect the win share falls
    towards one half and the minimum detectable effect grows."""
    _probabilities(signal=signal, noise=noise)
    return signal + noise * (1 - signal)


def signal_discordance(discordance: float, noise: float) -> float:
    """The inverse of `noisy_discordance`: the discordance without the noise, s = (d − η) / (1 − η),
    0 when the comparison's discordance is within the noise floor."""
    _probabilities(discordance=discordance, noise=noise)
    if noise >= 1:
        return 0.0
    return max(0.0, (discordance - noise) / (1 - noise))


def _probabilities(**values: float) -> None:
    for name, value in values.items():
        if not 0 <= value <= 1:
            raise ValueError(f"{name} must be in [0, 1], got {value}")


def effect_points(discordance: float, q: float) -> float:
    """The gain in points of winning a share q of discordant pairs at this discordance."""
    return 100 * discordance * (2 * q - 1)


@lru_cache(maxsize=16)
def critical_losses(n_max: int, alpha: float) -> tuple[int, ...]:
    """For n = 0 … n_max discordant pairs, the most losses at which the sign test still rejects at
    α in the candidate's favour (−1: no split of n pairs rejects).

    Walks n upward with exact integer tails T(n, k) = Σ_{j ≤ k} C(n, j): T(n+1, k) = 2T(n, k) − C(n, k),
    and raises k while the test's p-value of a k-loss split is ≤ α (the critical value never falls
    as n grows). α < 1 keeps k below n / 2, so a rejecting split always has more wins than losses.
    """
    check_levels(alpha)
    critical: list[int] = []
    k, tail, c_k, c_next = -1, 0, 0, 1  # c_k = C(n, k), c_next = C(n, k + 1)
    for n in range(n_max + 1):
        while k + 1 <= n and rejects(sign_test_p(tail + c_next, n), alpha):
            k += 1
            tail += c_next
            c_k, c_next = c_next, c_next * (n - k) // (k + 1)
        critical.append(k)
        # step to n + 1
        tail = 2 * tail - c_k
        c_k, c_next = (c_k * (n + 1) // (n + 1 - k) if k >= 0 else 0), c_next + c_k
    return tuple(critical)


def _log_factorials(n_max: int) -> Floats:
    return np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, n_max + 1, dtype=np.float64)))))


def _powers_by_pairs(n_max: int, q: float, alpha: float, critical: tuple[int, ...] | None = None) -> Floats:
    """power(n) for n = 0 … n_max: P(L ≤ k(n)) with L ~ Binomial(n, 1 − q), k the critical losses."""
    ks = critical if critical is not None else critical_losses(n_max, alpha)
    powers = np.zeros(n_max + 1)
    if q <= 0:
        return powers
    r = 1 - q
    if r <= 0:
        return np.array([1.0 if ks[n] >= 0 else 0.0 for n in range(n_max + 1)])
    lf, log_r, log_q = _log_factorials(n_max), log(r), log(q)
    for n in range(n_max + 1):
        k = ks[n]
        if k < 0:
            continue
        losses = np.arange(k + 1)
        terms = lf[n] - lf[losses] - lf[n - losses] + losses * log_r + (n - losses) * log_q
        powers[n] = min(1.0, float(np.exp(terms).sum()))
    return powers


def _mixture(decisions: int, discordance: float, by_pairs: Floats, lf: Floats) -> float:
    """Σₙ P(n | N, d) · by_pairs[n] over the window where P(n | N, d) is not negligible."""
    if decisions == 0:
        return float(by_pairs[0])
    if discordance >= 1:
        return float(by_pairs[decisions])
    mean, sd = decisions * discordance, sqrt(decisions * discordance * (1 - discordance))
    lo = max(0, floor(mean - _WINDOW_SDS * sd - _WINDOW_PAIRS))
    hi = min(decisions, ceil(mean + _WINDOW_SDS * sd + _WINDOW_PAIRS))
    n = np.arange(lo, hi + 1)
    log_pmf = lf[decisions] - lf[n] - lf[decisions - n] + n * log(discordance) + (decisions - n) * log(1 - discordance)
    return min(1.0, float((np.exp(log_pmf) * by_pairs[lo:hi + 1]).sum()))


def _checked(discordance: float, q: float, alpha: float) -> None:
    check_levels(alpha)
    if not 0 <= discordance <= 1 or not 0 <= q <= 1:
        raise ValueError(f"discordance and win share must be in [0, 1], got {discordance}, {q}")


def power_at(decisions: int, discordance: float, q: float, alpha: float) -> float:
    """Power of the paired test on N decisions (test alone)."""
    _checked(discordance, q, alpha)
    if discordance == 0:
        return 0.0
    return _mixture(decisions, discordance, _powers_by_pairs(decisions, q, alpha), _log_factorials(decisions))


def power_curve(max_decisions: int, discordance: float, q: float, alpha: float) -> Floats:
    """Power of the paired test (test alone) at N = 0 … max_decisions."""
    _checked(discordance, q, alpha)
    if discordance == 0:
        return np.zeros(max_decisions + 1)
    by_pairs, lf = _powers_by_pairs(max_decisions, q, alpha), _log_factorials(max_decisions)
    return np.array([_mixture(n, discordance, by_pairs, lf) for n in range(max_decisions + 1)])


def gate_power(decisions: int, discordance: float, q: float, alpha: float, min_points: float) -> float:
    """Power of test + threshold: the sign test rejects in the candidate's favour AND the point
    estimate 100·(W − L)/N is at least `min_points` (the paired-gain condition on `basis = "point"`)."""
    _checked(discordance, q, alpha)
    if discordance == 0 or decisions == 0:
        return 0.0
    # the smallest W − L whose points the gate accepts, compared as the gate compares them
    need = max(0, ceil(min_points * decisions / 100) - 1)
    while 100.0 * need / decisions < min_points:
        need += 1
    critical = critical_losses(decisions, alpha)
    capped = tuple(min(k, (n - need) // 2) if n >= need else -1 for n, k in enumerate(critical))
    by_pairs = _powers_by_pairs(decisions, q, alpha, capped)
    return _mixture(decisions, discordance, by_pairs, _log_factorials(decisions))


@dataclass(frozen=True)
class Needed:
    """Decisions for the target power: `decisions`, from which power stays ≥ target through 2N
    (or the cap); `first_reaching`, the first N that reaches it (smaller where the saw-tooth dips
    back). None: not within `max_decisions`."""

    decisions: int | None
    first_reaching: int | None
    max_decisions: int


def decisions_needed(effect: float, discordance: float, alpha: float, power: float, max_decisions: int) -> Needed:
    """Decisions the paired test (test alone) needs to detect `effect` points with `power`.

    The curve is computed up to a horizon that doubles until power has stayed at or above the
    target from N through 2N (the dips of the saw-tooth shrink as N grows and power tends to 1),
    or until the cap."""
    check_levels(alpha, power)
    q = win_share(effect, discordance)
    horizon = min(max_decisions, 64)
    while True:
        curve = power_curve(horizon, discordance, q, alpha)
        reached, below = np.flatnonzero(curve >= power), np.flatnonzero(curve < power)
        first = int(reached[0]) if reached.size else None
        if curve[-1] >= power:
            stays = int(below[-1]) + 1 if below.size else 0
            if horizon >= min(max_decisions, 2 * stays):
                return Needed(stays, first, max_decisions)
            horizon = min(max_decisions, 2 * stays)
        elif horizon >= max_decisions:
            return Needed(None, first, max_decisions)
        else:
            horizon = min(max_decisions, 2 * horizon)


def minimum_detectable_effect(decisions: int, discordance: float, alpha: float, power: float) -> float | None:
    """The smallest gain in points the paired test (test alone) detects with `power` on N decisions
    at this discordance; None when even winning every discordant pair falls short (or d = 0).
    Power rises with q at fixed N and d, so bisection on q finds it (to MDE_TOLERANCE_POINTS)."""
    check_levels(alpha, power)
    _checked(discordance, 0.5, alpha)
    if discordance == 0 or decisions == 0:
        return None
    critical, lf = critical_losses(decisions, alpha), _log_factorials(decisions)

    def at(q: float) -> float:
        return _mixture(decisions, discordance, _powers_by_pairs(decisions, q, alpha, critical), lf)

    if at(1.0) < power:
        return None
    lo, hi = 0.5, 1.0
    while effect_points(discordance, hi) - effect_points(discordance, lo) > MDE_TOLERANCE_POINTS:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if at(mid) < power else (lo, mid)
    return effect_points(discordance, hi)

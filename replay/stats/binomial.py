"""The exact interval of one proportion (Clopper–Pearson 1934), pure: no I/O.

The p whose binomial tails put the observation at α/2 on each side; 0 of n and n of n have an open end at 0
or 1. A reviewer's false-pass rate (DESIGN §13) is judged on it because it never covers less than its
confidence, at any n and p: an enforce gate must not pass a reviewer on a lucky small sample, which is what a
Wald or Wilson bound allows near 0. McNemar's exact test of two reviewers on the same runs is the exact sign
test on the discordant runs (`paired.sign_test`: two-sided binomial, ½), so it is not repeated here.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from math import exp, fsum, lgamma, log, log1p

from replay.stats.paired import DEFAULT_CONFIDENCE

_BISECTIONS = 200
"""Enough halvings to reach the spacing of doubles near any root in (0, 1)."""


@lru_cache(maxsize=4096)
def clopper_pearson(successes: int, n: int, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
    """The exact two-sided interval of successes/n: low solves P(X ≥ x | low) = α/2, high solves
    P(X ≤ x | high) = α/2, X ~ Binomial(n, p); low = 0 when x = 0 and high = 1 when x = n. With no trials
    nothing is known: (0, 1). (Cached: an agreement table asks for the same counts in many scopes.)"""
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 ≤ successes ≤ n, got {successes}/{n}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    tail = (1 - confidence) / 2
    low = 0.0 if successes == 0 else _root(lambda p: _binomial_tail(successes, n, p, upper=True) - tail)
    high = 1.0 if successes == n else _root(lambda p: tail - _binomial_tail(successes, n, p, upper=False))
    return low, high


def _binomial_tail(x: int, n: int, p: float, *, upper: bool) -> float:
    """P(X ≥ x) (upper) or P(X ≤ x), X ~ Binomial(n, p), 0 < p < 1. The side away from the mean is summed
    outwards until its terms no longer count, the other side is 1 − its complement: the work is a few
    standard deviations' worth of terms, not n."""
    mean = n * p
    if upper:
        return _outward(x, n, p, 1) if x > mean else 1 - _outward(x - 1, n, p, -1)
    return _outward(x, n, p, -1) if x < mean else 1 - _outward(x + 1, n, p, 1)


def _outward(start: int, n: int, p: float, step: int) -> float:
    """Σ P(X = k) from k = `start` in the direction `step` (±1) away from the mean, to 0 or n."""
    if not 0 <= start <= n:
        return 0.0
    odds = p / (1 - p)
    term = exp(lgamma(n + 1) - lgamma(start + 1) - lgamma(n - start + 1) + start * log(p) + (n - start) * log1p(-p))
    terms, k, total = [term], start, term
    while 0 <= k + step <= n:
        # P(k+1)/P(k) = (n − k)/(k + 1) · p/q; downwards its inverse
        ratio = (n - k) / (k + 1) * odds if step > 0 else k / (n - k + 1) / odds
        term *= ratio
        k += step
        terms.append(term)
        total += term
        if ratio <= 1 and term <= 1e-17 * total:
            break
    return fsum(terms)


def _root(rising: Callable[[float], float]) -> float:
    """The root in (0, 1) of a function rising through 0 there, by bisection."""
    low, high = 0.0, 1.0
    for _ in range(_BISECTIONS):
        middle = (low + high) / 2
        if middle in (low, high):
            break
        low, high = (middle, high) if rising(middle) < 0 else (low, middle)
    return (low + high) / 2

"""The statistics of reviewer agreement (DESIGN §13), pure: no I/O.

* **Clopper–Pearson** (1934): the exact interval of one proportion, the p whose binomial tails put the
  observation at α/2 on each side; 0 of n and n of n have an open end at 0 or 1. A false-pass rate is
  judged on it because it never covers less than its confidence, at any n and p: an enforce gate must
  not pass a reviewer on a lucky small sample, which is what a Wald or Wilson bound allows near 0.
* **Cohen's κ** with the large-sample standard error of Fleiss, Cohen & Everitt (1969, Psychol Bull
  72:323), the delta-method variance of κ̂ under multinomial sampling (not the null-hypothesis SE, which
  only tests κ = 0); the interval is κ̂ ± z·SE, cut to [−1, 1]. At κ̂ = 1 the SE is 0, so the interval is a
  point: read it beside n. κ is undefined (None) when chance agreement is 1 (both raters used one category).
* **McNemar's exact test** of two reviewers on the same runs is the exact sign test on the discordant
  runs (`replay.stats.sign_test`: two-sided binomial, ½), so it is not repeated here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from math import exp, fsum, lgamma, log, log1p, sqrt

from replay.stats import DEFAULT_CONFIDENCE, z_value

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


@dataclass(frozen=True)
class Kappa:
    """Cohen's κ with its Fleiss–Cohen–Everitt standard error and the interval κ ± z·SE, cut to [−1, 1]."""

    value: float
    se: float
    low: float
    high: float
    observed: float
    """The share of runs both raters put in the same category."""
    chance: float
    """The agreement expected from the two raters' marginals alone."""


def cohen_kappa(table: Sequence[Sequence[int]], confidence: float = DEFAULT_CONFIDENCE) -> Kappa | None:
    """κ of a k×k table of counts (rows one rater, columns the other, the same categories in the same order);
    None when it is undefined: no runs, or chance agreement of 1."""
    k = len(table)
    if k < 2 or any(len(row) != k for row in table) or any(c < 0 for row in table for c in row):
        raise ValueError("κ needs a square table of at least 2×2 non-negative counts")
    n = sum(sum(row) for row in table)
    rows = [sum(row) for row in table]
    columns = [sum(table[i][j] for i in range(k)) for j in range(k)]
    if n == 0 or sum(r * c for r, c in zip(rows, columns, strict=True)) == n * n:
        return None
    p = [[c / n for c in row] for row in table]
    row_share, column_share = [r / n for r in rows], [c / n for c in columns]
    observed = fsum(p[i][i] for i in range(k))
    chance = fsum(r * c for r, c in zip(row_share, column_share, strict=True))
    kappa = (observed - chance) / (1 - chance)
    diagonal = fsum(p[i][i] * (1 - (row_share[i] + column_share[i]) * (1 - kappa)) ** 2 for i in range(k))
    off = (1 - kappa) ** 2 * fsum(p[i][j] * (column_share[i] + row_share[j]) ** 2
                                  for i in range(k) for j in range(k) if i != j)
    variance = (diagonal + off - (kappa - chance * (1 - kappa)) ** 2) / (n * (1 - chance) ** 2)
    se = sqrt(max(variance, 0.0))
    z = z_value(confidence)
    return Kappa(kappa, se, max(-1.0, kappa - z * se), min(1.0, kappa + z * se), observed, chance)

"""Cohen's κ of two raters (DESIGN §13: a reviewer against people), pure: no I/O.

The large-sample standard error of Fleiss, Cohen & Everitt (1969, Psychol Bull 72:323), the delta-method
variance of κ̂ under multinomial sampling (not the null-hypothesis SE, which only tests κ = 0); the interval is
κ̂ ± z·SE, cut to [−1, 1]. At κ̂ = 1 the SE is 0, so the interval is a point: read it beside n. κ is undefined
(None) when chance agreement is 1 (both raters used one category).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import fsum, sqrt

from replay.stats.paired import DEFAULT_CONFIDENCE, z_value


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

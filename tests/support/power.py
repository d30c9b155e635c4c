"""The exact power at one count of discordant pairs: the building block `replay.stats.power` sums, checked
on its own against enumeration."""

from __future__ import annotations

from replay.stats.power import _powers_by_pairs


def sign_test_power(n: int, q: float, alpha: float) -> float:
    """Exact power of the two-sided sign test at α on n discordant pairs, wins ~ Binomial(n, q),
    counting only rejections in the candidate's favour."""
    return float(_powers_by_pairs(n, q, alpha)[n])

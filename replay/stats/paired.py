"""Exact paired statistics for comparing two arms on the same decisions (DESIGN §4). Pure: no I/O.

Pairs are `(baseline, candidate)` booleans, one per decision. Correctness is compared with an
exact two-sided sign test on the discordant pairs and Newcombe's hybrid score interval for the
difference of paired proportions (Newcombe 1998, Stat Med 17:2635, method 10). Both are exact or
near-exact at the small strata production affords (73 decisions), where normal approximations
of a paired difference are not.

Below everything that compares arms: the analysis (`replay.analysis`), the lesson gate
(`replay.memory.lessons`), sandbox evidence and calibration.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from math import comb, sqrt
from statistics import NormalDist, fmean, median

DEFAULT_CONFIDENCE = 0.95


def sign_test(wins: int, losses: int) -> float:
    """Exact two-sided sign test: min(1, 2·P(X ≤ min(w, l))) with X ~ Binomial(w + l, ½).

    7/0 → 0.015625, 9/1 → 0.021484375, 3/7 → 0.34375, 0/0 → 1 (001, appendix A).
    """
    if wins < 0 or losses < 0:
        raise ValueError(f"discordant pair counts must be ≥ 0, got {wins}/{losses}")
    n = wins + losses
    return sign_test_p(sum(comb(n, k) for k in range(min(wins, losses) + 1)), n)


def sign_test_p(tail: int, n: int) -> float:
    """The sign test's p-value from its exact lower tail T = Σ_{k ≤ min(w, l)} C(n, k): min(1, 2T / 2ⁿ),
    correctly rounded (integer true division). Shared with `power`, whose rejection regions must be
    exactly this test's."""
    return min(1.0, 2 * tail / (1 << n))


def share_difference(x: float, m: float, y: float, n: float) -> float:
    """x/m − y/n rounded once, as (x·n − y·m) / (m·n): exact up to that one rounding for counts, so a
    difference of exactly a threshold meets it (7/200 − 5/1000 is 0.030000000000000002 as a difference
    of two rounded shares). The gates' and the lesson gate's thresholds on differences compare this."""
    return (x * n - y * m) / (m * n)


def rejects(p_value: float, alpha: float) -> bool:
    """The one rejection rule of every test at a level α here (the analysis gates' `max_p`, the lesson
    gate's `alpha`, `power`'s rejection regions): reject when p ≤ α. The exact sign test's p-values are
    discrete, and P(p ≤ α) ≤ α under the null, so rejecting at equality keeps the level."""
    return p_value <= alpha


def z_value(confidence: float = DEFAULT_CONFIDENCE) -> float:
    """The two-sided standard normal quantile for a confidence level (0.95 → 1.959964)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_interval(successes: int, n: int, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval for one proportion (no continuity correction)."""
    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 ≤ successes ≤ n and n > 0, got {successes}/{n}")
    z = z_value(confidence)
    denominator = n + z * z
    centre = (successes + z * z / 2) / denominator
    half = z * sqrt(successes * (n - successes) / n + z * z / 4) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe_paired_ci(
    *, both: int, only_candidate: int, only_baseline: int, neither: int, confidence: float = DEFAULT_CONFIDENCE
) -> tuple[float, float]:
    """CI for p(candidate) − p(baseline) on paired data, as proportions (Newcombe 1998, method 10).

    Wilson intervals for each marginal are combined with the continuity-corrected phi
    coefficient of the 2×2 table: phi uses max(ad − bc − n/2, 0) when ad > bc, ad − bc
    otherwise, and is 0 when any marginal total is 0 (the paper's degenerate cases).
    """
    a, b, c, d = both, only_candidate, only_baseline, neither
    if min(a, b, c, d) < 0:
        raise ValueError(f"cell counts must be ≥ 0, got {a}, {b}, {c}, {d}")
    n = a + b + c + d
    if n == 0:
        raise ValueError("no pairs: a paired interval needs at least one decision")
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson_interval(a + b, n, confidence)
    l2, u2 = wilson_interval(a + c, n, confidence)
    phi = _corrected_phi(a, b, c, d)
    below = sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    above = sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return p1 - p2 - below, p1 - p2 + above


def _corrected_phi(a: int, b: int, c: int, d: int) -> float:
    marginals = (a + b) * (c + d) * (a + c) * (b + d)
    if marginals == 0:
        return 0.0
    n = a + b + c + d
    cross = a * d - b * c
    if cross > n / 2:
        return (cross - n / 2) / sqrt(marginals)
    return 0.0 if cross >= 0 else cross / sqrt(marginals)


@dataclass(frozen=True)
class PairedComparison:
    """Candidate against baseline on the same N decisions; points and CI are 100 × proportions.

    `points`, `ci_low` and `ci_high` are None when N = 0 (nothing to compare).
    """

    n: int
    baseline_correct: int
    candidate_correct: int
    wins: int
    losses: int
    p_value: float
    points: float | None
    ci_low: float | None
    ci_high: float | None


def paired_comparison(pairs: Iterable[tuple[bool, bool]], confidence: float = DEFAULT_CONFIDENCE) -> PairedComparison:
    """Counts, discordant pairs (wins: only the candidate right), sign test and Newcombe CI."""
    both = wins = losses = neither = 0
    for baseline, candidate in pairs:
        if baseline and candidate:
            both += 1
        elif candidate:
            wins += 1
        elif baseline:
            losses += 1
        else:
            neither += 1
    n = both + wins + losses + neither
    points = ci_low = ci_high = None
    if n:
        points = 100.0 * (wins - losses) / n
        low, high = newcombe_paired_ci(
            both=both, only_candidate=wins, only_baseline=losses, neither=neither, confidence=confidence
        )
        ci_low, ci_high = 100.0 * low, 100.0 * high
    return PairedComparison(
        n, both + losses, both + wins, wins, losses, sign_test(wins, losses), points, ci_low, ci_high
    )


@dataclass(frozen=True)
class RepeatComparison:
    """Repeats of a historically failed action; lower is better.

    fixes: the baseline repeated and the candidate did not; regressions: the reverse.
    `relative_reduction` = (A − B) / A, None when the baseline never repeated. `points` and
    the CI are 100 × (candidate rate − baseline rate): negative is an improvement.
    """

    n: int
    baseline_repeats: int
    candidate_repeats: int
    fixes: int
    regressions: int
    p_value: float
    relative_reduction: float | None
    points: float | None
    ci_low: float | None
    ci_high: float | None

    @property
    def baseline_rate(self) -> float | None:
        return self.baseline_repeats / self.n if self.n else None

    @property
    def candidate_rate(self) -> float | None:
        return self.candidate_repeats / self.n if self.n else None


def repeat_comparison(pairs: Iterable[tuple[bool, bool]], confidence: float = DEFAULT_CONFIDENCE) -> RepeatComparison:
    """Paired comparison of repeat indicators `(baseline_repeated, candidate_repeated)`."""
    paired = paired_comparison(pairs, confidence)
    a = paired.baseline_correct
    reduction = (a - paired.candidate_correct) / a if a else None
    return RepeatComparison(
        n=paired.n,
        baseline_repeats=a,
        candidate_repeats=paired.candidate_correct,
        fixes=paired.losses,
        regressions=paired.wins,
        p_value=paired.p_value,
        relative_reduction=reduction,
        points=paired.points,
        ci_low=paired.ci_low,
        ci_high=paired.ci_high,
    )


@dataclass(frozen=True)
class Overhead:
    """Cost of the candidate relative to the baseline on the same decisions.

    A ratio is candidate / baseline and None when the baseline value is 0 (nothing measured).
    """

    n: int
    baseline_mean_tokens: float | None
    candidate_mean_tokens: float | None
    token_ratio: float | None
    baseline_mean_latency_s: float | None
    candidate_mean_latency_s: float | None
    latency_ratio: float | None
    baseline_p50_latency_s: float | None
    candidate_p50_latency_s: float | None
    p50_latency_ratio: float | None


def overhead(
    baseline_tokens: Sequence[float],
    candidate_tokens: Sequence[float],
    baseline_latency_s: Sequence[float],
    candidate_latency_s: Sequence[float],
) -> Overhead:
    """Mean completion tokens, mean and median latency of both arms, and their ratios."""
    lengths = {len(baseline_tokens), len(candidate_tokens), len(baseline_latency_s), len(candidate_latency_s)}
    if len(lengths) != 1:
        raise ValueError("overhead needs one token count and one latency per decision and arm")
    n = lengths.pop()
    if n == 0:
        return Overhead(0, *(None,) * 9)
    means = [fmean(v) for v in (baseline_tokens, candidate_tokens, baseline_latency_s, candidate_latency_s)]
    p50s = [median(baseline_latency_s), median(candidate_latency_s)]
    return Overhead(
        n,
        means[0],
        means[1],
        _ratio(means[1], means[0]),
        means[2],
        means[3],
        _ratio(means[3], means[2]),
        p50s[0],
        p50s[1],
        _ratio(p50s[1], p50s[0]),
    )


def _ratio(candidate: float, baseline: float) -> float | None:
    return candidate / baseline if baseline > 0 else None

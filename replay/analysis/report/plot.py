"""The report's plot, drawn as SVG here (no plotting library, so it renders the same everywhere)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

from core.records import KNOWN_FAILURE, ResultRecord
from replay.analysis.compare import ALL_POSITIVE, arms_of, is_held_out_positive, scope_order
from replay.analysis.stats import wilson_interval

PLOT_SVG = "plot.svg"
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")


@dataclass(frozen=True)
class Point:
    arm: str
    scope: str
    correct: int
    n: int
    low: float
    high: float

    @property
    def rate(self) -> float:
        return self.correct / self.n


def plot_points(results: Sequence[ResultRecord]) -> list[Point]:
    """Joint correctness per arm and positive stratum (and over all positives), Wilson 95% CI."""
    groups: dict[tuple[str, str], list[bool]] = {}
    for r in _plotted(results):
        groups.setdefault((r.arm, r.stratum), []).append(bool(r.score.joint_correct))
        if is_held_out_positive(r):
            groups.setdefault((r.arm, ALL_POSITIVE), []).append(bool(r.score.joint_correct))
    points = []
    for arm in arms_of(results):
        for scope in plot_scopes(results):
            values = groups.get((arm, scope))
            if values:
                low, high = wilson_interval(sum(values), len(values))
                points.append(Point(arm, scope, sum(values), len(values), low, high))
    return points


def plot_scopes(results: Sequence[ResultRecord]) -> list[str]:
    return scope_order({r.stratum for r in _plotted(results)})


def _plotted(results: Sequence[ResultRecord]) -> list[ResultRecord]:
    """Results judged by correctness (known-failure states are judged by repeats instead)."""
    return [r for r in results if r.score.joint_correct is not None and r.stratum != KNOWN_FAILURE]


def plot_svg(results: Sequence[ResultRecord]) -> str:
    """Per-stratum joint correctness of every arm with 95% Wilson intervals, as standalone SVG."""
    points = plot_points(results)
    arms, scopes = arms_of(results), plot_scopes(results)
    width, height = max(640, 170 * len(scopes) + 80), 380
    left, right, top, bottom = 60, 20, 40, 90
    plot_w, plot_h = width - left - right, height - top - bottom

    def y(rate: float) -> float:
        return top + plot_h * (1 - rate)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'id="correctness-plot" role="img" font-family="sans-serif" font-size="12">',
        "<title>Joint correctness per stratum and arm, 95% Wilson intervals</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
    ]
    for tick in range(0, 101, 25):
        ty = y(tick / 100)
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{ty:.1f}" y2="{ty:.1f}" stroke="#dddddd"/>')
        parts.append(f'<text x="{left - 6}" y="{ty + 4:.1f}" text-anchor="end">{tick}%</text>')
    parts.append(
        f'<text x="16" y="{top + plot_h / 2:.1f}" transform="rotate(-90 16 {top + plot_h / 2:.1f})" '
        'text-anchor="middle">joint correct</text>'
    )
    slot = plot_w / max(1, len(scopes))
    offsets = {arm: (i - (len(arms) - 1) / 2) * min(18.0, slot / (len(arms) + 1)) for i, arm in enumerate(arms)}
    colours = {arm: PALETTE[i % len(PALETTE)] for i, arm in enumerate(arms)}
    for i, scope in enumerate(scopes):
        cx = left + slot * (i + 0.5)
        label = "all positives" if scope == ALL_POSITIVE else scope.replace("_", " ")
        parts.append(f'<text x="{cx:.1f}" y="{top + plot_h + 18}" text-anchor="middle">{html.escape(label)}</text>')
    for p in points:
        cx = left + slot * (scopes.index(p.scope) + 0.5) + offsets[p.arm]
        colour = colours[p.arm]
        tip = (f"{p.arm}, {p.scope}: {p.correct}/{p.n} ({100 * p.rate:.1f}%), "
               f"95% CI {100 * p.low:.1f}–{100 * p.high:.1f}%")
        parts.append(
            f'<g class="point" data-arm="{html.escape(p.arm)}" data-scope="{p.scope}" data-correct="{p.correct}" '
            f'data-n="{p.n}" data-low="{p.low:.6f}" data-high="{p.high:.6f}"><title>{html.escape(tip)}</title>'
            f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(p.low):.1f}" y2="{y(p.high):.1f}" '
            f'stroke="{colour}" stroke-width="2"/>'
            f'<line x1="{cx - 4:.1f}" x2="{cx + 4:.1f}" y1="{y(p.low):.1f}" y2="{y(p.low):.1f}" stroke="{colour}"/>'
            f'<line x1="{cx - 4:.1f}" x2="{cx + 4:.1f}" y1="{y(p.high):.1f}" y2="{y(p.high):.1f}" stroke="{colour}"/>'
            f'<circle cx="{cx:.1f}" cy="{y(p.rate):.1f}" r="4" fill="{colour}"/></g>'
        )
    legend_y = height - 30
    for i, arm in enumerate(arms):
        lx = left + i * 150
        parts.append(f'<circle cx="{lx + 5}" cy="{legend_y - 4}" r="5" fill="{colours[arm]}"/>')
        parts.append(f'<text x="{lx + 15}" y="{legend_y}">{html.escape(arm)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"

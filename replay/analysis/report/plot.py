"""The report's plot, drawn as SVG here (no plotting library, so it renders the same everywhere)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup

from core.records import KNOWN_FAILURE, ResultRecord
from replay.analysis.compare import ALL_POSITIVE, arms_of, is_held_out_positive, scope_order
from replay.stats import wilson_interval

PLOT_SVG = "plot.svg"
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
CHAR_PX = 7.5
"""A generous width of one character of 12 px sans-serif: legend columns are sized from it, never clipped."""
LEGEND_ROW_PX = 20
"""The height of a row of the legend, which takes as many as it needs."""


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
    left, right, top, plot_h = 60, 20, 40, 250
    # The legend is a grid below the plot, one entry per arm (replicates too): columns as wide as the
    # longest name, as many as fit, as many rows as that takes; the plot widens for one long name.
    column = 15 + CHAR_PX * max((len(arm) for arm in arms), default=0) + 25
    width = round(max(640, 170 * len(scopes) + 80, left + column + right))
    columns = max(1, int((width - left - right) // column))
    rows = -(-len(arms) // columns)
    height = top + plot_h + 60 + LEGEND_ROW_PX * max(0, rows - 1) + 30
    plot_w = width - left - right

    def y(rate: float) -> float:
        return top + plot_h * (1 - rate)

    # Every value goes through Markup.format, which escapes it for text and attributes alike: an
    # arm, a stratum or a count can never close a quote or open a tag.
    parts = [
        Markup('<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" viewBox="0 0 {0} {1}" '
               'id="correctness-plot" role="img" font-family="sans-serif" font-size="12">').format(width, height),
        Markup("<title>Joint correctness per stratum and arm, 95% Wilson intervals</title>"),
        Markup('<rect x="0" y="0" width="{}" height="{}" fill="#ffffff"/>').format(width, height),
    ]
    for tick in range(0, 101, 25):
        ty = y(tick / 100)
        parts.append(Markup('<line x1="{}" x2="{}" y1="{ty:.1f}" y2="{ty:.1f}" stroke="#dddddd"/>').format(
            left, width - right, ty=ty))
        parts.append(Markup('<text x="{}" y="{:.1f}" text-anchor="end">{}%</text>').format(left - 6, ty + 4, tick))
    parts.append(Markup('<text x="16" y="{mid:.1f}" transform="rotate(-90 16 {mid:.1f})" '
                        'text-anchor="middle">joint correct</text>').format(mid=top + plot_h / 2))
    slot = plot_w / max(1, len(scopes))
    offsets = {arm: (i - (len(arms) - 1) / 2) * min(18.0, slot / (len(arms) + 1)) for i, arm in enumerate(arms)}
    colours = {arm: PALETTE[i % len(PALETTE)] for i, arm in enumerate(arms)}
    for i, scope in enumerate(scopes):
        cx = left + slot * (i + 0.5)
        label = "all positives" if scope == ALL_POSITIVE else scope.replace("_", " ")
        parts.append(Markup('<text x="{:.1f}" y="{}" text-anchor="middle">{}</text>').format(
            cx, top + plot_h + 18, label))
    for p in points:
        cx = left + slot * (scopes.index(p.scope) + 0.5) + offsets[p.arm]
        tip = (f"{p.arm}, {p.scope}: {p.correct}/{p.n} ({100 * p.rate:.1f}%), "
               f"95% CI {100 * p.low:.1f}–{100 * p.high:.1f}%")
        parts.append(Markup(
            '<g class="point" data-arm="{arm}" data-scope="{scope}" data-correct="{correct}" data-n="{n}" '
            'data-low="{low:.6f}" data-high="{high:.6f}"><title>{tip}</title>'
            '<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y_low:.1f}" y2="{y_high:.1f}" stroke="{colour}" stroke-width="2"/>'
            '<line x1="{left:.1f}" x2="{right:.1f}" y1="{y_low:.1f}" y2="{y_low:.1f}" stroke="{colour}"/>'
            '<line x1="{left:.1f}" x2="{right:.1f}" y1="{y_high:.1f}" y2="{y_high:.1f}" stroke="{colour}"/>'
            '<circle cx="{cx:.1f}" cy="{y_rate:.1f}" r="4" fill="{colour}"/></g>').format(
            arm=p.arm, scope=p.scope, correct=p.correct, n=p.n, low=p.low, high=p.high, tip=tip, cx=cx,
            left=cx - 4, right=cx + 4, y_low=y(p.low), y_high=y(p.high), y_rate=y(p.rate), colour=colours[p.arm]))
    for i, arm in enumerate(arms):
        lx, ly = left + column * (i % columns), top + plot_h + 60 + LEGEND_ROW_PX * (i // columns)
        parts.append(Markup('<g class="legend" data-arm="{}"><circle cx="{:.1f}" cy="{}" r="5" fill="{}"/>'
                            '<text x="{:.1f}" y="{}">{}</text></g>').format(arm, lx + 5, ly - 4, colours[arm],
                                                                           lx + 15, ly, arm))
    parts.append(Markup("</svg>"))
    return "\n".join(parts) + "\n"

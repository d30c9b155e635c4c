#!/usr/bin/env python3
"""Render a Grafana dashboard's panels from a real Prometheus as an SVG and a PNG, without Grafana.

Each panel's queries run as range queries over the last minutes; time series are drawn as
lines with their legend, stat panels as their last value, table panels as Grafana's `merge` and
`organize` transformations make them (a row per label set, a column per query, the last values,
coloured by a column's thresholds). The layout follows the panels' `gridPos` (24 columns). The PNG
is a screenshot of the SVG by headless Chromium (Debian's `chromium`; `scripts/setup.sh --test-tools`
installs it). Standard library only.

    python scripts/render_dashboard.py dashboards/serving.json --prometheus http://127.0.0.1:9090 --out DIR

Prints one line per panel (its series count, or "no data") and exits 1 if a panel has no data
and --require-data is given.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from core.process import run_main

WIDTH = 1600
UNIT_ROW = 34  # pixels per gridPos row
PALETTE = ("#73bf69", "#f2cc0c", "#8ab8ff", "#ff780a", "#f2495c", "#5794f2", "#b877d9", "#fade2a", "#96d98d")
BACKGROUND, PANEL, GRID, TEXT, MUTED = "#111217", "#181b1f", "#2c3235", "#ccccdc", "#8e8e9e"


# Grafana's named colours as its dark theme draws them, for threshold steps that name one.
NAMED_COLOURS = {"green": "#73bf69", "yellow": "#fade2a", "orange": "#ff9830", "red": "#f2495c", "blue": "#5794f2",
                 "purple": "#b877d9", "text": TEXT}


@dataclass(frozen=True)
class Series:
    legend: str
    points: tuple[tuple[float, float], ...]  # (epoch seconds, value), finite values only
    ref_id: str = ""
    labels: tuple[tuple[str, str], ...] = ()


def prometheus_range(base_url: str, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
    params = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    with urllib.request.urlopen(f"{base_url}/api/v1/query_range?{params}", timeout=30) as resp:
        body = json.load(resp)
    if body.get("status") != "success":
        raise RuntimeError(f"{expr}: {body.get('error')}")
    return body["data"]["result"]


def legend(template: str, labels: dict[str, str]) -> str:
    text = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), template or "")
    return " ".join(text.split()) or "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def panel_series(base_url: str, panel: dict[str, Any], start: float, end: float, step: float) -> list[Series]:
    series = []
    for target in panel.get("targets", []):
        for result in prometheus_range(base_url, target["expr"], start, end, step):
            points = tuple((float(t), float(v)) for t, v in result["values"] if math.isfinite(float(v)))
            if points:
                series.append(Series(legend(target.get("legendFormat", ""), result["metric"]), points,
                                     target.get("refId", ""), tuple(sorted(result["metric"].items()))))
    return series


def fmt(value: float, unit: str) -> str:
    """A short label in the panel's Grafana unit."""
    if unit == "percentunit":
        return f"{value * 100:.3g}%"
    if unit == "s":
        return f"{value * 1000:.3g} ms" if abs(value) < 1 else f"{value:.3g} s"
    if unit == "bytes":
        for size, name in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
            if abs(value) >= size:
                return f"{value / size:.3g} {name}"
        return f"{value:.3g} B"
    suffix = {"reqps": " req/s", "watt": " W", "celsius": " °C"}.get(unit, "")
    for size, name in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{name}{suffix}"
    return f"{value:.3g}{suffix}"


def stat_text(panel: dict[str, Any], value: float) -> tuple[str, str]:
    """The stat's text and colour, through the panel's value mappings when one matches."""
    defaults = panel.get("fieldConfig", {}).get("defaults", {})
    for mapping in defaults.get("mappings", []):
        option = mapping.get("options", {}).get(f"{value:g}")
        if option:
            return option.get("text", f"{value:g}"), option.get("color", TEXT)
    return fmt(value, defaults.get("unit", "")), TEXT


def table_cells(panel: dict[str, Any], series: list[Series]) -> tuple[list[str], list[list[tuple[str, str]]]]:
    """Grafana's `merge` then `organize`: one row per label set, a `Value #<refId>` column per query (renamed,
    ordered and hidden as `organize` says), each cell the last value and its colour by the column's thresholds."""
    organize: dict[str, Any] = next(
        (t.get("options", {}) for t in panel.get("transformations", []) if t.get("id") == "organize"), {})
    label_names = sorted({name for s in series for name, _ in s.labels if name != "__name__"})
    refs = [t.get("refId", "") for t in panel.get("targets", [])]
    columns = [*label_names, *(f"Value #{ref}" for ref in refs)]
    hidden = {name for name, hide in organize.get("excludeByName", {}).items() if hide}
    order = organize.get("indexByName", {})
    columns = sorted((c for c in columns if c not in hidden), key=lambda c: order.get(c, len(columns)))
    rows: dict[tuple[tuple[str, str], ...], dict[str, float]] = {}
    for s in series:
        key = tuple((name, value) for name, value in s.labels if name in label_names)
        rows.setdefault(key, {})[f"Value #{s.ref_id}"] = s.points[-1][1]
    names = organize.get("renameByName", {})
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
    cells = []
    for key, values in sorted(rows.items()):
        labels = dict(key)
        cells.append([(labels.get(c, ""), TEXT) if c in label_names
                      else (fmt(values[c], unit), threshold_colour(panel, names.get(c, c), values[c]))
                      if c in values else ("", TEXT) for c in columns])
    return [names.get(c, c) for c in columns], cells


def threshold_colour(panel: dict[str, Any], column: str, value: float) -> str:
    """The colour of the last threshold step at or below `value` that an override for `column` sets, else TEXT."""
    for override in panel.get("fieldConfig", {}).get("overrides", []):
        if override.get("matcher", {}).get("options") != column:
            continue
        for prop in override.get("properties", []):
            if prop.get("id") == "thresholds":
                reached = [step for step in prop["value"].get("steps", [])
                           if step.get("value") is None or value >= step["value"]]
                if reached:
                    colour = reached[-1].get("color", "text")
                    return str(NAMED_COLOURS.get(colour, colour))
    return TEXT


def fit(text: str, width: float) -> str:
    """`text` cut to about `width` pixels at 12 px, its end kept (a root's path ends in its name)."""
    room = max(int(width // 7) - 1, 4)
    return text if len(text) <= room else "…" + text[-(room - 1):]


def draw_table(panel: dict[str, Any], series: list[Series], x: float, y: float, w: float, h: float) -> str:
    header, rows = table_cells(panel, series)
    width = (w - 28) / max(len(header), 1)
    fits = max(int((h - 70) // 18), 1)
    out = [f'<text x="{x + 14 + width * i}" y="{y + 50}" fill="{MUTED}" font-size="11">{escape(name)}</text>'
           for i, name in enumerate(header)]
    for r, row in enumerate(rows[:fits]):
        ry = y + 70 + 18 * r
        out.append(f'<line x1="{x + 14}" y1="{ry - 13}" x2="{x + w - 14}" y2="{ry - 13}" stroke="{GRID}"/>')
        out += [f'<text x="{x + 14 + width * i}" y="{ry}" fill="{colour}" font-size="12">'
                f'{escape(fit(text, width))}</text>' for i, (text, colour) in enumerate(row)]
    if len(rows) > fits:
        out.append(f'<text x="{x + 14}" y="{y + h - 12}" fill="{MUTED}" font-size="11">'
                   f'… and {len(rows) - fits} more rows</text>')
    return "".join(out)


def draw_panel(panel: dict[str, Any], series: list[Series], x: float, y: float, w: float, h: float,
               start: float, end: float) -> str:
    out = [f'<rect x="{x + 4}" y="{y + 4}" width="{w - 8}" height="{h - 8}" rx="3" fill="{PANEL}" '
           f'stroke="{GRID}"/>',
           f'<text x="{x + 14}" y="{y + 24}" fill="{TEXT}" font-size="14" font-weight="600">'
           f'{escape(panel["title"])}</text>']
    if not series:
        out.append(f'<text x="{x + w / 2}" y="{y + h / 2}" fill="{MUTED}" font-size="16" text-anchor="middle">'
                   f'No data</text>')
        return "".join(out)
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
    if panel.get("type") == "table":
        return "".join(out) + draw_table(panel, series, x, y, w, h)
    if panel.get("type") == "stat":
        cell = (w - 28) / len(series)
        for i, s in enumerate(series):
            text, colour = stat_text(panel, s.points[-1][1])
            cx = x + 14 + cell * (i + 0.5)
            out.append(f'<text x="{cx}" y="{y + h / 2 + 8}" fill="{colour}" font-size="26" font-weight="700" '
                       f'text-anchor="middle">{escape(text)}</text>'
                       f'<text x="{cx}" y="{y + h - 18}" fill="{MUTED}" font-size="11" text-anchor="middle">'
                       f'{escape(s.legend)}</text>')
        return "".join(out)
    columns = 2 if w > 600 else 1
    legend_rows = min(math.ceil(len(series) / columns), 3)
    slots = legend_rows * columns
    left, right, top, bottom = x + 70, x + w - 18, y + 38, y + h - 30 - 16 * legend_rows
    values = [v for s in series for _, v in s.points]
    low, high = min(0.0, min(values)), max(values)
    high = high if high > low else low + 1
    defaults = panel.get("fieldConfig", {}).get("defaults", {})
    low, high = defaults.get("min", low), max(defaults.get("max", high), high)

    def px(t: float, v: float) -> tuple[float, float]:
        return (left + (t - start) / (end - start) * (right - left),
                bottom - (v - low) / (high - low) * (bottom - top))

    lines = 5 if bottom - top > 100 else 3
    for i in range(lines):
        value = low + (high - low) * i / (lines - 1)
        _, gy = px(start, value)
        out.append(f'<line x1="{left}" y1="{gy:.1f}" x2="{right}" y2="{gy:.1f}" stroke="{GRID}"/>'
                   f'<text x="{left - 6}" y="{gy + 4:.1f}" fill="{MUTED}" font-size="10" text-anchor="end">'
                   f'{escape(fmt(value, unit))}</text>')
    for i in range(4):
        t = start + (end - start) * i / 3
        gx, _ = px(t, low)
        out.append(f'<text x="{gx:.1f}" y="{bottom + 14}" fill="{MUTED}" font-size="10" text-anchor="middle">'
                   f'{time.strftime("%H:%M:%S", time.localtime(t))}</text>')
    for i, s in enumerate(series):
        path = " ".join(f"{'M' if j == 0 else 'L'}{px(t, v)[0]:.1f},{px(t, v)[1]:.1f}"
                        for j, (t, v) in enumerate(s.points))
        out.append(f'<path d="{path}" fill="none" stroke="{PALETTE[i % len(PALETTE)]}" stroke-width="1.6"/>')
    labelled = series if len(series) <= slots else series[:slots - 1]
    labels = [f"{s.legend} (last {fmt(s.points[-1][1], unit)})" for s in labelled]
    if len(labelled) < len(series):
        labels.append(f"… and {len(series) - len(labelled)} more")
    for i, label in enumerate(labels):
        lx, ly = left + (i % columns) * (right - left) / columns, bottom + 30 + 16 * (i // columns)
        colour = PALETTE[i % len(PALETTE)] if i < len(labelled) else MUTED
        out.append(f'<rect x="{lx}" y="{ly - 8}" width="12" height="3" fill="{colour}"/>'
                   f'<text x="{lx + 18}" y="{ly - 3}" fill="{TEXT}" font-size="11">{escape(label)}</text>')
    return "".join(out)


def render(dashboard: dict[str, Any], base_url: str, minutes: float, step: float) -> tuple[str, dict[str, int]]:
    """The SVG and each panel's series count."""
    end = time.time()
    start = end - minutes * 60
    column = WIDTH / 24
    panels = dashboard["panels"]
    height = 60 + max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels) * UNIT_ROW
    body, counts = [], {}
    for panel in panels:
        grid = panel["gridPos"]
        series = panel_series(base_url, panel, start, end, step)
        counts[panel["title"]] = len(series)
        body.append(draw_panel(panel, series, grid["x"] * column, 50 + grid["y"] * UNIT_ROW, grid["w"] * column,
                               grid["h"] * UNIT_ROW, start, end))
    header = (f'<text x="12" y="32" fill="{TEXT}" font-size="20" font-weight="600">{escape(dashboard["title"])}'
              f'</text><text x="{WIDTH - 12}" y="32" fill="{MUTED}" font-size="12" text-anchor="end">'
              f'{escape(base_url)} · last {minutes:g} min · step {step:g} s · '
              f'{time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(end))}</text>')
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'font-family="Inter, Helvetica, Arial, sans-serif"><rect width="100%" height="100%" '
           f'fill="{BACKGROUND}"/>{header}{"".join(body)}</svg>')
    return svg, counts


def screenshot(svg_path: Path, png_path: Path, width: int, height: int) -> None:
    binary = shutil.which("chromium")
    if binary is None:
        raise RuntimeError("Debian's chromium is not installed (scripts/setup.sh --test-tools installs it)")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--hide-scrollbars"]
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run([binary, *flags, f"--user-data-dir={profile}", f"--window-size={width},{height}",
                               f"--screenshot={png_path}", svg_path.as_uri()],
                              capture_output=True, text=True, timeout=120)
    if done.returncode != 0 or not png_path.is_file():
        raise RuntimeError(f"chromium could not screenshot {svg_path}: {done.stderr[-2000:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dashboard", type=Path)
    parser.add_argument("--prometheus", required=True, help="base URL, e.g. http://127.0.0.1:9090")
    parser.add_argument("--out", type=Path, required=True, help="directory for <dashboard>.svg and .png")
    parser.add_argument("--minutes", type=float, default=5.0, help="time range to draw (default 5)")
    parser.add_argument("--step", type=float, default=2.0, help="query resolution in seconds (default 2)")
    parser.add_argument("--require-data", action="store_true", help="exit 1 if a panel has no data")
    args = parser.parse_args(argv)
    try:
        dashboard = json.loads(args.dashboard.read_text())
        svg, counts = render(dashboard, args.prometheus.rstrip("/"), args.minutes, args.step)
        args.out.mkdir(parents=True, exist_ok=True)
        svg_path = args.out / f"{args.dashboard.stem}.svg"
        svg_path.write_text(svg)
        height = int(re.search(r'height="(\d+)"', svg).group(1))
        screenshot(svg_path, args.out / f"{args.dashboard.stem}.png", WIDTH, height)
    except (OSError, ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for title, count in counts.items():
        print(f"panel {title!r}: {count} series" if count else f"panel {title!r}: no data")
    print(f"wrote {svg_path} and {svg_path.with_suffix('.png')}")
    return 1 if args.require_data and not all(counts.values()) else 0


if __name__ == "__main__":
    sys.exit(run_main(main))

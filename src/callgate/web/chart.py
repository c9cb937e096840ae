"""The release chart as inline SVG, drawn on the server: no script, no library, no network.

Top panel: right tool % and right arguments % per release with their Wilson 95% intervals as
bands, and, for every release gated against a baseline, the gate's line (baseline share minus
the allowed drop, dashed) over the span it was compared on. Bottom panel: calls per task. Under
each release its mark: pass, regression, inconclusive or first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from typing import Any

WIDTH, LEFT, RIGHT = 760, 56, 24
TOP, SHARES_H, GAP, CALLS_H, MARKS_H = 34, 250, 34, 90, 52
SERIES = (("right_tool", "right tool %", "#1d4ed8"),
          ("right_arguments", "right arguments %", "#c2410c"))
MARK_STYLE = {"pass": ("✓", "#15803d"), "regression": ("✗", "#b91c1c"),
              "inconclusive": ("?", "#6b7280"), "first": ("●", "#1d4ed8")}


def _fmt(value: float) -> str:
    return f"{value:.1f}"


def release_chart(history: Sequence[dict[str, Any]], title: str = "") -> str:
    """SVG markup for a model's releases on one suite (oldest first)."""
    n = len(history)
    height = TOP + SHARES_H + GAP + CALLS_H + MARKS_H
    if n == 0:
        return ""
    plot_w = WIDTH - LEFT - RIGHT
    step = plot_w / max(n, 1)
    xs = [LEFT + step * (i + 0.5) for i in range(n)]

    values: list[float] = []
    for item in history:
        for key, _, _ in SERIES:
            share = item["figures"][key]
            values += [v for v in (share["pct"], share["low"]) if v is not None]
        for check in item["checks"].values():
            if check["baseline"]["pct"] is not None:
                values.append(check["baseline"]["pct"] - item["max_drop"])
    lowest = min(values, default=0.0) - 3
    tick = 5 if 100 - lowest <= 40 else 10
    low = max(0.0, math.floor(lowest / tick) * tick)
    high = 100.0

    def y(pct: float) -> float:
        return TOP + SHARES_H * (1 - (pct - low) / (high - low))

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {WIDTH} {height}" '
           f'width="100%" role="img" aria-label="{escape(title or "releases")}: right tool %, '
           'right arguments % and calls per task per release">',
           f"<title>{escape(title)}</title>"]
    # grid
    value = low
    while value <= high + 1e-9:
        out.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{_fmt(y(value))}" '
                   f'y2="{_fmt(y(value))}"/>'
                   f'<text class="axis" x="{LEFT - 8}" y="{_fmt(y(value) + 4)}" '
                   f'text-anchor="end">{value:g}</text>')
        value += tick
    # legend
    lx = LEFT
    for _, label, colour in SERIES:
        out.append(f'<rect x="{lx}" y="8" width="14" height="10" fill="{colour}"/>'
                   f'<text class="legend" x="{lx + 20}" y="17">{label}</text>')
        lx += 26 + 8 * len(label)
    out.append(f'<rect x="{lx}" y="8" width="14" height="10" fill="#64748b" opacity="0.25"/>'
               f'<text class="legend" x="{lx + 20}" y="17">95% interval</text>'
               f'<line x1="{lx + 125}" x2="{lx + 147}" y1="13" y2="13" class="rule" '
               f'stroke="#4b5563"/><text class="legend" x="{lx + 153}" y="17">gate: baseline '
               f'− {history[-1]["max_drop"]:g} points</text>')

    for key, label, colour in SERIES:
        shares = [item["figures"][key] for item in history]
        points = [(x, s) for x, s in zip(xs, shares, strict=True) if s["pct"] is not None]
        if not points:
            continue
        upper = " ".join(f"{_fmt(x)},{_fmt(y(s['high']))}" for x, s in points)
        lower = " ".join(f"{_fmt(x)},{_fmt(y(s['low']))}" for x, s in reversed(points))
        if len(points) == 1:
            x, s = points[0]
            out.append(f'<rect class="band" x="{_fmt(x - 10)}" y="{_fmt(y(s["high"]))}" '
                       f'width="20" height="{_fmt(y(s["low"]) - y(s["high"]))}" '
                       f'fill="{colour}" opacity="0.15"/>')
        else:
            out.append(f'<polygon class="band band-{key}" points="{upper} {lower}" '
                       f'fill="{colour}" opacity="0.15"/>')
        line = " ".join(f"{_fmt(x)},{_fmt(y(s['pct']))}" for x, s in points)
        out.append(f'<polyline class="series series-{key}" points="{line}" fill="none" '
                   f'stroke="{colour}" stroke-width="2.5"/>')
        for (x, s), item in zip(points, [h for h in history if h["figures"][key]["pct"]
                                          is not None], strict=True):
            out.append(
                f'<circle class="point" cx="{_fmt(x)}" cy="{_fmt(y(s["pct"]))}" r="4.5" '
                f'fill="{colour}"><title>{escape(item["release"])}: {label} '
                f'{s["pct"]:.1f} (95% {s["low"]:.1f}–{s["high"]:.1f}, n {s["n"]})</title>'
                '</circle>'
                f'<text class="value" x="{_fmt(x - 10)}" y="{_fmt(y(s["pct"]) + 4)}" '
                f'text-anchor="end" '
                f'fill="{colour}">{s["pct"]:.1f}</text>')

    # the gate line: baseline (on shared cases) minus the allowed drop, over the compared span
    for i, item in enumerate(history):
        if i == 0 or not item["checks"]:
            continue
        for key, label, colour in SERIES:
            check = item["checks"].get(key)
            if not check or check["baseline"]["pct"] is None:
                continue
            floor = check["baseline"]["pct"] - item["max_drop"]
            follows = history[i - 1]["release"] == item["baseline_release"]
            x0 = xs[i - 1] if follows else xs[i] - step / 2
            out.append(
                f'<line class="rule rule-{key}" x1="{_fmt(x0)}" x2="{_fmt(xs[i] + 26)}" '
                f'y1="{_fmt(y(floor))}" y2="{_fmt(y(floor))}" stroke="{colour}">'
                f'<title>{escape(item["release"])}: {label} fails below {floor:.1f} '
                f'(baseline {escape(str(item["baseline_release"]))} '
                f'{check["baseline"]["pct"]:.1f} on {check["baseline"]["n"]} shared attempts '
                f'− {item["max_drop"]:g} points)</title></line>'
                f'<text class="rule-label" x="{_fmt(xs[i] + 30)}" y="{_fmt(y(floor) + 4)}" '
                f'fill="{colour}">gate {floor:.1f}</text>')
            if check["failed"] and check["current"]["pct"] is not None:
                # where the figure fell through the gate line: ringed in red
                share = item["figures"][key]
                if share["pct"] is not None:
                    out.append(f'<circle class="failed-point" cx="{_fmt(xs[i])}" '
                               f'cy="{_fmt(y(share["pct"]))}" r="9" fill="none" '
                               'stroke="#b91c1c" stroke-width="2.5"/>')

    # calls per task
    top2 = TOP + SHARES_H + GAP
    calls = [item["figures"].get("calls_per_task") for item in history]
    cmax = max([c for c in calls if c is not None] + [1.0]) * 1.25
    out.append(f'<text class="axis" x="{LEFT}" y="{top2 - 8}">calls per task</text>')
    out.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{top2 + CALLS_H}" '
               f'y2="{top2 + CALLS_H}"/>')
    for x, value in zip(xs, calls, strict=True):
        if value is None:
            continue
        bar_h = CALLS_H * value / cmax
        out.append(f'<rect class="calls" x="{_fmt(x - 18)}" y="{_fmt(top2 + CALLS_H - bar_h)}" '
                   f'width="36" height="{_fmt(bar_h)}" fill="#64748b" opacity="0.55"/>'
                   f'<text class="value" x="{_fmt(x)}" y="{_fmt(top2 + CALLS_H - bar_h - 5)}" '
                   f'text-anchor="middle">{value:.2f}</text>')

    # the marks
    base = top2 + CALLS_H + 20
    for x, item in zip(xs, history, strict=True):
        symbol, colour = MARK_STYLE[item["mark"]]
        out.append(
            f'<g class="release mark mark-{item["mark"]}" data-release="{escape(item["release"])}"'
            f' data-outcome="{item["outcome"]}">'
            f'<text class="release-name" x="{_fmt(x)}" y="{base}" text-anchor="middle">'
            f'{escape(item["release"])}</text>'
            f'<text class="mark-label" x="{_fmt(x)}" y="{base + 20}" text-anchor="middle" '
            f'fill="{colour}">{symbol} {item["mark"]}</text></g>')
    out.append("</svg>")
    return "\n".join(out)


MODEL_W, MODEL_LEFT, BAR_H = 480, 8, 14


def models_chart(rows: Sequence[dict[str, Any]], title: str = "") -> str:
    """SVG markup for several models' newest releases on one suite: per model, its right tool
    % and right arguments % as bars from 0 to 100 with their values, the name above them, so
    that it stays legible when scaled down to a phone's width."""
    if not rows:
        return ""
    row_h = 18 + 2 * (BAR_H + 4) + 10
    height = 26 + row_h * len(rows)
    plot_w = MODEL_W - MODEL_LEFT - 60
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart models-chart" '
           f'viewBox="0 0 {MODEL_W} {height}" width="100%" role="img" '
           f'aria-label="{escape(title or "models")}: right tool % and right arguments % '
           'of each model\'s newest release">', f"<title>{escape(title)}</title>"]
    lx = MODEL_LEFT
    for _, label, colour in SERIES:
        out.append(f'<rect x="{lx}" y="6" width="14" height="10" fill="{colour}"/>'
                   f'<text class="legend" x="{lx + 20}" y="15">{escape(label)}</text>')
        lx += 170
    for index, row in enumerate(rows):
        top = 26 + index * row_h
        out.append(f'<g class="model" data-model="{escape(row["model"])}">'
                   f'<text class="release-name" x="{MODEL_LEFT}" y="{top + 13}">'
                   f'{escape(row["model"])} {escape(row["release"])}</text>')
        for offset, (key, label, colour) in enumerate(SERIES):
            pct = row["figures"][key]["pct"]
            y = top + 18 + offset * (BAR_H + 4)
            out.append(f'<rect x="{MODEL_LEFT}" y="{y}" width="{plot_w}" height="{BAR_H}" '
                       'fill="#64748b" opacity="0.12"/>')
            if pct is not None:
                out.append(f'<rect class="bar bar-{key}" x="{MODEL_LEFT}" y="{y}" '
                           f'width="{_fmt(plot_w * pct / 100)}" height="{BAR_H}" '
                           f'fill="{colour}"><title>{escape(row["model"])}: {label} '
                           f'{pct:.1f}</title></rect>')
            out.append(f'<text class="value" x="{MODEL_LEFT + plot_w + 6}" y="{y + 11}">'
                       f'{"–" if pct is None else f"{pct:.1f}"}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)

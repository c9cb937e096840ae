"""The release chart as inline SVG, drawn on the server: no script, no library, no network.

Top panel: right tool % and right arguments % per release with their Wilson 95% intervals as
bands, and, for every release gated against a baseline, the gate's line (baseline share minus
the allowed drop, dashed) over the span it was compared on. Bottom panel: calls per task. Under
each release its mark: pass, regression, inconclusive or first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from callgate.web.views import ReleaseSummary, Series

SERIES: tuple[tuple[Series, str, str], ...] = (("right_tool", "right tool %", "#1d4ed8"),
          ("right_arguments", "right arguments %", "#c2410c"))
MARK_STYLE = {"pass": ("✓", "#15803d"), "regression": ("✗", "#b91c1c"),
              "inconclusive": ("?", "#6b7280"), "first": ("●", "#1d4ed8")}
LEGEND_ROW, GAP, MARKS_H = 18, 34, 52


@dataclass(frozen=True)
class Layout:
    """One drawing of the release chart. The SVG scales to its box, its text with it: a
    phone gets a drawing of its own, narrow enough that its text stays legible (the page's
    CSS shows one of the two)."""

    css: str
    width: int
    left: int
    right: int
    shares_h: int
    calls_h: int
    em: float  # the type's size in the drawing's units (as app.css sets it), for text widths


WIDE = Layout("chart-wide", 760, 56, 24, 250, 90, 12)
NARROW = Layout("chart-narrow", 320, 34, 48, 200, 70, 13)


def _fmt(value: float) -> str:
    return f"{value:.1f}"


def text_width(text: str, em: float) -> float:
    """A generous estimate of a text's width (a sans-serif character is about half an em)."""
    return len(text) * em * 0.58


@dataclass(frozen=True)
class Plot:
    """Where the releases sit: their x, the shares' scale, and the top of the shares panel."""

    layout: Layout
    xs: list[float]
    step: float
    low: float
    top: int

    def y(self, pct: float) -> float:
        return self.top + self.layout.shares_h * (1 - (pct - self.low) / (100.0 - self.low))


def release_chart(history: Sequence[ReleaseSummary], title: str = "") -> str:
    """SVG markup for a model's releases on one suite (oldest first): a drawing for a wide
    screen, then one for a phone."""
    if not history:
        return ""
    return "\n".join(draw_releases(history, title, layout) for layout in (WIDE, NARROW))


def draw_releases(history: Sequence[ReleaseSummary], title: str, layout: Layout) -> str:
    legend, top = _legend(history, layout)
    step = (layout.width - layout.left - layout.right) / len(history)
    plot = Plot(layout, [layout.left + step * (i + 0.5) for i in range(len(history))], step,
                _lowest_tick(history), top)
    height = top + layout.shares_h + GAP + layout.calls_h + MARKS_H
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart {layout.css}" '
           f'viewBox="0 0 {layout.width} {height}" width="100%" role="img" '
           f'aria-label="{escape(title or "releases")}: right tool %, right arguments % and '
           'calls per task per release">',
           f"<title>{escape(title)}</title>"]
    out += _grid(plot)
    out += legend
    for series in SERIES:
        out += _series(plot, history, *series)
    out += _gate_lines(plot, history)
    out += _calls(plot, history)
    out += _marks(plot, history)
    out.append("</svg>")
    return "\n".join(out)


def _lowest_tick(history: Sequence[ReleaseSummary]) -> float:
    """The bottom of the shares' scale: a round number under every share, interval and gate
    line drawn."""
    values: list[float] = []
    for item in history:
        for key, _, _ in SERIES:
            share = item["figures"][key]
            values += [v for v in (share["pct"], share["low"]) if v is not None]
        for check in item["checks"].values():
            if check["baseline"]["pct"] is not None:
                values.append(check["baseline"]["pct"] - item["max_drop"])
    lowest = min(values, default=0.0) - 3
    return max(0.0, math.floor(lowest / _tick(lowest)) * _tick(lowest))


def _tick(low: float) -> int:
    return 5 if 100 - low <= 40 else 10


def _legend(history: Sequence[ReleaseSummary], layout: Layout) -> tuple[list[str], int]:
    """The legend's items, left to right and on as many rows as the width needs; and the top
    of the shares panel under it."""
    drop = history[-1]["max_drop"]
    # each key's swatch, placed at its x and its row's baseline y
    swatch = '<rect x="{x}" y="{top}" width="14" height="10" fill="%s"%s/>'
    keys = [(label, swatch % (colour, "")) for _, label, colour in SERIES]
    keys.append(("95% interval", swatch % ("#64748b", ' opacity="0.25"')))
    keys.append((f"gate: baseline − {drop:g} points",
                 '<line x1="{x}" x2="{end}" y1="{middle}" y2="{middle}" class="rule" '
                 'stroke="#4b5563"/>'))
    out, x, y = [], float(layout.left), 17
    for label, key in keys:
        wide = 20 + text_width(label, layout.em)
        if x > layout.left and x + wide > layout.width - 4:
            x, y = float(layout.left), y + LEGEND_ROW
        shape = key.format(x=_fmt(x), end=_fmt(x + 16), top=y - 9, middle=y - 4)
        out.append(f'{shape}<text class="legend" x="{_fmt(x + 20)}" y="{y}">'
                   f'{escape(label)}</text>')
        x += wide + 14
    return out, y + 17


def _grid(plot: Plot) -> list[str]:
    layout, out = plot.layout, []
    tick, value = _tick(plot.low), plot.low
    while value <= 100 + 1e-9:
        y = _fmt(plot.y(value))
        out.append(f'<line class="grid" x1="{layout.left}" x2="{layout.width - layout.right}" '
                   f'y1="{y}" y2="{y}"/>'
                   f'<text class="axis" x="{layout.left - 8}" y="{_fmt(plot.y(value) + 4)}" '
                   f'text-anchor="end">{value:g}</text>')
        value += tick
    return out


@dataclass(frozen=True)
class _Point:
    """A release's share where it has one (a share with a value has its interval)."""

    x: float
    release: str
    pct: float
    low: float
    high: float
    n: int


def _points(plot: Plot, history: Sequence[ReleaseSummary], key: Series) -> list[_Point]:
    return [_Point(x, item["release"], s["pct"], s["low"], s["high"], s["n"])
            for x, item in zip(plot.xs, history, strict=True)
            if (s := item["figures"][key])["pct"] is not None
            and s["low"] is not None and s["high"] is not None]


def _series(plot: Plot, history: Sequence[ReleaseSummary], key: Series, label: str,
            colour: str) -> list[str]:
    """One share: its interval as a band, its line, and each release's point and value."""
    points = _points(plot, history, key)
    if not points:
        return []
    out = []
    if len(points) == 1:
        p = points[0]
        out.append(f'<rect class="band" x="{_fmt(p.x - 10)}" y="{_fmt(plot.y(p.high))}" '
                   f'width="20" height="{_fmt(plot.y(p.low) - plot.y(p.high))}" '
                   f'fill="{colour}" opacity="0.15"/>')
    else:
        upper = " ".join(f"{_fmt(p.x)},{_fmt(plot.y(p.high))}" for p in points)
        lower = " ".join(f"{_fmt(p.x)},{_fmt(plot.y(p.low))}" for p in reversed(points))
        out.append(f'<polygon class="band band-{key}" points="{upper} {lower}" '
                   f'fill="{colour}" opacity="0.15"/>')
    line = " ".join(f"{_fmt(p.x)},{_fmt(plot.y(p.pct))}" for p in points)
    out.append(f'<polyline class="series series-{key}" points="{line}" fill="none" '
               f'stroke="{colour}" stroke-width="2.5"/>')
    for p in points:
        out.append(
            f'<circle class="point" cx="{_fmt(p.x)}" cy="{_fmt(plot.y(p.pct))}" r="4.5" '
            f'fill="{colour}"><title>{escape(p.release)}: {label} '
            f'{p.pct:.1f} (95% {p.low:.1f}–{p.high:.1f}, n {p.n})</title>'
            '</circle>'
            f'<text class="value" x="{_fmt(p.x - 10)}" y="{_fmt(plot.y(p.pct) + 4)}" '
            f'text-anchor="end" fill="{colour}">{p.pct:.1f}</text>')
    return out


def _gate_lines(plot: Plot, history: Sequence[ReleaseSummary]) -> list[str]:
    """The gate line of every release gated against a baseline: the baseline (on shared
    cases) minus the allowed drop, over the compared span; a share that fell through it is
    ringed in red."""
    out = []
    for i, item in enumerate(history):
        if i == 0 or not item["checks"]:
            continue
        for key, label, colour in SERIES:
            check = item["checks"].get(key)
            if not check or check["baseline"]["pct"] is None:
                continue
            floor = check["baseline"]["pct"] - item["max_drop"]
            follows = history[i - 1]["release"] == item["baseline_release"]
            x0 = plot.xs[i - 1] if follows else plot.xs[i] - plot.step / 2
            y = _fmt(plot.y(floor))
            # the label right of the line's end, moved in if it would run off the chart
            text = f"gate {floor:.1f}"
            text_x = min(plot.xs[i] + 30,
                         plot.layout.width - 2 - text_width(text, plot.layout.em))
            out.append(
                f'<line class="rule rule-{key}" x1="{_fmt(x0)}" x2="{_fmt(plot.xs[i] + 26)}" '
                f'y1="{y}" y2="{y}" stroke="{colour}">'
                f'<title>{escape(item["release"])}: {label} fails below {floor:.1f} '
                f'(baseline {escape(str(item["baseline_release"]))} '
                f'{check["baseline"]["pct"]:.1f} on {check["baseline"]["n"]} shared attempts '
                f'− {item["max_drop"]:g} points)</title></line>'
                f'<text class="rule-label" x="{_fmt(text_x)}" y="{_fmt(plot.y(floor) + 4)}" '
                f'fill="{colour}">{text}</text>')
            share = item["figures"][key]
            if check["failed"] and check["current"]["pct"] is not None and share["pct"] is not None:
                out.append(f'<circle class="failed-point" cx="{_fmt(plot.xs[i])}" '
                           f'cy="{_fmt(plot.y(share["pct"]))}" r="9" fill="none" '
                           'stroke="#b91c1c" stroke-width="2.5"/>')
    return out


def _calls(plot: Plot, history: Sequence[ReleaseSummary]) -> list[str]:
    """The bottom panel: calls per task, a bar per release."""
    layout = plot.layout
    top = plot.top + layout.shares_h + GAP
    bottom = top + layout.calls_h
    calls = [item["figures"].get("calls_per_task") for item in history]
    cmax = max([c for c in calls if c is not None] + [1.0]) * 1.25
    out = [f'<text class="axis" x="{layout.left}" y="{top - 8}">calls per task</text>',
           f'<line class="grid" x1="{layout.left}" x2="{layout.width - layout.right}" '
           f'y1="{bottom}" y2="{bottom}"/>']
    for x, value in zip(plot.xs, calls, strict=True):
        if value is None:
            continue
        bar_h = layout.calls_h * value / cmax
        out.append(f'<rect class="calls" x="{_fmt(x - 18)}" y="{_fmt(bottom - bar_h)}" '
                   f'width="36" height="{_fmt(bar_h)}" fill="#64748b" opacity="0.55"/>'
                   f'<text class="value" x="{_fmt(x)}" y="{_fmt(bottom - bar_h - 5)}" '
                   f'text-anchor="middle">{value:.2f}</text>')
    return out


def _marks(plot: Plot, history: Sequence[ReleaseSummary]) -> list[str]:
    """Under each release its name and the gate's mark."""
    base = plot.top + plot.layout.shares_h + GAP + plot.layout.calls_h + 20
    out = []
    for x, item in zip(plot.xs, history, strict=True):
        symbol, colour = MARK_STYLE[item["mark"]]
        out.append(
            f'<g class="release mark mark-{item["mark"]}" data-release="{escape(item["release"])}"'
            f' data-outcome="{item["outcome"]}">'
            f'<text class="release-name" x="{_fmt(x)}" y="{base}" text-anchor="middle">'
            f'{escape(item["release"])}</text>'
            f'<text class="mark-label" x="{_fmt(x)}" y="{base + 20}" text-anchor="middle" '
            f'fill="{colour}">{symbol} {item["mark"]}</text></g>')
    return out


MODEL_LEFT, BAR_H = 8, 14


@dataclass(frozen=True)
class ModelsLayout:
    """One drawing of the models chart: for a wide screen, or narrow enough for a phone that
    its text, scaled to the screen, stays 13 px or more (the page's CSS shows one of the two)."""

    css: str
    width: int
    em: float  # the type's size in the drawing's units (as app.css sets it), for text widths


MODELS_WIDE = ModelsLayout("chart-wide", 480, 12)
MODELS_NARROW = ModelsLayout("chart-narrow", 300, 13)


def models_chart(rows: Sequence[ReleaseSummary], title: str = "") -> str:
    """SVG markup for several models' newest releases on one suite: per model, its right tool
    % and right arguments % as bars from 0 to 100 with their values, the name above them; a
    drawing for a wide screen, then one for a phone."""
    if not rows:
        return ""
    return "\n".join(draw_models(rows, title, layout) for layout in (MODELS_WIDE, MODELS_NARROW))


def _models_legend(layout: ModelsLayout) -> tuple[list[str], int]:
    """The legend's items, side by side when they fit, else one under the other; and the
    top of the first model's row."""
    out, x, y = [], MODEL_LEFT, 6
    for _, label, colour in SERIES:
        wide = 20 + text_width(label, layout.em) + 12
        if x > MODEL_LEFT and x + wide > layout.width:
            x, y = MODEL_LEFT, y + LEGEND_ROW
        out.append(f'<rect x="{x}" y="{y}" width="14" height="10" fill="{colour}"/>'
                   f'<text class="legend" x="{x + 20}" y="{y + 9}">{escape(label)}</text>')
        x += max(170, round(wide))
    return out, y + 20


def draw_models(rows: Sequence[ReleaseSummary], title: str, layout: ModelsLayout) -> str:
    legend, first = _models_legend(layout)
    row_h = 18 + 2 * (BAR_H + 4) + 10
    height = first + row_h * len(rows)
    plot_w = layout.width - MODEL_LEFT - 60
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart models-chart {layout.css}" '
           f'viewBox="0 0 {layout.width} {height}" width="100%" role="img" '
           f'aria-label="{escape(title or "models")}: right tool % and right arguments % '
           'of each model\'s newest release">', f"<title>{escape(title)}</title>", *legend]
    for index, row in enumerate(rows):
        top = first + index * row_h
        agent = row.get("agent") or row["model"]  # named by agent, its model beside it
        name = agent if agent == row["model"] else f"{agent} ({row['model']})"
        out.append(f'<g class="model" data-agent="{escape(agent)}" '
                   f'data-model="{escape(row["model"])}">'
                   f'<text class="release-name" x="{MODEL_LEFT}" y="{top + 13}">'
                   f'{escape(name)} {escape(row["release"])}</text>')
        for offset, (key, label, colour) in enumerate(SERIES):
            pct = row["figures"][key]["pct"]
            y = top + 18 + offset * (BAR_H + 4)
            out.append(f'<rect x="{MODEL_LEFT}" y="{y}" width="{plot_w}" height="{BAR_H}" '
                       'fill="#64748b" opacity="0.12"/>')
            if pct is not None:
                out.append(f'<rect class="bar bar-{key}" x="{MODEL_LEFT}" y="{y}" '
                           f'width="{_fmt(plot_w * pct / 100)}" height="{BAR_H}" '
                           f'fill="{colour}"><title>{escape(name)}: {label} '
                           f'{pct:.1f}</title></rect>')
            out.append(f'<text class="value" x="{MODEL_LEFT + plot_w + 6}" y="{y + 11}">'
                       f'{"–" if pct is None else f"{pct:.1f}"}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)

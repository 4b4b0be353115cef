"""Time-series charts drawn on the server as SVG (issue 51): no CDN, no JavaScript.

A chart is one or more series of (time, value) points over a time range, with an optional
threshold line (min.cleanable.dirty.ratio, zero hours left). Every point is a circle with a
`<title>` (the browser shows it on hover) and data attributes (`data-time-ms`, `data-value`,
`data-run-id`), so a test or a script can check the picture against the reports; the line joins
a series' points in time order, or, for a series of states (`step`), holds each value until the
next point and steps there, as Grafana draws a gauge read at each observation. A sparkline is the
same without axes, for the overview's rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from itertools import pairwise

from lakecleaner.policy.text import format_timestamp_ms

_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 12, 26, 22


@dataclass(frozen=True)
class ChartPoint:
    time_ms: int
    value: float
    run_id: str
    #: Shown on hover after the time and the value (the run's outcome, say).
    note: str = ""
    #: A colour for this point alone (a failed run's), else the series'.
    colour: str | None = None


@dataclass(frozen=True)
class Series:
    name: str
    colour: str
    points: tuple[ChartPoint, ...]
    #: A state that holds until the next point (a log's size), not a value per event (a run's duration).
    step: bool = False


@dataclass(frozen=True)
class Chart:
    """What to draw: `series` over [start_ms, end_ms]; `formatter` writes a value for the axis and
    the hover text; `threshold` a dashed horizontal line with its label."""

    title: str
    series: tuple[Series, ...]
    start_ms: int
    end_ms: int
    formatter: Callable[[float], str]
    threshold: tuple[float, str] | None = None


def _bounds(chart: Chart) -> tuple[float, float]:
    values = [p.value for s in chart.series for p in s.points]
    if chart.threshold is not None:
        values.append(chart.threshold[0])
    low, high = min(values, default=0.0), max(values, default=1.0)
    low = min(low, 0.0)
    return (low, high if high > low else low + 1.0)


def render_chart(chart: Chart, *, width: int = 900, height: int = 190) -> str:
    """The chart as an `<svg>` element (see the module docstring)."""
    low, high = _bounds(chart)
    span_ms = max(chart.end_ms - chart.start_ms, 1)
    plot_w, plot_h = width - _LEFT - _RIGHT, height - _TOP - _BOTTOM

    def x(time_ms: int) -> float:
        return _LEFT + plot_w * (time_ms - chart.start_ms) / span_ms

    def y(value: float) -> float:
        return _TOP + plot_h * (1 - (value - low) / (high - low))

    parts = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(chart.title)}" '
        f'data-chart="{escape(chart.title)}">',
        f"<title>{escape(chart.title)}</title>",
        f'<text x="{_LEFT}" y="16" font-size="13" font-weight="600" fill="#263238">{escape(chart.title)}</text>',
        f'<rect x="{_LEFT}" y="{_TOP}" width="{plot_w}" height="{plot_h}" fill="#fafafa" stroke="#cfd8dc"/>',
    ]
    for value in (low, (low + high) / 2, high):
        parts.append(
            f'<text x="{_LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end" font-size="11" fill="#546e7a">'
            f"{escape(chart.formatter(value))}</text>"
        )
    for time_ms, anchor in ((chart.start_ms, "start"), (chart.end_ms, "end")):
        parts.append(
            f'<text x="{x(time_ms):.1f}" y="{height - 6}" text-anchor="{anchor}" font-size="11" fill="#546e7a">'
            f"{escape(format_timestamp_ms(time_ms))}</text>"
        )
    if chart.threshold is not None:
        value, label = chart.threshold
        parts.append(
            f'<line class="threshold" x1="{_LEFT}" x2="{_LEFT + plot_w}" y1="{y(value):.1f}" y2="{y(value):.1f}" '
            f'stroke="#c62828" stroke-dasharray="5 4" data-value="{value}"><title>{escape(label)}</title></line>'
        )
    for series in chart.series:
        parts += _series(series, x, y, chart.formatter)
    parts.append("</svg>")
    return "".join(parts)


def _series(
    series: Series, x: Callable[[int], float], y: Callable[[float], float], formatter: Callable[[float], str]
) -> list[str]:
    points = sorted(series.points, key=lambda p: p.time_ms)
    parts = [f'<g class="series" data-series="{escape(series.name)}">']
    if len(points) > 1:
        corners = [(x(p.time_ms), y(p.value)) for p in points]
        if series.step:
            held = [c for prev, now in pairwise(corners) for c in ((now[0], prev[1]), now)]
            corners = [corners[0], *held]
        path = " ".join(f"{cx:.1f},{cy:.1f}" for cx, cy in corners)
        parts.append(
            f'<polyline class="{"step" if series.step else "line"}" points="{path}" fill="none" '
            f'stroke="{series.colour}" stroke-width="1.5"/>'
        )
    for p in points:
        hover = f"{series.name}: {formatter(p.value)} at {format_timestamp_ms(p.time_ms)} (run {p.run_id})"
        hover += f", {p.note}" if p.note else ""
        parts.append(
            f'<circle cx="{x(p.time_ms):.1f}" cy="{y(p.value):.1f}" r="3.5" fill="{p.colour or series.colour}" '
            f'data-time-ms="{p.time_ms}" data-value="{p.value}" data-run-id="{escape(p.run_id)}">'
            f"<title>{escape(hover)}</title></circle>"
        )
    parts.append("</g>")
    return parts


def render_sparkline(values: Sequence[float], *, width: int = 120, height: int = 24, title: str = "") -> str:
    """A line of `values` in order (oldest first), scaled to its own range; empty with fewer than two."""
    if len(values) < 2:
        return ""
    low, high = min(values), max(values)
    span = high - low or 1.0
    step = (width - 4) / (len(values) - 1)
    path = " ".join(
        f"{2 + i * step:.1f},{height - 2 - (height - 4) * (v - low) / span:.1f}" for i, v in enumerate(values)
    )
    data = ",".join(f"{v:g}" for v in values)
    return (
        f'<svg class="sparkline" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'data-values="{data}"><title>{escape(title)}</title>'
        f'<polyline points="{path}" fill="none" stroke="#1565c0" stroke-width="1.5"/></svg>'
    )

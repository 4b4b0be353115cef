"""The history charts of a topic's or a partition's page, from its history points (issue 51):
dirty ratio against min.cleanable.dirty.ratio, log size, records, tombstones, hours left to the
nearest deletion deadline, the mirror's lag, and each run's duration coloured by its outcome.

The figures are states: each run gives the point before it and the point after it, drawn as a
step, so the newest value is what the last run left (issue 78). A deadline's point says its own
state ("overdue by 23.1 h" in red, "ok" while it has not passed), never the run's outcome."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lakecleaner.charts.lines import Chart, ChartPoint, Series, render_chart
from lakecleaner.charts.units import human_bytes
from lakecleaner.config import HOUR_MS
from lakecleaner.runs.history import HistoryPoint

OUTCOME_COLOURS = {"ok": "#2e7d32", "failed": "#c62828", "dry-run": "#90a4ae"}
OVERDUE_COLOUR = "#c62828"


def _percent(value: float) -> str:
    return f"{100 * value:.0f} %"


def _count(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) or abs(value) >= 10 else f"{value:.1f}"


def _bytes(value: float) -> str:
    return human_bytes(round(value))


def _hours(value: float) -> str:
    return f"{value:,.1f} h"


def _seconds(value: float) -> str:
    return f"{value:,.0f} s"


def _series(
    name: str, colour: str, points: Sequence[HistoryPoint], value: Callable[[HistoryPoint], float | None]
) -> Series:
    """A state's step series: each point noted with its phase of the run and the run's outcome."""
    return Series(
        name,
        colour,
        tuple(
            ChartPoint(p.time_ms, v, p.run_id, f"{p.phase} the run, {p.outcome}")
            for p in points
            if (v := value(p)) is not None
        ),
        step=True,
    )


def _hours_left(point: HistoryPoint) -> float | None:
    if point.nearest_deadline_ms is None:
        return None
    return (point.nearest_deadline_ms - point.time_ms) / HOUR_MS


def deadline_state(hours_left: float) -> str:
    """A deadline's own state at a point: "ok" while it has not passed, else how long overdue."""
    return "ok" if hours_left >= 0 else f"overdue by {_hours(-hours_left)}"


def _deadline_series(points: Sequence[HistoryPoint]) -> Series:
    """Hours left to the nearest deletion deadline, each point labelled and coloured by the
    deadline's state (`deadline_state`), not by the run's outcome."""
    return Series(
        "hours left",
        "#6a1b9a",
        tuple(
            ChartPoint(
                p.time_ms,
                left,
                p.run_id,
                f"{p.phase} the run: {deadline_state(left)}",
                None if left >= 0 else OVERDUE_COLOUR,
            )
            for p in points
            if (left := _hours_left(p)) is not None
        ),
        step=True,
    )


def history_charts(
    points: Sequence[HistoryPoint],
    partition: int | None,
    start_ms: int,
    end_ms: int,
    compacted: bool,
    min_cleanable_ratio: float,
) -> list[Chart]:
    """The charts of the topic (`partition` None) or of one partition, over [start_ms, end_ms]."""
    mine = [p for p in points if p.partition == partition]
    who = "topic" if partition is None else f"partition {partition}"
    charts = []

    def chart(
        title: str, series: Series, formatter: Callable[[float], str], threshold: tuple[float, str] | None = None
    ) -> None:
        charts.append(Chart(title, (series,), start_ms, end_ms, formatter, threshold))

    if compacted:
        name = "dirty ratio (highest partition)" if partition is None else "dirty ratio"
        chart(
            f"{name} against min.cleanable.dirty.ratio",
            _series(name, "#ef6c00", mine, lambda p: p.dirty_ratio),
            _percent,
            (min_cleanable_ratio, f"min.cleanable.dirty.ratio {min_cleanable_ratio:g}"),
        )
    chart("log size", _series(f"{who} size", "#1565c0", mine, lambda p: p.size_bytes), _bytes)
    chart("records", _series(f"{who} records", "#00838f", mine, lambda p: p.records), _count)
    if compacted:
        chart("tombstones", _series(f"{who} tombstones", "#6d4c41", mine, lambda p: p.tombstones), _count)
    if any(p.nearest_deadline_ms is not None for p in mine):
        chart(
            "hours left to the nearest deletion deadline",
            _deadline_series(mine),
            _hours,
            (0.0, "the deadline"),
        )
    if partition is None and any(p.mirror_lag is not None for p in mine):
        chart(
            "mirror lag (records behind the Kafka topic)",
            _series("lag", "#37474f", mine, lambda p: p.mirror_lag),
            _count,
        )
    if partition is None:
        runs = tuple(
            ChartPoint(p.time_ms, p.duration_s, p.run_id, p.outcome, OUTCOME_COLOURS.get(p.outcome, "#f9a825"))
            for p in mine
            if p.duration_s is not None and p.phase == "before"
        )
        charts.append(Chart("run duration and outcome", (Series("run", "#90a4ae", runs),), start_ms, end_ms, _seconds))
    return charts


def rendered(charts: Sequence[Chart]) -> list[str]:
    return [render_chart(c) for c in charts]

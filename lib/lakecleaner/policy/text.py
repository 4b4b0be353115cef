"""Wording shared by the policy's human-readable reasons and the rendered plan."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def format_duration_ms(ms: int) -> str:
    """`ms` as whole seconds ("3600 s"), or as milliseconds below one second ("250 ms")."""
    return f"{ms} ms" if abs(ms) < 1000 else f"{ms // 1000} s"


def format_timestamp_ms(ms: int) -> str:
    """An epoch-millisecond timestamp as UTC ISO-8601, or the raw number when out of range."""
    try:
        moment = _EPOCH + timedelta(milliseconds=ms)
    except OverflowError:
        return f"{ms} ms"
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def format_ratio(ratio: float, threshold: float) -> str:
    """`ratio` with two decimals, or with as many more as it takes for the shown value to compare
    with `threshold` the way the exact one does (0.4999 is never shown as "0.50" next to 0.5)."""
    for digits in range(2, 18):
        shown = f"{ratio:.{digits}f}"
        if _compare(float(shown), threshold) == _compare(ratio, threshold):
            return shown
    return repr(ratio)


def _compare(a: float, b: float) -> int:
    return (a > b) - (a < b)

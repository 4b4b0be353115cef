"""Quantities as people read them, for the pages and the charts."""

from __future__ import annotations


def human_bytes(count: int | None) -> str:
    """1234567 → "1.2 MB" (decimal units, as object stores bill)."""
    if count is None:
        return "–"
    units, value, index = ("B", "kB", "MB", "GB", "TB"), float(count), 0
    while abs(value) >= 1000 and index + 1 < len(units):
        value, index = value / 1000, index + 1
    return f"{count} B" if index == 0 else f"{value:.1f} {units[index]}"


def human_seconds(seconds: int | None) -> str:
    """A duration in the two largest units ("2 d 3 h", "5 min 2 s"); negative durations are "… ago"."""
    if seconds is None:
        return "–"
    left = abs(seconds)
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60), ("s", 1)):
        if left >= size or (unit == "s" and not parts):
            parts.append(f"{left // size} {unit}")
            left %= size
    text = " ".join(parts[:2])
    return f"{text} ago" if seconds < 0 else text

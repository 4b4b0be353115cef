"""A partition's log as a server-rendered SVG bar along the offset axis.

The bar is split into the ranges the cleaner sees (clean, dirty = cleanable, uncleanable =
held back by min.compaction.lag.ms, active; or one `log` range on topics that are not
compacted), outlines every segment, hatches the segments retention deletes at the next run
(consumed retention, KIP-68, in red), and marks the log start offset, the cleaner checkpoint,
each consumer group's committed offset and their minimum. Every drawn element carries its
offsets as data attributes (`data-start`/`data-end`, `data-base-offset`/`data-next-offset`,
`data-offset`), so a test or a script can check the picture against the manifest.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from html import escape

from lakecleaner.dashboard.partition_view import ACTIVE, CLEAN, DIRTY, LOG, UNCLEANABLE, PartitionView, SegmentView
from lakecleaner.policy.retention import CONSUMED

#: Fill colour and legend text of each kind of range.
REGION_STYLE = {
    CLEAN: ("#81c784", "clean (below the cleaner checkpoint)"),
    DIRTY: ("#ffb74d", "dirty: cleanable"),
    UNCLEANABLE: ("#b39ddb", "uncleanable (min.compaction.lag.ms)"),
    ACTIVE: ("#64b5f6", "active segment"),
    LOG: ("#b0bec5", "log (not compacted)"),
}
#: Colour and label prefix of each kind of marker, and whether it is drawn above the bar.
MARKER_STYLE = {
    "log-start": ("#263238", "log start", True),
    "cleaner-checkpoint": ("#2e7d32", "checkpoint", True),
    "consumer-group": ("#00838f", "", False),
    "min-committed": ("#c62828", "min committed", False),
}
CONSUMED_COLOUR, OTHER_RETENTION_COLOUR = "#d32f2f", "#6d4c41"
_CHAR_WIDTH, _ROW_HEIGHT, _MARGIN = 6.4, 15, 12

#: The top and bottom y of a drawn bar.
_Bar = tuple[float, float]


@dataclass(frozen=True)
class OffsetMarker:
    """An offset marked on the bar."""

    kind: str
    offset: int
    label: str
    group: str | None = None


def markers(view: PartitionView) -> list[OffsetMarker]:
    """The log start offset, the cleaner checkpoint, each group's committed offset and the minimum."""
    manifest = view.manifest
    found = [OffsetMarker("log-start", manifest.log_start_offset, f"log start {manifest.log_start_offset}")]
    if manifest.cleaner_checkpoint is not None:
        checkpoint = manifest.cleaner_checkpoint
        found.append(OffsetMarker("cleaner-checkpoint", checkpoint, f"checkpoint {checkpoint}"))
    for group, offset in sorted(view.groups.items()):
        if offset is not None:
            found.append(OffsetMarker("consumer-group", offset, f"{group} {offset}", group))
    if view.consumed_offset is not None:
        found.append(OffsetMarker("min-committed", view.consumed_offset, f"min committed {view.consumed_offset}"))
    return found


class _Scale:
    """Offsets to x positions over [start, end] (a log with no offsets maps everything to the left)."""

    def __init__(self, start: int, end: int, left: float, width: float) -> None:
        self.start, self.end, self.left, self.width = start, end, left, width

    def x(self, offset: int) -> float:
        if self.end <= self.start:
            return self.left
        clamped = min(max(offset, self.start), self.end)
        return round(self.left + (clamped - self.start) * self.width / (self.end - self.start), 2)

    def inside(self, offset: int) -> bool:
        return self.start <= offset <= self.end


def _attrs(**values: object) -> str:
    """XML attributes (a trailing `_` is dropped from a name, `_` inside becomes `-`), escaped."""
    parts = []
    for name, value in values.items():
        if value is None:
            continue
        key = name.rstrip("_").replace("_", "-")
        parts.append(f'{key}="{escape(str(value), quote=True)}"')
    return " ".join(parts)


def _region_rects(view: PartitionView, scale: _Scale, bar: _Bar) -> list[str]:
    top, height = bar[0], bar[1] - bar[0]
    out = []
    for region in view.regions:
        colour, words = REGION_STYLE[region.kind]
        x0, x1 = scale.x(region.start), scale.x(region.end)
        attrs = _attrs(
            class_=f"region region-{region.kind}",
            data_kind=region.kind,
            data_start=region.start,
            data_end=region.end,
            data_bytes=region.bytes,
            x=x0,
            y=top,
            width=max(x1 - x0, 0),
            height=height,
            fill=colour,
        )
        title = f"{words}: offsets [{region.start}, {region.end}), {region.bytes:,} bytes"
        out.append(f"<rect {attrs}><title>{escape(title)}</title></rect>")
    return out


def _segment_title(segment: SegmentView) -> str:
    state = "sealed" if segment.sealed else "active"
    words = (
        f"segment {segment.id}: offsets [{segment.base_offset}, {segment.next_offset}), "
        f"{segment.records:,} records, {segment.bytes:,} bytes, {state}"
    )
    if segment.retention_rule:
        words += f"; deleted at the next run by {segment.retention_rule}: {segment.retention_reason}"
    return words


def _segment_rects(view: PartitionView, scale: _Scale, bar: _Bar, hatch: str) -> list[str]:
    top, height = bar[0], bar[1] - bar[0]
    out = []
    for segment in view.segments:
        x0, x1 = scale.x(segment.base_offset), scale.x(segment.next_offset)
        rule = segment.retention_rule
        deleted = f" retention-delete retention-{'consumed' if rule == CONSUMED else 'other'}" if rule else ""
        attrs = _attrs(
            class_=f"segment{deleted}",
            data_segment_id=segment.id,
            data_base_offset=segment.base_offset,
            data_next_offset=segment.next_offset,
            data_records=segment.records,
            data_bytes=segment.bytes,
            data_sealed=str(segment.sealed).lower(),
            data_retention_rule=rule,
            x=x0,
            y=top,
            width=max(x1 - x0, 0),
            height=height,
            fill=f"url(#{hatch}-{'c' if rule == CONSUMED else 'o'})" if rule else "none",
            stroke="#ffffff",
            stroke_width=1,
        )
        out.append(f"<rect {attrs}><title>{escape(_segment_title(segment))}</title></rect>")
    return out


def _hatch_patterns(hatch: str) -> str:
    patterns = []
    for suffix, colour in (("c", CONSUMED_COLOUR), ("o", OTHER_RETENTION_COLOUR)):
        patterns.append(
            f'<pattern id="{hatch}-{suffix}" patternUnits="userSpaceOnUse" width="6" height="6" '
            f'patternTransform="rotate(45)"><rect width="6" height="6" fill="{colour}" fill-opacity="0.25"/>'
            f'<line x1="0" y1="0" x2="0" y2="6" stroke="{colour}" stroke-width="3"/></pattern>'
        )
    return "<defs>" + "".join(patterns) + "</defs>"


def _place_labels(
    items: Iterable[tuple[OffsetMarker, float]], right: float
) -> list[tuple[OffsetMarker, float, int, str]]:
    """Each label's row (0 nearest the bar) and anchor, so that labels in a row never overlap."""
    row_ends: list[float] = []
    placed: list[tuple[OffsetMarker, float, int, str]] = []
    for marker, x in sorted(items, key=lambda item: item[1]):
        width = len(marker.label) * _CHAR_WIDTH + 6
        anchor, x0 = ("end", x - width) if x + width > right else ("start", x)
        row = next((i for i, end in enumerate(row_ends) if end < x0), len(row_ends))
        if row == len(row_ends):
            row_ends.append(0.0)
        row_ends[row] = x0 + width
        placed.append((marker, x, row, anchor))
    return placed


def _marker_attrs(marker: OffsetMarker, inside: bool) -> str:
    return _attrs(
        class_=f"marker marker-{marker.kind}",
        data_marker=marker.kind,
        data_offset=marker.offset,
        data_group=marker.group,
        data_clamped=None if inside else "true",
    )


def _marker_group(marker: OffsetMarker, x: float, label_y: float, bar: _Bar, anchor: str, inside: bool) -> str:
    colour, _, above = MARKER_STYLE[marker.kind]
    line_from, line_to = (label_y + 3, bar[1]) if above else (bar[0], label_y - 11)
    text_x = x + 3 if anchor == "start" else x - 3
    width = 2.5 if marker.kind == "min-committed" else 1.5
    return (
        f"<g {_marker_attrs(marker, inside)}><title>{escape(marker.label)}</title>"
        f'<line x1="{x}" y1="{line_from}" x2="{x}" y2="{line_to}" stroke="{colour}" stroke-width="{width}"/>'
        f'<text x="{text_x}" y="{label_y}" fill="{colour}" text-anchor="{anchor}">{escape(marker.label)}</text></g>'
    )


def _labelled(
    view: PartitionView, found: list[tuple[OffsetMarker, float]], scale: _Scale, width: int
) -> tuple[_Bar, float, list[str]]:
    """The full drawing's bar position, height and overlay: offset labels at both ends of the axis,
    and the markers with their labels in rows above (log start, checkpoint) and below (groups) the bar."""
    above = _place_labels([(m, x) for m, x in found if MARKER_STYLE[m.kind][2]], width - _MARGIN)
    below = _place_labels([(m, x) for m, x in found if not MARKER_STYLE[m.kind][2]], width - _MARGIN)
    rows_above = max((row + 1 for _, _, row, _ in above), default=0)
    rows_below = max((row + 1 for _, _, row, _ in below), default=0)
    top = 8.0 + rows_above * _ROW_HEIGHT
    bar = (top, top + 34)
    overlay = [
        _axis_label(
            OffsetMarker("axis-start", view.axis_start, str(view.axis_start)), scale.x(view.axis_start), bar, "start"
        ),
        _axis_label(OffsetMarker("axis-end", view.axis_end, str(view.axis_end)), scale.x(view.axis_end), bar, "end"),
    ]
    for marker, x, row, anchor in above:
        label_y = top - 6 - row * _ROW_HEIGHT
        overlay.append(_marker_group(marker, x, label_y, bar, anchor, scale.inside(marker.offset)))
    for marker, x, row, anchor in below:
        label_y = bar[1] + 28 + row * _ROW_HEIGHT
        overlay.append(_marker_group(marker, x, label_y, bar, anchor, scale.inside(marker.offset)))
    return bar, bar[1] + 24 + rows_below * _ROW_HEIGHT, overlay


def render_partition_svg(view: PartitionView, *, width: int = 960, compact: bool = False) -> str:
    """The partition's bar as an SVG element. `compact` draws a small bar with the markers as
    lines only (for tables); the full drawing labels every marker and has a legend."""
    plan = view.plan
    hatch = f"hatch-{plan.topic}-{plan.partition}{'-mini' if compact else ''}"
    scale = _Scale(view.axis_start, view.axis_end, _MARGIN, width - 2 * _MARGIN)
    found = [(m, scale.x(m.offset)) for m in markers(view)]
    if compact:
        bar: _Bar = (4.0, 20.0)
        height, overlay = 24.0, [_marker_line(m, x, bar, scale.inside(m.offset)) for m, x in found]
    else:
        bar, height, overlay = _labelled(view, found, scale, width)
    root = _attrs(
        xmlns="http://www.w3.org/2000/svg",
        class_="log-bar" + (" log-bar-mini" if compact else ""),
        width="100%" if not compact else width,
        height=None if not compact else height,
        viewBox=f"0 0 {width} {height}",
        role="img",
        data_topic=plan.topic,
        data_partition=plan.partition,
        data_axis_start=view.axis_start,
        data_axis_end=view.axis_end,
        font_family="system-ui, sans-serif",
        font_size=11,
    )
    title = f"{plan.topic}-{plan.partition}: offsets [{view.axis_start}, {view.axis_end})"
    body = [_hatch_patterns(hatch), *_region_rects(view, scale, bar), *_segment_rects(view, scale, bar, hatch)]
    return f"<svg {root}><title>{escape(title)}</title>" + "".join(body + overlay) + "</svg>"


def _marker_line(marker: OffsetMarker, x: float, bar: _Bar, inside: bool) -> str:
    colour = MARKER_STYLE[marker.kind][0]
    return (
        f"<g {_marker_attrs(marker, inside)}><title>{escape(marker.label)}</title>"
        f'<line x1="{x}" y1="{bar[0] - 3}" x2="{x}" y2="{bar[1] + 3}" stroke="{colour}" stroke-width="2"/></g>'
    )


def _axis_label(marker: OffsetMarker, x: float, bar: _Bar, anchor: str) -> str:
    attrs = _attrs(
        class_="axis-label",
        data_marker=marker.kind,
        data_offset=marker.offset,
        x=x,
        y=bar[1] + 13,
        text_anchor=anchor,
        fill="#607d8b",
    )
    return f"<text {attrs}>{escape(marker.label)}</text>"


def legend(view: PartitionView) -> list[tuple[str, str]]:
    """(CSS background, words) for the colours of the view's full drawing, for the page's legend."""
    hatch = "repeating-linear-gradient(45deg, {0} 0 3px, {0}40 3px 6px)"
    entries = [REGION_STYLE[kind] for kind in dict.fromkeys(r.kind for r in view.regions)]
    rules = {s.retention_rule == CONSUMED for s in view.segments if s.retention_rule}
    if True in rules:
        entries.append((hatch.format(CONSUMED_COLOUR), "deleted at the next run by consumed retention (KIP-68)"))
    if False in rules:
        entries.append(
            (hatch.format(OTHER_RETENTION_COLOUR), "deleted at the next run by log start, size or time retention")
        )
    for kind in dict.fromkeys(m.kind for m in markers(view)):
        colour, label, _ = MARKER_STYLE[kind]
        entries.append((colour, f"marker: {label or 'a consumer group’s committed offset'}"))
    return entries

"""A summary's partition entries stored as columns (issue 50): one JSON list per field, so that a
view of 100,000 partitions parses and validates them column by column rather than object by
object (about four times faster; bench/control_plane.py --topics). Storage is untrusted: every
column is checked for its type, range and length before an entry is built from it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lakecleaner.io.strict_json import LONG_MAX, Malformed
from lakecleaner.policy.cleanable import PartitionGauges
from lakecleaner.policy.figures import PartitionFigures
from lakecleaner.summaries.entry import PartitionSummary

#: The most characters a stored reason may have.
MAX_REASON = 4096
_SIGNED = 1 << 62


def _whole(col: list[Any]) -> bool:
    return all(type(x) is int for x in col) and (not col or (min(col) >= 0 and max(col) <= LONG_MAX))


def _optional(check: Callable[[list[Any]], bool]) -> Callable[[list[Any]], bool]:
    return lambda col: check([x for x in col if x is not None])


def _signed(col: list[Any]) -> bool:
    return all(type(x) is int for x in col) and (not col or (min(col) >= -_SIGNED and max(col) <= _SIGNED))


def _flag(col: list[Any]) -> bool:
    return all(x is True or x is False for x in col)


def _ratio(col: list[Any]) -> bool:
    return all(type(x) is float or type(x) is int for x in col) and (not col or (min(col) >= 0 and max(col) <= 1))


def _percent(col: list[Any]) -> bool:
    return all(type(x) is int for x in col) and (not col or (min(col) >= 0 and max(col) <= 100))


def _reason(col: list[Any]) -> bool:
    return all(type(x) is str and len(x) <= MAX_REASON for x in col)


#: The columns, in the order an entry's values are given to `_entry`, with each one's check.
COLUMNS: tuple[tuple[str, Callable[[list[Any]], bool]], ...] = (
    ("partition", _whole),
    ("manifest_version", _whole),
    ("log_start_offset", _whole),
    ("next_offset", _whole),
    ("segments", _whole),
    ("records", _whole),
    ("size_bytes", _whole),
    ("tombstones", _whole),
    ("dirty_ratio", _optional(_ratio)),
    ("due", _flag),
    ("overdue", _flag),
    ("uncleanable", _flag),
    ("dirty_percent", _optional(_percent)),
    ("cleanable_bytes", _whole),
    ("not_yet_cleanable_bytes", _whole),
    ("max_compaction_delay_ms", _whole),
    ("compaction_reason", _optional(_reason)),
    ("retention_reason", _optional(_reason)),
    ("record_deadline_ms", _optional(_signed)),
    ("tombstone_horizon_ms", _optional(_signed)),
    ("cleaner_checkpoint", _optional(_whole)),
    ("active_created_ms", _optional(_whole)),
    ("pending_deletes", _whole),
    ("uncleanable_mark", _optional(_reason)),
    ("dead_bytes", _whole),
)
#: Columns a summary written before them lacks: read as this value for every entry.
_ADDED_COLUMNS = {"dead_bytes": 0}


def _values(e: PartitionSummary) -> tuple[Any, ...]:
    f, g = e.figures, e.gauges
    return (
        f.partition,
        f.manifest_version,
        f.log_start_offset,
        f.next_offset,
        f.segments,
        f.records,
        f.size_bytes,
        f.tombstones,
        f.dirty_ratio,
        g.due,
        g.overdue,
        g.uncleanable,
        g.dirty_percent,
        g.cleanable_bytes,
        g.not_yet_cleanable_bytes,
        g.max_compaction_delay_ms,
        e.compaction_reason,
        e.retention_reason,
        e.record_deadline_ms,
        e.tombstone_horizon_ms,
        e.cleaner_checkpoint,
        e.active_created_ms,
        e.pending_deletes,
        e.uncleanable_mark,
        f.dead_bytes,
    )


def _entry(
    partition: int,
    version: int,
    log_start: int,
    next_offset: int,
    segments: int,
    records: int,
    size: int,
    tombstones: int,
    ratio: float | None,
    due: bool,
    overdue: bool,
    uncleanable: bool,
    percent: int | None,
    cleanable: int,
    not_yet: int,
    delay: int,
    compaction_reason: str | None,
    retention_reason: str | None,
    record_deadline: int | None,
    horizon: int | None,
    checkpoint: int | None,
    active_created: int | None,
    pending_deletes: int,
    mark: str | None,
    dead: int,
) -> PartitionSummary:
    if record_deadline is None or horizon is None:
        nearest = horizon if record_deadline is None else record_deadline
    else:
        nearest = min(record_deadline, horizon)
    figures = PartitionFigures(
        partition,
        version,
        log_start,
        next_offset,
        segments,
        records,
        size,
        tombstones,
        None if ratio is None else float(ratio),
        nearest,
        dead,
    )
    gauges = PartitionGauges(due, overdue, uncleanable, float(ratio or 0.0), percent, cleanable, not_yet, delay)
    return PartitionSummary(
        figures,
        gauges,
        compaction_reason,
        retention_reason,
        record_deadline,
        horizon,
        checkpoint,
        active_created,
        pending_deletes,
        mark,
    )


def encode_entries(entries: Sequence[PartitionSummary]) -> dict[str, list[Any]]:
    """The entries as columns, in `entries`' order."""
    rows = [_values(e) for e in entries]
    return {name: [row[i] for row in rows] for i, (name, _) in enumerate(COLUMNS)}


def decode_entries(raw: object) -> list[PartitionSummary]:
    """The entries of stored columns; Malformed naming the column for any shape no writer makes."""
    if not isinstance(raw, dict):
        raise Malformed("field partitions is not an object of columns")
    count: int | None = None
    columns = []
    for name, check in COLUMNS:
        column = raw.get(name)
        if column is None and name in _ADDED_COLUMNS and count is not None:
            column = [_ADDED_COLUMNS[name]] * count
        if not isinstance(column, list):
            raise Malformed(f"column partitions.{name} is missing or not a list")
        if count is not None and len(column) != count:
            raise Malformed(f"column partitions.{name} has {len(column)} values where the others have {count}")
        count = len(column)
        if not check(column):
            raise Malformed(f"column partitions.{name} holds a value of the wrong type or range")
        columns.append(column)
    return [_entry(*values) for values in zip(*columns, strict=True)]

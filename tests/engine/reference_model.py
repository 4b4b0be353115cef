"""A pure-Python reference model of one compaction pass (DESIGN section 4), for tests only.

Deliberately naive: dictionaries and loops over records, written from the rules, sharing no
code with the engine. Records are dicts as `pyarrow.Table.to_pylist()` gives them for
SEGMENT_SCHEMA (offset, timestamp, key, value, headers, delete_horizon_ms).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from lakecleaner.config import TopicConfig
from lakecleaner.log.manifest import Manifest

Row = dict[str, Any]


def version(row: Row, header: str) -> int | None:
    """KIP-280: the last header named `header` whose value is exactly 8 bytes, as a signed long."""
    found = None
    for h in row["headers"] or []:
        if h["key"] == header and h["value"] is not None and len(h["value"]) == 8:
            found = struct.unpack(">q", h["value"])[0]
    return found


def malformed(row: Row, header: str) -> bool:
    return any(h["key"] == header and (h["value"] is None or len(h["value"]) != 8) for h in row["headers"] or [])


def beats(a: Row, b: Row, config: TopicConfig) -> bool:
    """Whether record `a` wins over record `b` of the same key."""
    if config.compaction_strategy == "timestamp" and a["timestamp"] != b["timestamp"]:
        return bool(a["timestamp"] > b["timestamp"])
    if config.compaction_strategy == "header":
        va, vb = version(a, config.compaction_strategy_header), version(b, config.compaction_strategy_header)
        if (va is None) != (vb is None):
            return va is not None
        if va is not None and vb is not None and va != vb:
            return va > vb
    return bool(a["offset"] > b["offset"])


@dataclass
class Expected:
    """What a pass must produce."""

    rows: list[Row]
    segments: list[tuple[int, int, int]]
    superseded: int = 0
    unkeyed: int = 0
    stamped: int = 0
    removed: int = 0
    malformed: int = 0
    changed_groups: list[bool] = field(default_factory=list)


def expected_pass(rows: list[Row], manifest: Manifest, u: int, config: TopicConfig, now: int) -> Expected:
    """The log (rows from the log start) and its segments (base, next, records) after one pass
    over [log start, u) at `now`."""
    start = manifest.log_start_offset
    winners: dict[bytes, Row] = {}
    out = Expected([], [])
    for row in rows:
        if not start <= row["offset"] < u:
            continue
        if config.compaction_strategy == "header" and malformed(row, config.compaction_strategy_header):
            out.malformed += 1
        key = row["key"]
        if key is None:
            continue
        if key not in winners or beats(row, winners[key], config):
            winners[key] = row
    result: dict[int, Row | None] = {}
    for row in rows:
        offset = row["offset"]
        if offset >= u:
            result[offset] = row
        elif row["key"] is None:
            out.unkeyed += 1
            result[offset] = None
        elif winners[row["key"]] is not row:
            out.superseded += 1
            result[offset] = None
        elif row["value"] is None and row["delete_horizon_ms"] is not None and row["delete_horizon_ms"] <= now:
            out.removed += 1
            result[offset] = None
        elif row["value"] is None and row["delete_horizon_ms"] is None:
            out.stamped += 1
            result[offset] = {**row, "delete_horizon_ms": now + config.delete_retention_ms}
        else:
            result[offset] = row
    out.rows = [r for r in (result[row["offset"]] for row in rows) if r is not None]
    out.segments = _segments(rows, result, manifest, u, config, out)
    return out


def _segments(
    rows: list[Row], result: dict[int, Row | None], manifest: Manifest, u: int, config: TopicConfig, out: Expected
) -> list[tuple[int, int, int]]:
    start = manifest.log_start_offset
    inputs = [s for s in manifest.segments if s.next_offset > start and s.base_offset < u]
    groups: list[list[Any]] = []
    for s in inputs:
        if groups and sum(g.size_bytes for g in groups[-1]) + s.size_bytes <= config.segment_bytes:
            groups[-1].append(s)
        else:
            groups.append([s])
    segments = [(s.base_offset, s.next_offset, s.record_count) for s in manifest.segments if s.next_offset <= start]
    for group in groups:
        base, end = group[0].base_offset, group[-1].next_offset
        inside = [r for r in rows if base <= r["offset"] < end]
        kept = [result[r["offset"]] for r in inside]
        changed = any(k is None or k != r for k, r in zip(kept, inside, strict=True))
        out.changed_groups.append(changed)
        if changed:
            segments.append((base, end, sum(k is not None for k in kept)))
        else:
            segments.extend((s.base_offset, s.next_offset, s.record_count) for s in group)
    segments.extend((s.base_offset, s.next_offset, s.record_count) for s in manifest.segments if s.base_offset >= u)
    return segments

"""Builders of manifests and configs for the policy tests (times around a fixed NOW)."""

from __future__ import annotations

from lakecleaner.config import TopicConfig
from lakecleaner.log.manifest import Manifest, Segment, SegmentFile

NOW = 1_700_000_000_000
SECOND = 1000
HOUR = 3_600_000
DAY = 24 * HOUR
OLD = NOW - 30 * DAY

COMPACT = TopicConfig(cleanup_policy=frozenset({"compact"}), retention_ms=-1)
DELETE = TopicConfig(cleanup_policy=frozenset({"delete"}), retention_ms=-1)
COMPACT_DELETE = TopicConfig(cleanup_policy=frozenset({"compact", "delete"}), retention_ms=-1)


def segment(
    base: int,
    span: int = 10,
    *,
    records: int | None = None,
    size: int = 100,
    max_ts: int = OLD,
    first_ts: int | None = None,
    created_ms: int = 0,
    sealed: bool = True,
    horizon: int | None = None,
    tombstones: int | None = None,
) -> Segment:
    """A segment [base, base + span) with one file; `records` defaults to `span`, `first_ts` to `max_ts`."""
    count = span if records is None else records
    files = (SegmentFile(f"segments/{base:020d}-s{base}.parquet", base, base + span, count, size),) if count else ()
    return Segment(
        id=f"s{base}",
        base_offset=base,
        next_offset=base + span,
        files=files,
        record_count=count,
        size_bytes=size,
        first_batch_max_timestamp=max_ts if first_ts is None else first_ts,
        max_timestamp=max_ts,
        created_ms=created_ms,
        sealed=sealed,
        tombstone_count=(1 if horizon is not None else 0) if tombstones is None else tombstones,
        earliest_delete_horizon_ms=horizon,
    )


def active(base: int, span: int = 10, **kwargs: object) -> Segment:
    """An unsealed (active) segment, written just now unless `max_ts` says otherwise."""
    kwargs.setdefault("max_ts", NOW)
    return segment(base, span, sealed=False, **kwargs)  # type: ignore[arg-type]


def manifest(
    *segments: Segment, log_start: int | None = None, checkpoint: int | None = None, partition: int = 0
) -> Manifest:
    """A valid manifest of topic "t" holding `segments` (which must touch)."""
    next_offset = segments[-1].next_offset if segments else 0
    result = Manifest(
        topic="t",
        partition=partition,
        version=7,
        log_start_offset=(segments[0].base_offset if segments else 0) if log_start is None else log_start,
        next_offset=next_offset,
        cleaner_checkpoint=checkpoint,
        segments=segments,
    )
    assert result.problems() == [], result.problems()
    return result

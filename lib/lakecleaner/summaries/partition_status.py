"""Per-partition status figures (`lakecleaner status`), from a partition's summary entry: its
topic's summary (issue 50) or, where that cannot answer, its manifest planned now."""

from __future__ import annotations

from dataclasses import dataclass

from lakecleaner.summaries.entry import PartitionSummary


@dataclass(frozen=True)
class PartitionStatus:
    partition: int
    segments: int
    records: int
    bytes: int
    #: Bytes of the cleaned section that deletion vectors remove: stored until a clean rewrites them.
    dead_bytes: int
    log_start_offset: int
    next_offset: int
    cleaner_checkpoint: int | None
    active_segment_age_ms: int | None
    pending_deletes: int
    #: Why the partition is skipped by compaction (Kafka's uncleanable partitions), None if it is not.
    uncleanable: str | None
    #: Where the row comes from: "summary" (the topic's summary as of `planned_at_ms`) or "manifest".
    source: str


def partition_status(entry: PartitionSummary, now_ms: int, from_summary: bool) -> PartitionStatus:
    """What `lakecleaner status` shows of a partition; the active segment's age counts from its
    creation to `now_ms`."""
    figures = entry.figures
    created = entry.active_created_ms
    return PartitionStatus(
        partition=figures.partition,
        segments=figures.segments,
        records=figures.records,
        bytes=figures.size_bytes,
        dead_bytes=figures.dead_bytes,
        log_start_offset=figures.log_start_offset,
        next_offset=figures.next_offset,
        cleaner_checkpoint=entry.cleaner_checkpoint,
        active_segment_age_ms=None if created is None else max(0, now_ms - created),
        pending_deletes=entry.pending_deletes,
        uncleanable=entry.uncleanable_mark,
        source="summary" if from_summary else "manifest",
    )

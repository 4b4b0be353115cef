"""Per-partition status figures, from the manifest alone."""

from __future__ import annotations

from dataclasses import dataclass

from lakecleaner.cleaner_state import UncleanablePartition
from lakecleaner.config import TopicConfig
from lakecleaner.log.manifest import Manifest
from lakecleaner.policy.uncleanable import still_uncleanable


@dataclass(frozen=True)
class PartitionStatus:
    partition: int
    segments: int
    records: int
    bytes: int
    log_start_offset: int
    next_offset: int
    cleaner_checkpoint: int | None
    active_segment_age_ms: int | None
    pending_deletes: int
    #: Why the partition is skipped by compaction (Kafka's uncleanable partitions), None if it is not.
    uncleanable: str | None = None


def partition_status(
    partition: int, manifest: Manifest, now_ms: int, config: TopicConfig, mark: UncleanablePartition | None = None
) -> PartitionStatus:
    """What `lakecleaner status` shows; the active segment's age counts from its creation, and
    `mark` is the partition's uncleanable mark, shown while it still applies."""
    active = manifest.active_segment
    uncleanable = mark.reason if mark is not None and still_uncleanable(mark, manifest, config) else None
    return PartitionStatus(
        partition=partition,
        segments=len(manifest.segments),
        records=manifest.record_count,
        bytes=manifest.size_bytes,
        log_start_offset=manifest.log_start_offset,
        next_offset=manifest.next_offset,
        cleaner_checkpoint=manifest.cleaner_checkpoint,
        active_segment_age_ms=None if active is None else max(0, now_ms - active.created_ms),
        pending_deletes=len(manifest.pending_deletes),
        uncleanable=uncleanable,
    )

"""Per-partition status figures, from the manifest alone."""

from __future__ import annotations

from dataclasses import dataclass

from lakecleaner.log.manifest import Manifest


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


def partition_status(partition: int, manifest: Manifest, now_ms: int) -> PartitionStatus:
    """What `lakecleaner status` shows; the active segment's age counts from its creation."""
    active = manifest.active_segment
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
    )

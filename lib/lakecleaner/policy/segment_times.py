"""The two timestamps of a segment that Kafka's time-based decisions read (LogSegment)."""

from __future__ import annotations

from lakecleaner.log.manifest import Segment


def largest_timestamp(segment: Segment) -> int:
    """Kafka's `LogSegment.largestTimestamp`: the max record timestamp, or the segment's
    `lastModified` (`Segment.modified_ms`) when no record carries one (max < 0).

    Read by `retention.ms`, consumed retention (KIP-68) and `min.compaction.lag.ms` (KIP-58).
    """
    return segment.max_timestamp if segment.max_timestamp >= 0 else segment.modified_ms


def rolling_timestamp(segment: Segment) -> int:
    """Kafka's rolling-based timestamp (`LogSegment.timeWaitedForRoll`): the first batch's max
    timestamp, or the segment's creation time (`LogSegment.created`: the previous roll) when the
    first batch has none (< 0)."""
    return segment.first_batch_max_timestamp if segment.first_batch_max_timestamp >= 0 else segment.created_ms

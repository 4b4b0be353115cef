"""The gauges Kafka's cleaner exports (kafka-cleaner-semantics.md section 1.13), per topic, and the
deletion deadline KIP-354 promises, per partition.

The gauges are computed from a topic's compaction assessments, as Kafka's come from the last
`grabFilthiestCompactedLog`. `uncleanable-bytes` here is the bytes at or above U (the active
segment and min.compaction.lag.ms) summed over partitions: Kafka's gauge of the same name counts
the partitions it marked uncleanable after an error, which a plan does not know about.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lakecleaner.config import LONG_MAX, TopicConfig
from lakecleaner.log.manifest import Manifest
from lakecleaner.policy.cleanable import CompactionAssessment


@dataclass(frozen=True)
class DeletionDeadline:
    """When a superseded record or an expired tombstone of a compacted partition must be gone.

    `record_deadline_ms`: KIP-354's promise, the earliest first-batch timestamp (> 0) among the
    segments at or after F, the active one included (the idle roll keeps the promise for it),
    plus max.compaction.lag.ms; None when the lag is disabled (Long.MAX_VALUE).
    `tombstone_horizon_ms`: the earliest tombstone delete horizon in the log (KIP-534).
    `deadline_ms` is the earlier of the two and `seconds_left` the whole seconds from now to it,
    negative once it has passed.
    """

    record_deadline_ms: int | None
    tombstone_horizon_ms: int | None
    deadline_ms: int
    seconds_left: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "record_deadline_ms": self.record_deadline_ms,
            "tombstone_horizon_ms": self.tombstone_horizon_ms,
            "deadline_ms": self.deadline_ms,
            "seconds_left": self.seconds_left,
        }


@dataclass(frozen=True)
class TopicMetrics:
    """A topic's cleaner gauges under Kafka's names (see `to_dict`)."""

    max_compaction_delay_secs: int
    max_dirty_percent: int
    cleanable_bytes: int
    uncleanable_bytes: int
    partitions_due: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "max-compaction-delay-secs": self.max_compaction_delay_secs,
            "max-dirty-percent": self.max_dirty_percent,
            "cleanable-bytes": self.cleanable_bytes,
            "uncleanable-bytes": self.uncleanable_bytes,
            "partitions-due": self.partitions_due,
        }


def deletion_deadline(
    manifest: Manifest, config: TopicConfig, first_dirty_offset: int, now_ms: int
) -> DeletionDeadline | None:
    """The partition's deletion deadline (see DeletionDeadline); None when none applies."""
    live = [s for s in manifest.segments if s.next_offset > manifest.log_start_offset]
    record_deadline = None
    if config.max_compaction_lag_ms != LONG_MAX:
        firsts = [s.first_batch_max_timestamp for s in live if s.base_offset >= first_dirty_offset]
        earliest = min((t for t in firsts if t > 0), default=None)
        record_deadline = None if earliest is None else earliest + config.max_compaction_lag_ms
    horizons = [s.earliest_delete_horizon_ms for s in live if s.earliest_delete_horizon_ms is not None]
    horizon = min(horizons, default=None)
    deadlines = [d for d in (record_deadline, horizon) if d is not None]
    if not deadlines:
        return None
    deadline = min(deadlines)
    return DeletionDeadline(record_deadline, horizon, deadline, (deadline - now_ms) // 1000)


def topic_metrics(assessments: Sequence[CompactionAssessment]) -> TopicMetrics:
    """Kafka's gauges over a topic's partitions: max-compaction-delay-secs (the largest KIP-354
    delay, in whole seconds), max-dirty-percent (floor(100 × the largest dirty ratio) over the
    partitions with clean or cleanable bytes), the cleanable and uncleanable bytes, and how many
    partitions are due. Partitions of topics that are not compacted count as zero."""
    ranges = [a.range for a in assessments if a.range is not None]
    due = sum(1 for a in assessments if a.due)
    return TopicMetrics(
        max_compaction_delay_secs=max((r.max_compaction_delay_ms // 1000 for r in ranges), default=0),
        max_dirty_percent=max((r.dirty_percent for r in ranges if r.total_bytes > 0), default=0),
        cleanable_bytes=sum(r.cleanable_bytes for r in ranges),
        uncleanable_bytes=sum(r.uncleanable_bytes for r in ranges),
        partitions_due=due,
    )

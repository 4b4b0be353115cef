"""The gauges Kafka's cleaner exports (kafka-cleaner-semantics.md section 1.13), per topic, and the
deletion deadline KIP-354 promises, per partition.

The gauges are computed from a topic's compaction assessments, as Kafka's come from the last
`grabFilthiestCompactedLog`, and from the topic's cleaner state (its uncleanable partitions and
last run). `uncleanable-partitions-count` and `uncleanable-bytes` mean what they mean in Kafka
(partitions marked uncleanable after a failed compaction, and the cleanable bytes [F, U) of
those); the bytes at or above U (the active segment, min.compaction.lag.ms), which Kafka exports
under no name, are `not-yet-cleanable-bytes`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lakecleaner.cleaner_state import LastRun
from lakecleaner.config import LONG_MAX, TopicConfig
from lakecleaner.log.manifest import Manifest
from lakecleaner.policy.cleanable import PartitionGauges, holds_dirty_records, vector_deadlines


@dataclass(frozen=True)
class DeletionDeadline:
    """When a superseded record or an expired tombstone of a compacted partition must be gone.

    `record_deadline_ms`: KIP-354's promise, the earliest first-batch timestamp (> 0) among the
    segments at or after F, the active one included (the idle roll keeps the promise for it),
    plus max.compaction.lag.ms, or ★ the earliest `erase_by_ms` of a deletion vector (records it
    hides are physically present until a clean rewrites their file, issue 79) when that is
    earlier; None when the lag is disabled (Long.MAX_VALUE).
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
    """A topic's cleaner gauges under Kafka's names (see `to_dict`); the three run gauges are
    None before the topic's first compaction run."""

    max_compaction_delay_secs: int
    max_dirty_percent: int
    cleanable_bytes: int
    not_yet_cleanable_bytes: int
    uncleanable_partitions_count: int
    uncleanable_bytes: int
    partitions_due: int
    time_since_last_run_ms: int | None = None
    max_clean_time_secs: int | None = None
    max_buffer_utilization_percent: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "max-compaction-delay-secs": self.max_compaction_delay_secs,
            "max-dirty-percent": self.max_dirty_percent,
            "cleanable-bytes": self.cleanable_bytes,
            "not-yet-cleanable-bytes": self.not_yet_cleanable_bytes,
            "uncleanable-partitions-count": self.uncleanable_partitions_count,
            "uncleanable-bytes": self.uncleanable_bytes,
            "partitions-due": self.partitions_due,
            "time-since-last-run-ms": self.time_since_last_run_ms,
            "max-clean-time-secs": self.max_clean_time_secs,
            "max-buffer-utilization-percent": self.max_buffer_utilization_percent,
        }


def deletion_deadline(
    manifest: Manifest, config: TopicConfig, first_dirty_offset: int, now_ms: int
) -> DeletionDeadline | None:
    """The partition's deletion deadline (see DeletionDeadline); None when none applies."""
    live = [s for s in manifest.segments if s.next_offset > manifest.log_start_offset]
    record_deadline = None
    if config.max_compaction_lag_ms != LONG_MAX:
        firsts = [s.first_batch_max_timestamp for s in live if holds_dirty_records(s, first_dirty_offset)]
        earliest = min((t for t in firsts if t > 0), default=None)
        dirty = None if earliest is None else earliest + config.max_compaction_lag_ms
        vectors = [erase_by for erase_by, _, _ in vector_deadlines(live)]
        record_deadline = min((d for d in (dirty, *vectors) if d is not None), default=None)
    horizons = [s.earliest_delete_horizon_ms for s in live if s.earliest_delete_horizon_ms is not None]
    horizon = min(horizons, default=None)
    deadlines = [d for d in (record_deadline, horizon) if d is not None]
    if not deadlines:
        return None
    deadline = min(deadlines)
    return DeletionDeadline(record_deadline, horizon, deadline, (deadline - now_ms) // 1000)


def topic_metrics(gauges: Sequence[PartitionGauges], last_run: LastRun | None = None, now_ms: int = 0) -> TopicMetrics:
    """Kafka's gauges over a topic's partitions (each partition's `PartitionGauges`, from its
    compaction assessment): max-compaction-delay-secs (the largest KIP-354 delay, in whole
    seconds), max-dirty-percent (floor(100 × the largest dirty ratio) over the partitions with clean
    or cleanable bytes), the cleanable bytes, uncleanable-partitions-count and uncleanable-bytes
    (Σ cleanable bytes [F, U) of the partitions marked uncleanable), not-yet-cleanable-bytes (at or
    above U), and how many partitions are due. From the last run: time-since-last-run-ms (now − its
    start, Kafka's last `grabFilthiestCompactedLog`), max-clean-time-secs and
    max-buffer-utilization-percent. Partitions of topics that are not compacted count as zero."""
    return TopicMetrics(
        max_compaction_delay_secs=max((g.max_compaction_delay_ms // 1000 for g in gauges), default=0),
        max_dirty_percent=max((g.dirty_percent for g in gauges if g.dirty_percent is not None), default=0),
        cleanable_bytes=sum(g.cleanable_bytes for g in gauges),
        not_yet_cleanable_bytes=sum(g.not_yet_cleanable_bytes for g in gauges),
        uncleanable_partitions_count=sum(1 for g in gauges if g.uncleanable),
        uncleanable_bytes=sum(g.cleanable_bytes for g in gauges if g.uncleanable),
        partitions_due=sum(1 for g in gauges if g.due),
        time_since_last_run_ms=None if last_run is None else max(0, now_ms - last_run.started_ms),
        max_clean_time_secs=None if last_run is None else last_run.clean_time_ms // 1000,
        max_buffer_utilization_percent=None if last_run is None else last_run.buffer_utilization_percent,
    )

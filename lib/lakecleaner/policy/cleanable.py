"""The cleanable range of a partition and whether it is due for compaction.

This is Kafka's `LogCleanerManager.cleanableOffsets` / `calculateCleanableBytes` /
`maxCompactionDelay` and the eligibility test of `grabFilthiestCompactedLog` (DESIGN section 4,
kafka-cleaner-semantics.md sections 1.3-1.7), computed from the manifest alone. F is the offset Kafka's
`cleanableOffsets` takes: the checkpoint, or the log start offset when the checkpoint is missing,
below the log start (DeleteRecords, retention) or beyond the log end, so F can lie inside a
segment. U is a segment boundary, as in Kafka's `calculateCleanableBytes`. A segment holding F
counts as cleanable only (it holds dirty records); Kafka counts it as both clean and cleanable
(docs/architecture.md, "Where lakecleaner differs from Kafka").

★ Deletion vectors (issue 79): the bytes of the records they remove below F, `dead_bytes`,
count as dirty in the dirty ratio (Kafka's clean section holds no dead record: its cleaner
rewrites it), and a vector whose records are due to be physically gone (`erase_by_ms` ≤ now,
KIP-354) makes its partition due (`VECTOR_ERASURE`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lakecleaner.cleaner_state import UncleanablePartition
from lakecleaner.config import TopicConfig
from lakecleaner.log.manifest import Manifest, Segment, SegmentFile
from lakecleaner.policy.segment_times import largest_timestamp
from lakecleaner.policy.text import format_duration_ms, format_ratio, format_timestamp_ms

#: Why the cleanable range ends where it does (CleanableRange.uncleanable_cause).
ACTIVE_SEGMENT = "active_segment"
MIN_COMPACTION_LAG = "min_compaction_lag"
END_OF_LOG = "end_of_log"

#: What made a partition due (CompactionAssessment.triggers).
DIRTY_RATIO = "dirty_ratio"
MAX_COMPACTION_LAG = "max_compaction_lag"
TOMBSTONE_HORIZON = "tombstone_horizon"
VECTOR_ERASURE = "vector_erasure"


@dataclass(frozen=True)
class CleanableRange:
    """The cleanable range [F, U) of a compacted partition and the byte counts around it.

    `clean_bytes` are the segments below F, `cleanable_bytes` those in [F, U), and
    `not_yet_cleanable_bytes` the rest (from U to the end, the active segment included), which the
    dirty ratio does not count (KIP-58). `dead_bytes` are the part of `clean_bytes` that deletion
    vectors remove (each file's bytes times the share of its rows removed). `checkpoint_reset`
    says why F is not the stored cleaner checkpoint (the caller should store F), None when the
    checkpoint was used as it is. `erasure_due_ms` is the earliest passed deadline of a vector in
    [log start, U) (None: none has passed).
    """

    first_dirty_offset: int
    first_uncleanable_offset: int
    uncleanable_cause: str
    checkpoint_reset: str | None
    clean_bytes: int
    cleanable_bytes: int
    not_yet_cleanable_bytes: int
    max_compaction_delay_ms: int
    expired_tombstone_horizon_ms: int | None
    dead_bytes: int = 0
    erasure_due_ms: int | None = None

    @property
    def total_bytes(self) -> int:
        """clean + cleanable bytes: Kafka's `LogToClean.totalBytes` (uncleanable bytes excluded)."""
        return self.clean_bytes + self.cleanable_bytes

    @property
    def dirty_bytes(self) -> int:
        """cleanable + dead bytes: what a clean would reclaim or read as new."""
        return self.cleanable_bytes + self.dead_bytes

    @property
    def dirty_ratio(self) -> float:
        """(cleanable + dead) / (clean + cleanable), 0 when both are 0: Kafka's `cleanableRatio`,
        with ★ the bytes deletion vectors remove counted as dirty (none in Kafka's layout)."""
        return self.dirty_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def dirty_percent(self) -> int:
        """floor(100 × dirty ratio), computed exactly on the byte counts."""
        return 100 * self.dirty_bytes // self.total_bytes if self.total_bytes else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "first_dirty_offset": self.first_dirty_offset,
            "first_uncleanable_offset": self.first_uncleanable_offset,
            "uncleanable_cause": self.uncleanable_cause,
            "checkpoint_reset": self.checkpoint_reset,
            "clean_bytes": self.clean_bytes,
            "cleanable_bytes": self.cleanable_bytes,
            "not_yet_cleanable_bytes": self.not_yet_cleanable_bytes,
            "dirty_ratio": self.dirty_ratio,
            "max_compaction_delay_ms": self.max_compaction_delay_ms,
            "expired_tombstone_horizon_ms": self.expired_tombstone_horizon_ms,
            "dead_bytes": self.dead_bytes,
            "erasure_due_ms": self.erasure_due_ms,
        }


@dataclass(frozen=True)
class CompactionAssessment:
    """Whether a partition is due for compaction, why, and its cleanable range.

    `range` is None for topics whose cleanup.policy does not include compact: Kafka's cleaner
    never looks at them. `uncleanable` is the mark of a failed compaction when it makes the
    partition skipped (policy.uncleanable). `triggers` lists what made the partition due (DIRTY_RATIO,
    MAX_COMPACTION_LAG, TOMBSTONE_HORIZON); `reason` says it in words, or why it is not due.
    """

    due: bool
    reason: str
    triggers: tuple[str, ...] = ()
    range: CleanableRange | None = None
    uncleanable: UncleanablePartition | None = None

    @property
    def overdue(self) -> bool:
        """Due because of KIP-354: delay > 0 with cleanable bytes (Kafka's `needCompactionNow`)."""
        return MAX_COMPACTION_LAG in self.triggers

    @property
    def dirty_ratio(self) -> float:
        return 0.0 if self.range is None else self.range.dirty_ratio

    @property
    def gauges(self) -> PartitionGauges:
        return PartitionGauges.of(self)

    def to_dict(self) -> dict[str, Any]:
        return {
            "due": self.due,
            "reason": self.reason,
            "triggers": list(self.triggers),
            "range": None if self.range is None else self.range.to_dict(),
            "uncleanable": None if self.uncleanable is None else self.uncleanable.to_dict(),
        }


@dataclass(frozen=True)
class PartitionGauges:
    """What a partition's compaction assessment adds to its topic's cleaner gauges
    (`policy.metrics.topic_metrics`) and to the compaction order (`policy.selection`): the few
    numbers a per-topic summary keeps of it (issue 50), so a topic's gauges and order come out
    the same from its summary as from its plan.

    `dirty_percent` is None where the partition has no clean or cleanable bytes (or the topic is
    not compacted: every byte count is then 0), as Kafka's max-dirty-percent skips such logs.
    """

    due: bool
    overdue: bool
    uncleanable: bool
    dirty_ratio: float
    dirty_percent: int | None
    cleanable_bytes: int
    not_yet_cleanable_bytes: int
    max_compaction_delay_ms: int

    @classmethod
    def of(cls, assessment: CompactionAssessment) -> PartitionGauges:
        cleanable = assessment.range
        return cls(
            due=assessment.due,
            overdue=assessment.overdue,
            uncleanable=assessment.uncleanable is not None,
            dirty_ratio=assessment.dirty_ratio,
            dirty_percent=None if cleanable is None or cleanable.total_bytes == 0 else cleanable.dirty_percent,
            cleanable_bytes=0 if cleanable is None else cleanable.cleanable_bytes,
            not_yet_cleanable_bytes=0 if cleanable is None else cleanable.not_yet_cleanable_bytes,
            max_compaction_delay_ms=0 if cleanable is None else cleanable.max_compaction_delay_ms,
        )


def first_dirty_offset(manifest: Manifest) -> tuple[int, str | None]:
    """F, and why the stored checkpoint was not used as it is (None when it was).

    Kafka (`LogCleanerManager.cleanableOffsets`): no checkpoint → the log start offset; a checkpoint
    below the log start offset (retention or a trim passed it) or beyond the log end offset
    (corrupt) → reset to the log start offset; otherwise the checkpoint itself. F is not rounded to
    a segment boundary, and may lie inside the active segment (then U < F and nothing is cleanable).
    """
    checkpoint, start, end = manifest.cleaner_checkpoint, manifest.log_start_offset, manifest.next_offset
    if checkpoint is None:
        return start, f"no cleaner checkpoint: cleaning starts at the log start offset {start}"
    if checkpoint < start:
        return start, f"cleaner checkpoint {checkpoint} is below the log start offset {start}: reset to it"
    if checkpoint > end:
        return (
            start,
            f"cleaner checkpoint {checkpoint} is beyond the log end offset {end}: reset to the log start {start}",
        )
    return checkpoint, None


def holds_dirty_records(segment: Segment, first_dirty: int) -> bool:
    """Whether a segment lies at or after F or holds F: it holds offsets ≥ F (an empty segment
    counts by its base). Kafka's `logSegments(F, …)` selects the same segments."""
    return segment.next_offset > first_dirty or segment.base_offset >= first_dirty


def first_uncleanable_offset(manifest: Manifest, config: TopicConfig, first_dirty: int, now_ms: int) -> tuple[int, str]:
    """U and its cause: the base of the active segment (even below F, as in Kafka's
    `firstUncleanableDirtyOffset`) or of the first segment holding offsets ≥ F that is younger than
    min.compaction.lag.ms, else the log end offset (a log with no active segment).

    KIP-58 is a prefix rule: the first too-young segment makes every later one uncleanable, even
    an older one. The segment holding F is tested too (Kafka's `logSegments(F, …)`). A segment is
    old enough iff its largest timestamp ≤ now − min.compaction.lag.ms, and, as in Kafka, the
    test is skipped when the lag is 0.
    """
    lag = config.min_compaction_lag_ms
    for segment in manifest.segments:
        if not segment.sealed:
            return segment.base_offset, ACTIVE_SEGMENT
        if not holds_dirty_records(segment, first_dirty):
            continue
        if lag > 0 and largest_timestamp(segment) > now_ms - lag:
            return segment.base_offset, MIN_COMPACTION_LAG
    return manifest.next_offset, END_OF_LOG


def max_compaction_delay_ms(manifest: Manifest, config: TopicConfig, first_dirty: int, now_ms: int) -> int:
    """KIP-354's delay (`maxCompactionDelay`, exported as max-compaction-delay-secs):
    (now − max.compaction.lag.ms) − the earliest first-batch timestamp among the sealed segments
    holding offsets ≥ F (Kafka's `nonActiveLogSegmentsFrom(F)`), floored at 0. Timestamps ≤ 0 are
    ignored; with none left the delay is 0. Only sealed segments count: the active one reaches the
    lag through the roll (policy.roll).
    """
    firsts = [
        s.first_batch_max_timestamp
        for s in manifest.segments
        if s.sealed and holds_dirty_records(s, first_dirty) and s.first_batch_max_timestamp > 0
    ]
    if not firsts:
        return 0
    return max(0, now_ms - max(config.max_compaction_lag_ms, 0) - min(firsts))


def expired_tombstone_horizon_ms(manifest: Manifest, first_uncleanable: int, now_ms: int) -> int | None:
    """★ The earliest tombstone delete horizon that has passed (≤ now, KIP-534: a tombstone is gone
    once now ≥ its horizon) among the segments a pass rewrites, [log start, U); None if there is none.
    """
    expired = [
        s.earliest_delete_horizon_ms
        for s in manifest.segments
        if s.base_offset < first_uncleanable
        and s.next_offset > manifest.log_start_offset
        and s.earliest_delete_horizon_ms is not None
        and s.earliest_delete_horizon_ms <= now_ms
    ]
    return min(expired, default=None)


def dead_bytes(segment: Segment) -> int:
    """The bytes of a segment's files that their deletion vectors remove: each file's bytes times
    the share of its rows removed."""
    return sum(
        f.size_bytes * f.deletion_vector.cardinality // f.record_count
        for f in segment.files
        if f.deletion_vector is not None and f.record_count > 0
    )


def vector_deadlines(segments: Iterable[Segment]) -> list[tuple[int, Segment, SegmentFile]]:
    """Each deletion vector of `segments` that carries an erasure deadline (KIP-354, issue 79):
    (its `erase_by_ms`, the segment, the file)."""
    return [
        (f.deletion_vector.erase_by_ms, s, f)
        for s in segments
        for f in s.files
        if f.deletion_vector is not None and f.deletion_vector.erase_by_ms is not None
    ]


def deadline_passed(erase_by_ms: int | None, now_ms: int) -> bool:
    """★ Whether an erasure deadline has come (`erase_by_ms` ≤ now, KIP-354): the records it
    bounds must be physically gone, so no deletion vector may hide them any longer. None: no
    deadline."""
    return erase_by_ms is not None and erase_by_ms <= now_ms


def erasure_due(file: SegmentFile, now_ms: int) -> bool:
    """Whether the records the file's deletion vector removes are due to be physically gone
    (`deadline_passed`): its group is rewritten."""
    vector = file.deletion_vector
    return vector is not None and deadline_passed(vector.erase_by_ms, now_ms)


def erasure_due_ms(manifest: Manifest, first_uncleanable: int, now_ms: int) -> int | None:
    """★ The earliest passed deadline (`deadline_passed`) of a deletion vector in [log start, U);
    None if none has passed."""
    in_range = [
        s for s in manifest.segments if s.base_offset < first_uncleanable and s.next_offset > manifest.log_start_offset
    ]
    return min((d for d, _, _ in vector_deadlines(in_range) if deadline_passed(d, now_ms)), default=None)


def cleanable_range(manifest: Manifest, config: TopicConfig, now_ms: int) -> CleanableRange:
    """The cleanable range of a partition with its byte counts, delay and expired tombstones."""
    first_dirty, reset = first_dirty_offset(manifest)
    first_uncleanable, cause = first_uncleanable_offset(manifest, config, first_dirty, now_ms)
    clean = cleanable = not_yet_cleanable = dead = 0
    for segment in manifest.segments:
        if segment.sealed and not holds_dirty_records(segment, first_dirty):
            clean += segment.size_bytes
            dead += dead_bytes(segment)
        elif segment.base_offset < first_uncleanable:
            cleanable += segment.size_bytes
        else:
            not_yet_cleanable += segment.size_bytes
    return CleanableRange(
        first_dirty_offset=first_dirty,
        first_uncleanable_offset=first_uncleanable,
        uncleanable_cause=cause,
        checkpoint_reset=reset,
        clean_bytes=clean,
        cleanable_bytes=cleanable,
        not_yet_cleanable_bytes=not_yet_cleanable,
        max_compaction_delay_ms=max_compaction_delay_ms(manifest, config, first_dirty, now_ms),
        expired_tombstone_horizon_ms=expired_tombstone_horizon_ms(manifest, first_uncleanable, now_ms),
        dead_bytes=dead,
        erasure_due_ms=erasure_due_ms(manifest, first_uncleanable, now_ms),
    )


def assess_compaction(manifest: Manifest, config: TopicConfig, now_ms: int) -> CompactionAssessment:
    """Whether the partition is due for compaction (Kafka's eligibility, DESIGN section 4).

    Only topics whose cleanup.policy includes compact are compacted, and a partition with no clean
    or cleanable bytes is not due ("skip empty logs"). Otherwise it is due iff
    - its dirty ratio is above min.cleanable.dirty.ratio (strictly: equal is not enough), or
    - it is overdue by KIP-354 (delay > 0) and has cleanable bytes, or
    - ★ a tombstone horizon in [log start, U) has passed (Kafka has no such trigger), or
    - ★ a deletion vector's records are due to be physically gone (KIP-354's deadline for them).
    """
    if not config.compact:
        policy = ",".join(sorted(config.cleanup_policy))
        return CompactionAssessment(due=False, reason=f"not a compacted topic (cleanup.policy={policy})")
    cleanable = cleanable_range(manifest, config, now_ms)
    if cleanable.total_bytes == 0:
        return CompactionAssessment(due=False, reason=_nothing_cleanable(cleanable, config), range=cleanable)
    threshold = config.min_cleanable_dirty_ratio
    ratio = format_ratio(cleanable.dirty_ratio, threshold)
    triggers: list[tuple[str, str]] = []
    if cleanable.dirty_ratio > threshold:
        triggers.append((DIRTY_RATIO, f"dirty ratio {ratio} > min.cleanable.dirty.ratio {threshold}"))
    if cleanable.max_compaction_delay_ms > 0 and cleanable.cleanable_bytes > 0:
        overdue = format_duration_ms(cleanable.max_compaction_delay_ms)
        triggers.append((MAX_COMPACTION_LAG, f"overdue by {overdue} (max.compaction.lag.ms)"))
    horizon = cleanable.expired_tombstone_horizon_ms
    if horizon is not None:
        triggers.append((TOMBSTONE_HORIZON, f"tombstone horizon passed at {format_timestamp_ms(horizon)}"))
    erase_by = cleanable.erasure_due_ms
    if erase_by is not None:
        words = f"records a deletion vector hides were due to be erased at {format_timestamp_ms(erase_by)}"
        triggers.append((VECTOR_ERASURE, words))
    if triggers:
        return CompactionAssessment(
            due=True,
            reason="; ".join(words for _, words in triggers),
            triggers=tuple(code for code, _ in triggers),
            range=cleanable,
        )
    if cleanable.cleanable_bytes == 0:
        return CompactionAssessment(due=False, reason=_nothing_cleanable(cleanable, config), range=cleanable)
    return CompactionAssessment(
        due=False, reason=f"dirty ratio {ratio} is not above min.cleanable.dirty.ratio {threshold}", range=cleanable
    )


def _nothing_cleanable(cleanable: CleanableRange, config: TopicConfig) -> str:
    """Why [F, U) holds no bytes, in words."""
    if cleanable.first_dirty_offset < cleanable.first_uncleanable_offset:
        return "nothing cleanable: the segments in [F, U) hold no bytes"
    if cleanable.uncleanable_cause == ACTIVE_SEGMENT:
        return "nothing cleanable: the first dirty segment is the active segment"
    if cleanable.uncleanable_cause == MIN_COMPACTION_LAG:
        return (
            "nothing cleanable: the first dirty segment is younger than "
            f"min.compaction.lag.ms {config.min_compaction_lag_ms}"
        )
    return "nothing cleanable: the log is clean up to its end"

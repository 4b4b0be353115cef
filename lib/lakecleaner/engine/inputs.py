"""A partition's compaction input: the segments of [log start, U) and the groups they are
rewritten in (`CompactionInput`; the policy's decision of whether and how far to compact is
`policy.plan.PartitionPlan`, a different thing).

Grouping is Kafka's `groupSegmentsBySize` without the index-size limits (DESIGN section 4):
consecutive segments are grouped greedily while their summed bytes stay ≤ segment.bytes, and
each group becomes one output segment spanning [first input's base, last input's next_offset),
so segment ranges keep touching. A segment larger than segment.bytes forms a group of its own.

★ Where deletion vectors may serve (`lakecleaner.rewrite.dead.ratio` > 0, issue 79), no group
holds segments of both the cleaned section and the dirty one (`apart_at`): the cleaned section's
groups lose a few records to vectors and keep their files, and the dirty section, where the new
tombstones are stamped and most records may lose, is rewritten alone. Kafka merges across that
boundary, rewriting every group anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lakecleaner.config import LONG_MAX, TopicConfig
from lakecleaner.engine.requests import CompactionRequest
from lakecleaner.errors import ConcurrentModification
from lakecleaner.log.manifest import Manifest, Segment, SegmentFile
from lakecleaner.policy.cleanable import first_dirty_offset
from lakecleaner.policy.segment_times import rolling_timestamp


class StalePlan(ConcurrentModification):
    """The manifest no longer fits the request (U is not a segment boundary, or lies in the
    active segment): the partition must be planned again."""


@dataclass(frozen=True)
class Group:
    """Consecutive input segments that become one output segment."""

    segments: tuple[Segment, ...]

    @property
    def base_offset(self) -> int:
        return self.segments[0].base_offset

    @property
    def next_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def files(self) -> tuple[SegmentFile, ...]:
        return tuple(f for s in self.segments for f in s.files)

    @property
    def record_count(self) -> int:
        return sum(s.record_count for s in self.segments)

    @property
    def live_count(self) -> int:
        """The records readers read: the files' own, but those their deletion vectors remove."""
        return sum(f.live_count for f in self.files)

    @property
    def size_bytes(self) -> int:
        return sum(s.size_bytes for s in self.segments)

    @property
    def tombstone_count(self) -> int:
        return sum(s.tombstone_count for s in self.segments)

    @property
    def max_timestamp(self) -> int:
        """Kafka keeps the latest timestamp on a merged segment, so retention.ms stays conservative."""
        return max(s.max_timestamp for s in self.segments)

    @property
    def last_modified_ms(self) -> int:
        """The last input segment's lastModified, which Kafka gives the cleaned segment
        (`Cleaner.cleanSegments`), so that cleaning never extends time retention for records
        without timestamps."""
        return self.segments[-1].modified_ms

    @property
    def first_batch_max_timestamp(self) -> int:
        """The earliest positive first-batch timestamp of the inputs (-1 if none), so a merged
        segment's KIP-354 deadline never moves later."""
        return min((s.first_batch_max_timestamp for s in self.segments if s.first_batch_max_timestamp > 0), default=-1)


@dataclass(frozen=True)
class CompactionInput:
    """What one pass does to one partition: the manifest it read and the groups of [log start, U)."""

    request: CompactionRequest
    manifest: Manifest
    groups: tuple[Group, ...]

    @property
    def partition(self) -> int:
        return self.request.partition

    @property
    def first_uncleanable_offset(self) -> int:
        return self.request.first_uncleanable_offset

    @property
    def log_start_offset(self) -> int:
        return self.manifest.log_start_offset

    @property
    def input_segments(self) -> tuple[Segment, ...]:
        return tuple(s for g in self.groups for s in g.segments)

    @property
    def record_count(self) -> int:
        return sum(g.record_count for g in self.groups)

    @property
    def size_bytes(self) -> int:
        return sum(g.size_bytes for g in self.groups)

    @property
    def clean_end(self) -> int:
        """Where the plan's share of the cleaned section ends: the last input segment boundary at
        or below the first dirty offset (`cleanable.first_dirty_offset`: the cleaner checkpoint, or
        the log start when there is none or it is out of bounds), or the first input segment's
        base when none ends there: a trim may move the log start into a segment never cleaned,
        whose records at or after the log start are then dirty (Kafka maps from the first dirty
        offset, `buildOffsetMap`). Below it the log holds each key at most once: every record
        there was written or kept by a run whose quality gate found the keys of its cleaned range
        unique, and later runs only remove records from it."""
        first_dirty, _ = first_dirty_offset(self.manifest)
        segments = self.input_segments
        ends = [s.next_offset for s in segments if s.next_offset <= first_dirty]
        return max(ends, default=segments[0].base_offset if segments else self.log_start_offset)

    def erase_by_ms(self, config: TopicConfig, now_ms: int) -> int | None:
        """When the records this pass supersedes must be physically gone, for the deletion vectors
        that would remove them (KIP-354): the earliest deadline of the dirty section's segments,
        rolling timestamp + max.compaction.lag.ms, Kafka's bound on when a record that supersedes
        them is cleaned; `now_ms` (due at once: no vector) when the pass has no dirty segment
        (what it removes is below the log start, or not bounded by a dirty record). None without
        max.compaction.lag.ms."""
        lag = config.max_compaction_lag_ms
        if lag == LONG_MAX:
            return None
        dirty = [s for s in self.input_segments if s.base_offset >= self.clean_end]
        return min((min(max(rolling_timestamp(s), 0) + lag, LONG_MAX) for s in dirty), default=now_ms)

    @property
    def dirty_record_count(self) -> int:
        """Records of the input segments at or after `clean_end`: the dirty section pass 1 maps."""
        return sum(s.record_count for s in self.input_segments if s.base_offset >= self.clean_end)


def group_segments(
    segments: Sequence[Segment], max_bytes: int, apart_at: int | None = None
) -> list[tuple[Segment, ...]]:
    """Greedy grouping in offset order while the summed bytes stay ≤ `max_bytes`; with
    `apart_at`, a group never holds segments of both sides of that offset (a segment holding it
    counts as after it)."""
    groups: list[tuple[Segment, ...]] = []
    current: list[Segment] = []
    size = 0
    for segment in segments:
        crossing = apart_at is not None and current and current[-1].next_offset <= apart_at < segment.next_offset
        if current and (size + segment.size_bytes > max_bytes or crossing):
            groups.append(tuple(current))
            current, size = [], 0
        current.append(segment)
        size += segment.size_bytes
    if current:
        groups.append(tuple(current))
    return groups


def compaction_input(
    manifest: Manifest, request: CompactionRequest, segment_bytes: int, vectors: bool = False
) -> CompactionInput:
    """The plan for `request` on `manifest` (the manifest may be newer than the request's: appends
    and rolls after U do not matter); with `vectors` (deletion vectors may serve), the cleaned and
    dirty sections are grouped apart. Raises StalePlan when U is no longer a segment boundary or
    lies past the base of the active segment, which is never cleaned."""
    u = request.first_uncleanable_offset
    where = f"partition {manifest.topic}-{manifest.partition}"
    if u != manifest.next_offset and all(s.base_offset != u for s in manifest.segments):
        raise StalePlan(
            f"{where}: first uncleanable offset {u} is not a segment boundary of manifest version "
            f"{manifest.version} (planned on version {request.manifest_version}); plan the partition again"
        )
    active = manifest.active_segment
    if active is not None and u > active.base_offset:
        raise StalePlan(f"{where}: first uncleanable offset {u} lies in the active segment [{active.base_offset}, …)")
    start = manifest.log_start_offset
    inputs = [s for s in manifest.segments if s.next_offset > start and s.base_offset < u]
    apart_at = first_dirty_offset(manifest)[0] if vectors else None
    groups = tuple(Group(g) for g in group_segments(inputs, segment_bytes, apart_at))
    return CompactionInput(request, manifest, groups)

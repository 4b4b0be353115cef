"""Properties of the policy over random valid manifests, configs and consumer positions."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakecleaner.config import LONG_MAX, TopicConfig
from lakecleaner.errors import OffsetOutOfRange
from lakecleaner.log.manifest import Manifest, Segment, SegmentFile
from lakecleaner.offsets import ConsumedPosition
from lakecleaner.policy import plan_partition, plan_topic
from lakecleaner.policy.cleanable import (
    DIRTY_RATIO,
    MAX_COMPACTION_LAG,
    CleanableRange,
    assess_compaction,
    holds_dirty_records,
)
from lakecleaner.policy.retention import CONSUMED, LOG_START_BREACH, apply_retention, plan_retention
from lakecleaner.policy.roll import apply_roll, plan_roll
from lakecleaner.policy.trim import apply_trim, plan_trim
from tests.policy.policy_builders import DAY, HOUR, NOW

PROPERTY = settings(max_examples=200, deadline=None)
LIMITS = (HOUR, DAY, 3 * DAY)

#: Timestamps: anywhere in the last ten days, missing or zero, and exactly at each limit's boundary.
TIMESTAMPS = st.one_of(
    st.integers(NOW - 10 * DAY, NOW + HOUR),
    st.sampled_from([-1, 0, 1]),
    st.sampled_from([NOW - limit + d for limit in LIMITS for d in (-1, 0, 1)]),
)
HORIZONS = st.one_of(st.none(), st.integers(NOW - DAY, NOW + DAY), st.sampled_from([NOW - 1, NOW, NOW + 1]))


@st.composite
def segments(draw: st.DrawFn, index: int, base: int, sealed: bool) -> Segment:
    span = draw(st.integers(0, 20))
    records = draw(st.integers(0, span))  # fewer records than offsets: compaction left holes
    horizon = draw(HORIZONS) if records and sealed else None
    size = draw(st.integers(0, 2000)) if records else 0
    return Segment(
        id=f"s{index}-{base}",
        base_offset=base,
        next_offset=base + span,
        files=(SegmentFile(f"segments/{base:020d}-{index}.parquet", base, base + span, records, size),)
        if records
        else (),
        record_count=records,
        size_bytes=size,
        first_batch_max_timestamp=draw(TIMESTAMPS) if records else -1,
        max_timestamp=draw(TIMESTAMPS) if records else -1,
        created_ms=draw(TIMESTAMPS),
        sealed=sealed,
        tombstone_count=1 if horizon is not None else draw(st.integers(0, 1)) if records else 0,
        earliest_delete_horizon_ms=horizon,
    )


@st.composite
def manifests(draw: st.DrawFn, partition: int = 0) -> Manifest:
    """Valid manifests: touching segments, the last one possibly active, a log start anywhere in the
    log (as a trim leaves it), and a cleaner checkpoint anywhere, out of range included."""
    count = draw(st.integers(0, 7))
    has_active = draw(st.booleans())
    offset = first_base = draw(st.integers(0, 1000))
    log: list[Segment] = []
    for i in range(count):
        segment = draw(segments(i, offset, sealed=not (has_active and i == count - 1)))
        log.append(segment)
        offset = segment.next_offset
    log_start = draw(st.one_of(st.just(first_base), st.integers(first_base, offset)))
    checkpoint = draw(
        st.one_of(st.none(), st.integers(max(0, first_base - 5), offset + 5), st.sampled_from([log_start, offset]))
    )
    result = Manifest(
        topic="t",
        partition=partition,
        version=3,
        log_start_offset=log_start,
        next_offset=offset,
        cleaner_checkpoint=checkpoint,
        segments=tuple(log),
    )
    assert result.problems() == []
    return result


@st.composite
def configs(draw: st.DrawFn) -> TopicConfig:
    """Topic configs that pass Kafka's validation (max lag ≥ min lag, consumed ≤ forced retention)."""
    min_lag = draw(st.sampled_from([0, HOUR, DAY]))
    retention_ms = draw(st.sampled_from([-1, 0, *LIMITS]))
    return TopicConfig(
        cleanup_policy=draw(
            st.sampled_from([frozenset({"compact"}), frozenset({"delete"}), frozenset({"compact", "delete"})])
        ),
        segment_ms=draw(st.sampled_from(LIMITS)),
        min_cleanable_dirty_ratio=draw(st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0])),
        min_compaction_lag_ms=min_lag,
        max_compaction_lag_ms=draw(st.sampled_from([m for m in (LONG_MAX, *LIMITS) if m >= min_lag])),
        delete_retention_ms=draw(st.sampled_from([0, DAY])),
        retention_ms=retention_ms,
        retention_bytes=draw(st.sampled_from([-1, 0, 100, 1000, 5000])),
        retention_commitoffset_ms=draw(
            st.sampled_from([c for c in (-1, 0, HOUR, DAY) if retention_ms < 0 or c <= retention_ms])
        ),
    )


@st.composite
def positions(draw: st.DrawFn, next_offset: int) -> ConsumedPosition | None:
    """Not read, unknown (one group without an offset), or a known minimum over two groups."""
    kind = draw(st.sampled_from(["not read", "unknown", "known"]))
    if kind == "not read":
        return None
    if kind == "unknown":
        return ConsumedPosition(None, {"a": next_offset, "b": None}, reason="group b has no committed offset")
    offset = draw(st.integers(0, next_offset + 5))
    return ConsumedPosition(offset, {"a": offset, "b": offset + draw(st.integers(0, 10))})


def boundaries(log: Manifest) -> set[int]:
    return {s.base_offset for s in log.segments} | {log.next_offset}


def simulated_compaction(log: Manifest, config: TopicConfig, cleanable: CleanableRange, now_ms: int) -> Manifest:
    """A model of one complete cleaning pass (Kafka's Cleaner.doClean when the offset map does not fill,
    so the pass ends at U) over [log start, U), standing in for the Spark engine:

    - the cleaner checkpoint becomes U;
    - in the segments it rewrites, tombstones whose horizon has passed (≤ now) are removed, and the
      tombstones left without a horizon get now + delete.retention.ms (KIP-534); a segment's
      tombstones are taken to share its earliest horizon;
    - segment boundaries and sizes stay as they were: the worst case for the next dirty ratio, as if
      no record had been superseded (sizes no longer matter once [F, U) is empty);
    - nothing is appended meanwhile: no new data arrives.
    """
    end = cleanable.first_uncleanable_offset

    def cleaned(segment: Segment) -> Segment:
        if segment.base_offset >= end or segment.next_offset <= log.log_start_offset:
            return segment
        horizon, tombstones = segment.earliest_delete_horizon_ms, segment.tombstone_count
        if horizon is not None and horizon <= now_ms:
            horizon, tombstones = None, 0
        if tombstones and horizon is None:
            horizon = now_ms + config.delete_retention_ms
        return replace(segment, earliest_delete_horizon_ms=horizon, tombstone_count=tombstones)

    return log.next_version(now_ms, cleaner_checkpoint=end, segments=tuple(cleaned(s) for s in log.segments))


@PROPERTY
@given(manifests(), configs(), st.data())
def test_plans_stay_within_the_log_and_respect_the_active_segment(
    log: Manifest, config: TopicConfig, data: st.DataObject
) -> None:
    plan = plan_partition(log, config, data.draw(positions(log.next_offset)), NOW)
    current = apply_roll(log, NOW) if plan.roll.roll else log
    assert current.problems() == []
    if plan.roll.roll:
        assert log.active_segment is not None and not log.active_segment.is_empty
        assert current.active_segment is None

    cleanable = plan.compaction.range
    if not config.compact:
        assert cleanable is None and not plan.compaction.due
        return
    assert cleanable is not None
    first_dirty, first_uncleanable = cleanable.first_dirty_offset, cleanable.first_uncleanable_offset
    checkpoint, start = current.cleaner_checkpoint, current.log_start_offset
    kept = checkpoint is not None and start <= checkpoint <= current.next_offset
    assert first_dirty == (checkpoint if kept else start)  # Kafka's cleanableOffsets: never rounded
    assert first_uncleanable in boundaries(current) and first_uncleanable <= current.next_offset
    if first_dirty > first_uncleanable:  # only when F lies inside the active or a too-young segment
        # an empty segment of no width may share U as its base with the segment that holds F
        (at_u,) = [s for s in current.segments if s.base_offset == first_uncleanable < s.next_offset]
        assert at_u.base_offset < first_dirty <= at_u.next_offset and (not at_u.sealed or config.min_compaction_lag_ms)
    if current.active_segment is not None:
        assert first_uncleanable <= current.active_segment.base_offset
    for segment in current.segments:
        if holds_dirty_records(segment, first_dirty) and segment.base_offset < first_uncleanable:
            assert segment.sealed and segment.next_offset <= first_uncleanable
    assert cleanable.clean_bytes + cleanable.cleanable_bytes + cleanable.not_yet_cleanable_bytes == current.size_bytes
    assert 0.0 <= cleanable.dirty_ratio <= 1.0
    if plan.compaction.due:
        assert cleanable.total_bytes > 0


@PROPERTY
@given(manifests(), configs(), st.data())
def test_retention_deletes_a_prefix_and_applying_it_leaves_nothing_more_to_delete(
    log: Manifest, config: TopicConfig, data: st.DataObject
) -> None:
    consumed = data.draw(positions(log.next_offset))
    plan = plan_retention(log, config, consumed, NOW)
    deleted = [d.segment_id for d in plan.deletions]
    assert deleted == [s.id for s in log.segments[: len(deleted)]]
    for deletion, segment in zip(plan.deletions, log.segments, strict=False):
        if not segment.sealed:
            assert plan.roll_first and not segment.is_empty
        if not config.delete:
            assert deletion.rule == LOG_START_BREACH
        if deletion.rule == CONSUMED:
            assert consumed is not None and consumed.offset is not None and segment.next_offset <= consumed.offset
    assert log.log_start_offset <= plan.new_log_start_offset <= log.next_offset

    after = apply_retention(log, plan, NOW)
    assert after.problems() == []
    assert after.log_start_offset == plan.new_log_start_offset >= log.log_start_offset
    assert (after.next_offset, after.cleaner_checkpoint) == (log.next_offset, log.cleaner_checkpoint)
    assert {p.path for p in after.pending_deletes} == {f.path for s in log.segments[: len(deleted)] for f in s.files}
    assert plan_retention(after, config, consumed, NOW).deletions == ()


@PROPERTY
@given(manifests(), configs())
def test_a_rolled_partition_does_not_roll_again(log: Manifest, config: TopicConfig) -> None:
    if plan_roll(log, config, NOW).roll:
        rolled = apply_roll(log, NOW)
        assert rolled.version == log.version + 1
        assert not plan_roll(rolled, config, NOW).roll


@PROPERTY
@given(manifests(), configs())
def test_after_a_compaction_pass_the_partition_is_not_due_again_without_new_data(
    log: Manifest, config: TopicConfig
) -> None:
    config = replace(config, cleanup_policy=config.cleanup_policy | {"compact"})
    plan = plan_partition(log, config, None, NOW)
    current = apply_roll(log, NOW) if plan.roll.roll else log
    assert plan.compaction.range is not None
    compacted = simulated_compaction(current, config, plan.compaction.range, NOW)
    again = assess_compaction(compacted, config, NOW)
    assert DIRTY_RATIO not in again.triggers and MAX_COMPACTION_LAG not in again.triggers
    assert again.range is not None and again.range.cleanable_bytes == 0
    if config.delete_retention_ms > 0:
        # with delete.retention.ms = 0 a tombstone stamped by the pass expires at once (horizon = now)
        assert not again.due


@PROPERTY
@given(manifests(), st.integers(-3, 3), st.booleans())
def test_a_trim_is_validated_and_retention_then_deletes_exactly_what_it_released(
    log: Manifest, shift: int, from_end: bool
) -> None:
    offset = (log.next_offset if from_end else log.log_start_offset) + shift
    if not log.log_start_offset <= offset <= log.next_offset:
        with pytest.raises(OffsetOutOfRange):
            plan_trim(log, offset)
        return
    released = plan_trim(log, offset).released_segments
    trimmed = apply_trim(log, offset, NOW)
    assert trimmed.log_start_offset == offset and trimmed.problems() == []
    compact_only = TopicConfig(cleanup_policy=frozenset({"compact"}))
    assert tuple(d.segment_id for d in plan_retention(trimmed, compact_only, None, NOW).deletions) == released


@PROPERTY
@given(st.integers(1, 5).flatmap(lambda n: st.tuples(*(manifests(p) for p in range(n)))), configs())
def test_selection_takes_every_due_partition_overdue_first_then_dirtiest(
    logs: tuple[Manifest, ...], config: TopicConfig
) -> None:
    plan = plan_topic("t", {log.partition: log for log in logs}, config, {}, NOW)
    due = {p.partition for p in plan.partitions if p.compaction.due}
    assert set(plan.selection.selected) == due and plan.selection.deferred == ()
    assert plan.metrics.partitions_due == len(due)
    assert 0 <= plan.metrics.max_dirty_percent <= 100
    by_partition = {p.partition: p.compaction for p in plan.partitions}
    keys = [(not by_partition[p].overdue, -by_partition[p].dirty_ratio, p) for p in plan.selection.selected]
    assert keys == sorted(keys)

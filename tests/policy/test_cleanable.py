"""The cleanable range and compaction eligibility (DESIGN section 4, "Cleanable range", "Dirty ratio")."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lakecleaner.config import LONG_MAX
from lakecleaner.engine.requests import CompactionRequest, requests_for
from lakecleaner.log.deletion_vectors import DeletionVector
from lakecleaner.log.manifest import Manifest, Segment
from lakecleaner.policy.cleanable import (
    ACTIVE_SEGMENT,
    DIRTY_RATIO,
    END_OF_LOG,
    MAX_COMPACTION_LAG,
    MIN_COMPACTION_LAG,
    TOMBSTONE_HORIZON,
    VECTOR_ERASURE,
    assess_compaction,
    cleanable_range,
)
from tests.policy.policy_builders import COMPACT, COMPACT_DELETE, DELETE, HOUR, NOW, OLD, active, manifest, segment


def clean_and_dirty(clean: int, dirty: int) -> Manifest:
    """One clean segment, one dirty segment and an active segment (never counted)."""
    return manifest(segment(0, size=clean), segment(10, size=dirty), active(20, size=50), checkpoint=10)


# -- dirty ratio ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("threshold", "clean", "dirty", "due"),
    [
        (0.5, 500, 500, False),  # exactly the threshold: not eligible (strict >)
        (0.5, 499, 501, True),  # just above
        (0.3, 700, 300, False),  # 0.3 is not exact in binary; 300/1000 still equals it
        (0.3, 699, 301, True),
        (1.0, 0, 1000, False),  # a threshold of 1.0 is never met by the ratio alone
        (0.0, 1000, 1, True),
        (0.0, 1000, 0, False),  # ratio 0 is not above 0
    ],
)
def test_dirty_ratio_must_be_strictly_above_the_threshold(threshold: float, clean: int, dirty: int, due: bool) -> None:
    config = replace(COMPACT, min_cleanable_dirty_ratio=threshold)
    assessment = assess_compaction(clean_and_dirty(clean, dirty), config, NOW)
    assert assessment.due is due
    assert (DIRTY_RATIO in assessment.triggers) is due


def test_ratio_reasons_name_the_ratio_and_the_threshold() -> None:
    at = assess_compaction(clean_and_dirty(500, 500), COMPACT, NOW)
    assert at.reason == "dirty ratio 0.50 is not above min.cleanable.dirty.ratio 0.5"
    above = assess_compaction(clean_and_dirty(380, 620), COMPACT, NOW)
    assert above.reason == "dirty ratio 0.62 > min.cleanable.dirty.ratio 0.5"
    just_below = assess_compaction(clean_and_dirty(5001, 4999), COMPACT, NOW)
    assert just_below.reason == "dirty ratio 0.4999 is not above min.cleanable.dirty.ratio 0.5"


def test_bytes_are_split_at_f_and_u_and_the_active_segment_is_uncleanable() -> None:
    log = manifest(
        segment(0, size=100), segment(10, size=200), segment(20, size=300), active(30, size=7), checkpoint=10
    )
    cleanable = cleanable_range(log, COMPACT, NOW)
    assert (cleanable.first_dirty_offset, cleanable.first_uncleanable_offset) == (10, 30)
    assert cleanable.uncleanable_cause == ACTIVE_SEGMENT
    assert (cleanable.clean_bytes, cleanable.cleanable_bytes, cleanable.not_yet_cleanable_bytes) == (100, 500, 7)
    assert cleanable.dirty_ratio == 500 / 600


# -- min.compaction.lag.ms (KIP-58) -------------------------------------------------------------


@pytest.mark.parametrize(("age", "cleanable"), [(HOUR, True), (HOUR + 1, True), (HOUR - 1, False)])
def test_a_segment_exactly_min_lag_old_is_cleanable(age: int, cleanable: bool) -> None:
    config = replace(COMPACT, min_compaction_lag_ms=HOUR)
    log = manifest(segment(0, max_ts=NOW - age), active(10))
    result = cleanable_range(log, config, NOW)
    assert result.first_uncleanable_offset == (10 if cleanable else 0)
    assert result.uncleanable_cause == (ACTIVE_SEGMENT if cleanable else MIN_COMPACTION_LAG)


def test_the_first_too_young_segment_blocks_the_older_ones_after_it() -> None:
    config = replace(COMPACT, min_compaction_lag_ms=HOUR)
    log = manifest(segment(0, size=10), segment(10, max_ts=NOW - 1, size=20), segment(20, size=40), active(30))
    result = cleanable_range(log, config, NOW)
    assert result.first_uncleanable_offset == 10
    assert (result.cleanable_bytes, result.not_yet_cleanable_bytes) == (10, 160)


def test_nothing_cleanable_when_the_first_dirty_segment_is_too_young() -> None:
    config = replace(COMPACT, min_compaction_lag_ms=HOUR)
    log = manifest(segment(0, size=500), segment(10, max_ts=NOW - 1), active(20), checkpoint=10)
    assessment = assess_compaction(log, config, NOW)
    assert not assessment.due
    assert (
        assessment.reason == "nothing cleanable: the first dirty segment is younger than min.compaction.lag.ms 3600000"
    )


def test_min_lag_zero_ignores_future_timestamps_like_kafka() -> None:
    log = manifest(segment(0, max_ts=NOW + HOUR), active(10))
    assert cleanable_range(log, COMPACT, NOW).first_uncleanable_offset == 10


def test_min_lag_falls_back_to_created_ms_for_a_segment_without_timestamps() -> None:
    config = replace(COMPACT, min_compaction_lag_ms=HOUR)
    young = manifest(segment(0, records=0, max_ts=-1, created_ms=NOW - 1), active(10))
    old = manifest(segment(0, records=0, max_ts=-1, created_ms=NOW - HOUR), active(10))
    assert cleanable_range(young, config, NOW).first_uncleanable_offset == 0
    assert cleanable_range(old, config, NOW).first_uncleanable_offset == 10


# -- the active segment and the end of the log ----------------------------------------------------


def test_u_never_passes_the_active_segment() -> None:
    """Kafka (`LogCleanerManager.cleanableOffsets`, `calculateCleanableBytes`): F may lie inside the
    active segment; U is then the active segment's base, below F, and nothing is cleanable."""
    log = manifest(segment(0), segment(10), active(20, max_ts=OLD))
    assert cleanable_range(log, COMPACT, NOW).first_uncleanable_offset == 20
    inside_active = replace(log, cleaner_checkpoint=25)
    result = cleanable_range(inside_active, COMPACT, NOW)
    assert (result.first_dirty_offset, result.first_uncleanable_offset) == (25, 20)
    assert result.cleanable_bytes == 0
    assert assess_compaction(inside_active, COMPACT, NOW).reason == (
        "nothing cleanable: the first dirty segment is the active segment"
    )


def test_a_checkpoint_at_the_end_of_an_open_log_counts_from_the_active_segment() -> None:
    log = manifest(segment(0, size=100), active(10, size=30), checkpoint=20)
    result = cleanable_range(log, COMPACT, NOW)
    assert (result.first_dirty_offset, result.first_uncleanable_offset) == (20, 10)
    assert (result.clean_bytes, result.cleanable_bytes, result.not_yet_cleanable_bytes) == (100, 0, 30)


def test_u_is_the_log_end_when_there_is_no_active_segment() -> None:
    log = manifest(segment(0), segment(10))
    result = cleanable_range(log, COMPACT, NOW)
    assert (result.first_uncleanable_offset, result.uncleanable_cause) == (20, END_OF_LOG)
    clean = replace(log, cleaner_checkpoint=20)
    assert assess_compaction(clean, COMPACT, NOW).reason == "nothing cleanable: the log is clean up to its end"


def test_a_log_without_clean_or_cleanable_bytes_is_not_due() -> None:
    logs = (
        manifest(),
        manifest(active(0, 0, records=0, size=0, max_ts=-1)),
        manifest(segment(0, size=0, horizon=NOW - 1), active(10), checkpoint=10),  # even with a passed horizon
    )
    for log in logs:
        assessment = assess_compaction(log, replace(COMPACT, min_cleanable_dirty_ratio=0.0), NOW)
        assert not assessment.due
        assert assessment.range is not None and assessment.range.total_bytes == 0


# -- the cleaner checkpoint (F) -------------------------------------------------------------------


def test_checkpoint_below_log_start_is_reset_to_it() -> None:
    log = manifest(segment(0), segment(10), segment(20), active(30), log_start=20, checkpoint=5)
    result = cleanable_range(log, COMPACT, NOW)
    assert result.first_dirty_offset == 20
    assert result.checkpoint_reset is not None and "below the log start offset 20" in result.checkpoint_reset


def test_checkpoint_beyond_the_log_end_is_reset_to_log_start() -> None:
    log = manifest(segment(0), segment(10), active(20), log_start=3, checkpoint=31)
    result = cleanable_range(log, COMPACT, NOW)
    assert result.first_dirty_offset == 3  # the log start itself, not its segment's base
    assert result.checkpoint_reset is not None and "beyond the log end offset 30" in result.checkpoint_reset


def test_checkpoint_at_the_log_end_is_kept() -> None:
    log = manifest(segment(0), segment(10), checkpoint=20)
    result = cleanable_range(log, COMPACT, NOW)
    assert (result.first_dirty_offset, result.checkpoint_reset) == (20, None)


def test_missing_checkpoint_starts_at_log_start_and_says_so() -> None:
    result = cleanable_range(manifest(segment(0), active(10)), COMPACT, NOW)
    assert result.first_dirty_offset == 0
    assert result.checkpoint_reset == "no cleaner checkpoint: cleaning starts at the log start offset 0"


def test_a_checkpoint_inside_a_segment_is_kept_and_its_segment_counts_as_cleanable() -> None:
    """Kafka (`LogCleanerManager.cleanableOffsets`): a checkpoint within [log start, log end] is F
    as it is. Kafka's `LogToClean` then counts the segment holding F as clean and as cleanable;
    here it counts once, as cleanable (docs/architecture.md, differences from Kafka)."""
    log = manifest(segment(0, size=100), segment(10, size=100), active(20), checkpoint=15)
    result = cleanable_range(log, COMPACT, NOW)
    assert (result.first_dirty_offset, result.checkpoint_reset) == (15, None)
    assert (result.clean_bytes, result.cleanable_bytes) == (100, 100)


def test_a_log_start_moved_inside_a_segment_past_the_checkpoint_is_the_first_dirty_offset() -> None:
    """Kafka (`LogCleanerManager.cleanableOffsets`): when DeleteRecords or retention moved the log
    start offset past the cleaner checkpoint, F is the log start offset itself, even inside a
    segment; the segments from the one holding it to U are the cleanable bytes, and KIP-354's
    delay (`maxCompactionDelay`, `nonActiveLogSegmentsFrom(F)`) counts the segment holding F."""
    config = replace(COMPACT, max_compaction_lag_ms=HOUR)
    log = manifest(
        segment(0, size=100, first_ts=NOW - 9 * HOUR),
        segment(10, size=200, first_ts=NOW - 5 * HOUR),
        segment(20, size=300, first_ts=NOW - 4 * HOUR),
        active(30, size=50),
        log_start=14,
        checkpoint=10,
    )
    result = cleanable_range(log, config, NOW)
    assert (result.first_dirty_offset, result.first_uncleanable_offset) == (14, 30)
    assert result.checkpoint_reset == "cleaner checkpoint 10 is below the log start offset 14: reset to it"
    assert (result.clean_bytes, result.cleanable_bytes, result.not_yet_cleanable_bytes) == (100, 500, 50)
    assert result.max_compaction_delay_ms == 4 * HOUR


# -- max.compaction.lag.ms (KIP-354) --------------------------------------------------------------


def test_max_lag_delay_uses_the_earliest_first_batch_timestamp_ignoring_non_positive_ones() -> None:
    config = replace(COMPACT, max_compaction_lag_ms=HOUR)
    log = manifest(
        segment(0, first_ts=0, max_ts=NOW - 10 * HOUR),
        segment(10, first_ts=-1, max_ts=NOW - 10 * HOUR),
        segment(20, first_ts=NOW - 3 * HOUR, max_ts=NOW - 2 * HOUR),
        segment(30, first_ts=NOW - 2 * HOUR),
        active(40, first_ts=NOW - 9 * HOUR),  # the active segment does not count
    )
    assert cleanable_range(log, config, NOW).max_compaction_delay_ms == 2 * HOUR


def test_max_lag_delay_only_counts_segments_at_or_after_f() -> None:
    config = replace(COMPACT, max_compaction_lag_ms=HOUR)
    log = manifest(segment(0, first_ts=NOW - 9 * HOUR), segment(10, first_ts=NOW - 2 * HOUR), active(20), checkpoint=10)
    assert cleanable_range(log, config, NOW).max_compaction_delay_ms == HOUR


def test_max_lag_delay_is_zero_without_positive_timestamps_or_with_the_default_lag() -> None:
    config = replace(COMPACT, max_compaction_lag_ms=HOUR)
    no_timestamps = manifest(segment(0, first_ts=0), segment(10, first_ts=-1), active(20))
    assert cleanable_range(no_timestamps, config, NOW).max_compaction_delay_ms == 0
    default_lag = manifest(segment(0, first_ts=1), active(10))
    assert COMPACT.max_compaction_lag_ms == LONG_MAX
    assert cleanable_range(default_lag, COMPACT, NOW).max_compaction_delay_ms == 0


@pytest.mark.parametrize(("age", "overdue"), [(HOUR, False), (HOUR + 1, True)])
def test_max_lag_delay_starts_after_the_lag(age: int, overdue: bool) -> None:
    config = replace(COMPACT, max_compaction_lag_ms=HOUR, min_cleanable_dirty_ratio=0.99)
    log = manifest(segment(0, size=10_000), segment(10, size=1, first_ts=NOW - age), active(20), checkpoint=10)
    assessment = assess_compaction(log, config, NOW)
    assert assessment.due is overdue
    assert (MAX_COMPACTION_LAG in assessment.triggers) is overdue


def test_an_overdue_partition_is_due_whatever_its_ratio_and_says_by_how_much() -> None:
    config = replace(COMPACT, max_compaction_lag_ms=HOUR)
    log = manifest(segment(0, size=10_000), segment(10, size=1, first_ts=NOW - 2 * HOUR), active(20), checkpoint=10)
    assessment = assess_compaction(log, config, NOW)
    assert assessment.due and assessment.overdue
    assert assessment.reason == "overdue by 3600 s (max.compaction.lag.ms)"


def test_an_overdue_partition_with_nothing_cleanable_is_not_due() -> None:
    config = replace(COMPACT, max_compaction_lag_ms=2 * HOUR, min_compaction_lag_ms=HOUR)
    log = manifest(
        segment(0, size=100), segment(10, first_ts=NOW - 3 * HOUR, max_ts=NOW - 1), active(20), checkpoint=10
    )
    assessment = assess_compaction(log, config, NOW)
    assert assessment.range is not None and assessment.range.max_compaction_delay_ms == HOUR
    assert not assessment.due


# -- ★ tombstone horizons -----------------------------------------------------------------------


@pytest.mark.parametrize(("horizon", "due"), [(NOW - 1, True), (NOW, True), (NOW + 1, False)])
def test_a_passed_tombstone_horizon_makes_a_clean_partition_due(horizon: int, due: bool) -> None:
    log = manifest(segment(0, size=1000, horizon=horizon), active(10), checkpoint=10)
    assessment = assess_compaction(log, COMPACT, NOW)
    assert assessment.due is due
    assert assessment.triggers == ((TOMBSTONE_HORIZON,) if due else ())
    if due:
        assert assessment.reason.startswith("tombstone horizon passed at 2023-11-14T22:13:")


def test_a_tombstone_horizon_at_or_above_u_does_not_count() -> None:
    config = replace(COMPACT, min_compaction_lag_ms=HOUR)
    log = manifest(segment(0), segment(10, max_ts=NOW - 1, horizon=NOW - 1), active(20), checkpoint=10)
    assert not assess_compaction(log, config, NOW).due


def test_a_tombstone_horizon_below_the_log_start_does_not_count() -> None:
    log = manifest(segment(0, horizon=NOW - 1), segment(10), active(20), log_start=10, checkpoint=20)
    assert not assess_compaction(log, COMPACT, NOW).due


def test_several_triggers_are_all_named() -> None:
    config = replace(COMPACT, max_compaction_lag_ms=HOUR)
    log = manifest(
        segment(0, size=1, horizon=NOW), segment(10, size=99, first_ts=NOW - 2 * HOUR), active(20), checkpoint=10
    )
    assessment = assess_compaction(log, config, NOW)
    assert assessment.triggers == (DIRTY_RATIO, MAX_COMPACTION_LAG, TOMBSTONE_HORIZON)
    assert assessment.reason.count("; ") == 2


# -- cleanup.policy ---------------------------------------------------------------------------------


def test_only_compacted_topics_are_compacted() -> None:
    log = manifest(segment(0, size=1, horizon=NOW - 1), segment(10, size=1000), active(20), checkpoint=0)
    assessment = assess_compaction(log, DELETE, NOW)
    assert (assessment.due, assessment.range) == (False, None)
    assert assessment.reason == "not a compacted topic (cleanup.policy=delete)"
    assert assess_compaction(log, COMPACT_DELETE, NOW).due


# -- deletion vectors (issue 79) ------------------------------------------------------------------


def vectored(base: int, removed: int, erase_by_ms: int | None = None, size: int = 1000) -> Segment:
    """A clean segment of 100 records whose file's deletion vector removes `removed` of them."""
    plain = segment(base, 100, size=size)
    (file,) = plain.files
    vector = DeletionVector(f"{file.path}.dv-3-000000000000.bin", 40, 0, removed, erase_by_ms)
    return replace(plain, files=(replace(file, deletion_vector=vector),))


def test_the_bytes_deletion_vectors_remove_count_as_dirty() -> None:
    """★ The dead bytes of the cleaned section (a file's bytes times the share of its rows a vector
    removes) count as dirty: Kafka's cleaned section holds no dead record."""
    m = manifest(vectored(0, removed=20), segment(100, size=100), active(110), checkpoint=100)
    cleanable = cleanable_range(m, COMPACT, NOW)
    assert (cleanable.clean_bytes, cleanable.dead_bytes, cleanable.cleanable_bytes) == (1000, 200, 100)
    assert cleanable.dirty_ratio == 300 / 1100 and cleanable.dirty_percent == 27
    assert cleanable.to_dict()["dead_bytes"] == 200
    assert not assess_compaction(m, COMPACT, NOW).due
    assert assess_compaction(m, replace(COMPACT, min_cleanable_dirty_ratio=0.2), NOW).triggers == (DIRTY_RATIO,)


def test_a_vector_whose_records_are_due_to_be_erased_makes_its_partition_due() -> None:
    """★ KIP-354 with vectors: once a vector's erase_by_ms has passed, the partition is due even
    with nothing dirty, and a request covers the cleaned section so the group is rewritten."""
    m = manifest(vectored(0, removed=5, erase_by_ms=NOW), active(100), checkpoint=100)
    ahead = assess_compaction(m, COMPACT, NOW - 1)
    assert not ahead.due and requests_for(m, COMPACT, NOW - 1) is None
    due = assess_compaction(m, COMPACT, NOW)
    assert due.due and due.triggers == (VECTOR_ERASURE,) and "due to be erased" in due.reason
    assert due.range is not None and due.range.erasure_due_ms == NOW
    assert requests_for(m, COMPACT, NOW) == CompactionRequest("t", 0, 100, 100, 7)

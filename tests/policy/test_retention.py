"""Retention (DESIGN section 4, "Retention"; Kafka's UnifiedLog.deleteOldSegments; ★ KIP-68)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lakecleaner.errors import ConcurrentModification
from lakecleaner.log.manifest import Manifest
from lakecleaner.offsets import ConsumedPosition
from lakecleaner.policy.retention import (
    CONSUMED,
    LOG_START_BREACH,
    RETENTION_BYTES,
    RETENTION_MS,
    RetentionPlan,
    apply_retention,
    plan_retention,
)
from tests.policy.policy_builders import COMPACT, DAY, DELETE, HOUR, NOW, OLD, active, manifest, segment


def deleted(plan: RetentionPlan) -> list[tuple[str, str]]:
    return [(d.segment_id, d.rule) for d in plan.deletions]


def four_segments(**kwargs: object) -> Manifest:
    return manifest(segment(0), segment(10), segment(20), active(30), **kwargs)  # type: ignore[arg-type]


# -- 1. log start breach ----------------------------------------------------------------------------


def test_log_start_breach_deletes_the_segments_wholly_below_the_log_start() -> None:
    plan = plan_retention(four_segments(log_start=25), DELETE, None, NOW)
    assert deleted(plan) == [("s0", LOG_START_BREACH), ("s10", LOG_START_BREACH)]
    assert plan.new_log_start_offset == 25  # s20 holds the log start: it stays, and the offset never goes back


def test_a_segment_ending_exactly_at_the_log_start_is_deleted() -> None:
    plan = plan_retention(four_segments(log_start=20), COMPACT, None, NOW)
    assert deleted(plan) == [("s0", LOG_START_BREACH), ("s10", LOG_START_BREACH)]
    assert plan.new_log_start_offset == 20


def test_the_log_start_rule_never_deletes_the_last_segment() -> None:
    log = manifest(segment(0), segment(10), log_start=20)
    plan = plan_retention(log, COMPACT, None, NOW)
    assert deleted(plan) == [("s0", LOG_START_BREACH)]
    assert plan.kept_because == "segment s10 is kept: the log start rule never deletes the last segment"


def test_a_compact_only_topic_deletes_only_below_the_log_start() -> None:
    config = replace(COMPACT, retention_ms=1, retention_bytes=0)
    plan = plan_retention(four_segments(log_start=10), config, None, NOW)
    assert deleted(plan) == [("s0", LOG_START_BREACH)]
    assert "log start offset 10" in (plan.kept_because or "")


def test_the_log_start_rule_comes_first() -> None:
    config = replace(DELETE, retention_ms=HOUR)
    plan = plan_retention(four_segments(log_start=10), config, None, NOW)
    assert deleted(plan) == [
        ("s0", LOG_START_BREACH),
        ("s10", RETENTION_MS),
        ("s20", RETENTION_MS),
    ]


def test_a_segment_spanning_no_offsets_goes_with_the_segments_before_it() -> None:
    # deleting s0 moves the log start to 10, where the next segment starts: the empty [10, 10) is
    # then wholly below it, so it goes now rather than in a second run at the same time
    empty = replace(segment(10, 0, records=0, size=0, max_ts=-1, created_ms=NOW), id="empty")
    log = manifest(segment(0), empty, active(10))
    config = replace(DELETE, retention_ms=DAY)
    plan = plan_retention(log, config, None, NOW)
    assert deleted(plan) == [("s0", RETENTION_MS), ("empty", LOG_START_BREACH)]
    assert plan_retention(apply_retention(log, plan, NOW), config, None, NOW).deletions == ()


# -- 2. retention.bytes -------------------------------------------------------------------------------


def sized_log() -> Manifest:
    return manifest(segment(0, size=100), segment(10, size=200), segment(20, size=300), active(30, size=50))


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        (300, ["s0", "s10"]),  # diff 350: 350-100 ≥ 0, 250-200 ≥ 0, 50-300 < 0
        (350, ["s0", "s10"]),  # diff 300: the second deletion leaves exactly 0, which still deletes
        (351, ["s0"]),  # diff 299: 199-200 < 0 stops
        (650, []),  # diff 0: 0-100 < 0
        (651, []),  # the log is smaller than the limit
    ],
)
def test_size_retention_stops_where_the_excess_minus_the_segment_is_negative(limit: int, expected: list[str]) -> None:
    plan = plan_retention(sized_log(), replace(DELETE, retention_bytes=limit), None, NOW)
    assert deleted(plan) == [(s, RETENTION_BYTES) for s in expected]


def test_size_retention_counts_the_active_segment_and_zero_deletes_it_too() -> None:
    plan = plan_retention(sized_log(), replace(DELETE, retention_bytes=0), None, NOW)
    assert [d for d, _ in deleted(plan)] == ["s0", "s10", "s20", "s30"]
    assert plan.roll_first
    assert plan.new_log_start_offset == 40


# -- 3. retention.ms ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("age", "expected"), [(DAY, []), (DAY + 1, ["s0"])])
def test_time_retention_keeps_a_segment_exactly_retention_ms_old(age: int, expected: list[str]) -> None:
    log = manifest(segment(0, max_ts=NOW - age), active(10, max_ts=NOW))
    plan = plan_retention(log, replace(DELETE, retention_ms=DAY), None, NOW)
    assert deleted(plan) == [(s, RETENTION_MS) for s in expected]


def test_an_expired_segment_behind_a_newer_one_survives() -> None:
    log = manifest(segment(0, max_ts=NOW - HOUR), segment(10, max_ts=OLD), active(20, max_ts=NOW))
    plan = plan_retention(log, replace(DELETE, retention_ms=DAY), None, NOW)
    assert plan.deletions == ()
    assert plan.reason == (
        "nothing to delete: segment s0 is kept: it is not wholly below the log start offset 0; "
        "its newest record is 3600000 ms old, not older than retention.ms 86400000"
    )


def test_a_segment_without_records_is_aged_by_its_creation_time() -> None:
    log = manifest(segment(0, records=0, size=0, max_ts=-1, created_ms=NOW - DAY - 1), segment(10), active(20))
    assert deleted(plan_retention(log, replace(DELETE, retention_ms=DAY), None, NOW)) == [
        ("s0", RETENTION_MS),
        ("s10", RETENTION_MS),
    ]
    young = replace(log, segments=(replace(log.segments[0], created_ms=NOW - DAY), *log.segments[1:]))
    assert plan_retention(young, replace(DELETE, retention_ms=DAY), None, NOW).deletions == ()


# -- the active segment ---------------------------------------------------------------------------


def test_an_expired_active_segment_is_deleted_only_after_a_roll() -> None:
    log = manifest(segment(0), active(10, max_ts=NOW - DAY - 1))
    plan = plan_retention(log, replace(DELETE, retention_ms=DAY), None, NOW)
    assert [d for d, _ in deleted(plan)] == ["s0", "s10"]
    assert plan.roll_first and plan.new_log_start_offset == 20
    after = apply_retention(log, plan, NOW)
    assert (after.segments, after.log_start_offset, after.next_offset) == ((), 20, 20)
    assert after.problems() == []


def test_an_empty_active_segment_is_never_deleted() -> None:
    log = manifest(segment(0), active(10, 0, records=0, size=0, max_ts=-1, created_ms=0))
    plan = plan_retention(log, replace(DELETE, retention_ms=0, retention_bytes=0), None, NOW)
    assert deleted(plan) == [("s0", RETENTION_BYTES)]
    assert not plan.roll_first
    assert plan.kept_because == "segment s10 is kept: the active segment is empty"


def test_a_sealed_empty_last_segment_is_deleted_like_any_other() -> None:
    log = manifest(segment(0), segment(10, records=0, size=0, max_ts=-1, created_ms=OLD))
    plan = plan_retention(log, replace(DELETE, retention_ms=DAY), None, NOW)
    assert [d for d, _ in deleted(plan)] == ["s0", "s10"]
    assert not plan.roll_first


# -- 4. ★ consumed retention (KIP-68) ------------------------------------------------------------------

CONSUMED_CONFIG = replace(DELETE, retention_ms=7 * DAY, retention_commitoffset_ms=HOUR)


def consumed_log() -> Manifest:
    two_hours = NOW - 2 * HOUR
    return manifest(
        segment(0, max_ts=two_hours), segment(10, max_ts=two_hours), segment(20, max_ts=two_hours), active(30)
    )


@pytest.mark.parametrize(("committed", "expected"), [(20, ["s0", "s10"]), (19, ["s0"]), (9, [])])
def test_consumed_retention_never_deletes_past_the_minimum_committed_offset(
    committed: int, expected: list[str]
) -> None:
    consumed = ConsumedPosition(committed, {"slow": committed, "fast": 30})
    plan = plan_retention(consumed_log(), CONSUMED_CONFIG, consumed, NOW)
    assert deleted(plan) == [(s, CONSUMED) for s in expected]
    assert plan.held_back_by == ("slow",)
    assert "above the committed offset" in (plan.kept_because or "")


@pytest.mark.parametrize(("age", "expected"), [(HOUR, []), (HOUR + 1, ["s0"])])
def test_consumed_retention_needs_the_segment_older_than_retention_commitoffset_ms(
    age: int, expected: list[str]
) -> None:
    log = manifest(segment(0, max_ts=NOW - age), active(10))
    plan = plan_retention(log, CONSUMED_CONFIG, ConsumedPosition(10, {"g": 10}), NOW)
    assert deleted(plan) == [(s, CONSUMED) for s in expected]
    assert plan.held_back_by == ()


def test_consumed_retention_is_skipped_when_a_group_offset_is_unknown_but_retention_ms_still_applies() -> None:
    log = manifest(segment(0, max_ts=NOW - 8 * DAY), segment(10, max_ts=NOW - 2 * HOUR), active(20))
    unknown = ConsumedPosition(None, {"a": 20, "b": None}, reason="group b has no committed offset for t-0")
    plan = plan_retention(log, CONSUMED_CONFIG, unknown, NOW)
    assert deleted(plan) == [("s0", RETENTION_MS)]
    assert plan.consumed_skipped == "consumed retention skipped: group b has no committed offset for t-0"
    assert plan.held_back_by == ("b",)
    not_read = plan_retention(log, CONSUMED_CONFIG, None, NOW)
    assert deleted(not_read) == [("s0", RETENTION_MS)]
    assert not_read.consumed_skipped == "consumed retention skipped: no committed offset is known"


@pytest.mark.parametrize(("since", "expected"), [(None, ["s0", "s10"]), (10, []), (0, ["s0", "s10"])])
def test_consumed_retention_keeps_what_an_earlier_kafka_history_left_below_the_groups_offsets(
    since: int | None, expected: list[str]
) -> None:
    """After `mirror --restart-from-kafka` the groups' offsets are of the new history: the earlier
    one's segments (below `since_offset`) are not theirs to delete (issue 74)."""
    consumed = ConsumedPosition(20, {"g": 20}, since_offset=since)
    plan = plan_retention(consumed_log(), CONSUMED_CONFIG, consumed, NOW)
    assert deleted(plan) == [(s, CONSUMED) for s in expected]
    if since == 10:
        assert "earlier Kafka history (below offset 10" in (plan.kept_because or "")


def test_consumed_retention_off_or_on_a_compact_only_topic_does_nothing() -> None:
    everything = ConsumedPosition(40, {"g": 40})
    assert (
        plan_retention(
            consumed_log(), replace(CONSUMED_CONFIG, retention_commitoffset_ms=-1), everything, NOW
        ).deletions
        == ()
    )
    compact_only = replace(CONSUMED_CONFIG, cleanup_policy=frozenset({"compact"}))
    plan = plan_retention(consumed_log(), compact_only, ConsumedPosition(None, {"g": None}), NOW)
    assert (plan.deletions, plan.consumed_skipped) == ((), None)


def test_time_retention_resumes_behind_a_segment_consumed_retention_deleted() -> None:
    # retention.ms stops at s10 (young), consumed retention deletes it, then s20 has expired: a
    # second run at the same time would delete it, so this one does (retention stays idempotent).
    log = manifest(segment(0, max_ts=OLD), segment(10, max_ts=NOW - 2 * HOUR), segment(20, max_ts=OLD), active(30))
    config = replace(DELETE, retention_ms=DAY, retention_commitoffset_ms=HOUR)
    plan = plan_retention(log, config, ConsumedPosition(20, {"g": 20}), NOW)
    assert deleted(plan) == [("s0", RETENTION_MS), ("s10", CONSUMED), ("s20", RETENTION_MS)]
    assert plan_retention(apply_retention(log, plan, NOW), config, ConsumedPosition(20, {"g": 20}), NOW).deletions == ()


# -- applying a plan ------------------------------------------------------------------------------


def test_apply_retention_moves_files_to_pending_deletes_and_keeps_the_checkpoint() -> None:
    log = manifest(segment(0), segment(10), segment(20, max_ts=NOW), active(30), log_start=5, checkpoint=3)
    config = replace(DELETE, retention_ms=DAY, file_delete_delay_ms=60_000)
    plan = plan_retention(log, config, None, NOW)
    after = apply_retention(log, plan, NOW)
    assert [s.id for s in after.segments] == ["s20", "s30"]
    assert (after.log_start_offset, after.cleaner_checkpoint) == (20, 3)
    assert (after.version, after.updated_ms) == (log.version + 1, NOW)
    assert [(p.path, p.delete_after_ms, p.reason) for p in after.pending_deletes] == [
        ("segments/00000000000000000000-s0.parquet", NOW + 60_000, "retention: retention.ms"),
        ("segments/00000000000000000010-s10.parquet", NOW + 60_000, "retention: retention.ms"),
    ]
    assert after.problems() == []


def test_apply_retention_of_an_empty_plan_changes_nothing() -> None:
    log = four_segments()
    assert apply_retention(log, plan_retention(log, DELETE, None, NOW), NOW) is log


def test_apply_retention_refuses_a_plan_for_other_segments() -> None:
    log = four_segments(log_start=10)
    plan = plan_retention(log, DELETE, None, NOW)
    compacted = replace(log, segments=(replace(log.segments[0], id="merged"), *log.segments[1:]))
    with pytest.raises(ConcurrentModification, match="deletes segments s0 but the log now starts with merged"):
        apply_retention(compacted, plan, NOW)


def test_the_log_start_never_moves_back() -> None:
    log = manifest(segment(0, max_ts=OLD), segment(10, max_ts=NOW), active(20), log_start=15)
    plan = plan_retention(log, replace(DELETE, retention_ms=DAY), None, NOW)
    assert deleted(plan) == [("s0", LOG_START_BREACH)]
    assert plan.new_log_start_offset == 15  # not the base 10 of the first remaining segment

"""Partitions marked uncleanable after a failed compaction (Kafka's uncleanable partitions, issue
#19): skipped until their log or config changes or the mark is cleared, and counted by Kafka's
uncleanable-partitions-count and uncleanable-bytes."""

from __future__ import annotations

from dataclasses import replace

from lakecleaner.cleaner_state import CleanerState, CleaningDone, Failure, LastRun, after_cleaning, mark_uncleanable
from lakecleaner.log.manifest import Manifest
from lakecleaner.policy import plan_topic
from tests.policy.policy_builders import COMPACT, NOW, active, manifest, segment

DIRTY = manifest(segment(0, size=10), segment(10, size=90), active(20, size=5), checkpoint=10)


def marked(log: Manifest, attempts: int = 1) -> CleanerState:
    state = CleanerState("t")
    for i in range(attempts):
        entries = mark_uncleanable(
            state, [Failure(log.partition, f"segment file x is unreadable ({i})", log)], COMPACT, NOW - 1000 + i
        )
        state = replace(state, uncleanable=entries)
    return state


def test_a_marked_partition_is_skipped_and_counted_by_kafkas_uncleanable_gauges() -> None:
    """Kafka (`LogCleanerManager.grabFilthiestCompactedLog`, `uncleanablePartitions`): a partition
    marked uncleanable is left out of the candidates; uncleanable-partitions-count counts it and
    uncleanable-bytes sums its cleanable bytes [F, U) (`LogCleanerManager.uncleanableBytes`)."""
    other = replace(DIRTY, partition=1)
    state = marked(DIRTY, attempts=2)
    plan = plan_topic("t", {0: DIRTY, 1: other}, COMPACT, {}, NOW, cleaner=state, force=True)
    skipped = plan.partitions[0].compaction
    assert not skipped.due and skipped.uncleanable == state.uncleanable[0]
    assert skipped.reason.startswith("uncleanable since ")
    assert "2 failed attempts" in skipped.reason and "segment file x is unreadable (1)" in skipped.reason
    assert "lakecleaner uncleanable clear --topic t --partition 0" in skipped.reason
    assert plan.selection.selected == (1,)  # even --force does not take it
    metrics = plan.metrics.to_dict()
    assert (metrics["uncleanable-partitions-count"], metrics["uncleanable-bytes"]) == (1, 90)
    assert metrics["partitions-due"] == 1


def test_a_marked_partition_is_retried_once_new_segments_are_sealed_or_the_config_changes() -> None:
    state = marked(DIRTY)
    rolled = manifest(segment(0, size=10), segment(10, size=90), segment(20, size=5), checkpoint=10)
    assert plan_topic("t", {0: rolled}, COMPACT, {}, NOW, cleaner=state).selection.selected == (0,)
    appended = manifest(segment(0, size=10), segment(10, size=90), active(20, span=30, size=50), checkpoint=10)
    assert plan_topic("t", {0: appended}, COMPACT, {}, NOW, cleaner=state).selection.selected == ()  # active only
    changed = replace(COMPACT, min_cleanable_dirty_ratio=0.1)
    assert plan_topic("t", {0: DIRTY}, changed, {}, NOW, cleaner=state).selection.selected == (0,)


def test_a_run_marks_what_failed_clears_what_it_cleaned_and_keeps_the_mark_of_what_it_left() -> None:
    """Kafka's doneCleaning / markPartitionUncleanable, as the manager records the run the engine
    returned: a failed partition is marked (a second failure counts an attempt), a cleaned one is
    cleared, one the run neither cleaned nor failed on its data (a storage error) keeps its mark."""
    state = marked(DIRTY)
    state = replace(state, uncleanable={**state.uncleanable, 2: replace(state.uncleanable[0], partition=2)})
    last = LastRun("r2", started_ms=NOW, finished_ms=NOW + 10, clean_time_ms=10, buffer_utilization_percent=7)
    failed_again = Failure(0, "map too large", DIRTY)
    newly = Failure(1, "segment y is missing", replace(DIRTY, partition=1))
    done = CleaningDone((failed_again, newly), frozenset({2}), last)
    after = after_cleaning(state, done, COMPACT, NOW)
    assert set(after.uncleanable) == {0, 1} and after.last_run == last
    assert (after.uncleanable[0].attempts, after.uncleanable[0].reason) == (2, "map too large")
    assert after.uncleanable[1].attempts == 1 and after.uncleanable[1].first_failed_ms == NOW
    untouched = after_cleaning(state, CleaningDone((), frozenset(), last), COMPACT, NOW)
    assert untouched.uncleanable == state.uncleanable


def test_the_run_gauges_come_from_the_last_run() -> None:
    """Kafka's time-since-last-run-ms, max-clean-time-secs and max-buffer-utilization-percent."""
    last = LastRun(
        "r1", started_ms=NOW - 5000, finished_ms=NOW - 2000, clean_time_ms=3999, buffer_utilization_percent=42
    )
    metrics = plan_topic("t", {0: DIRTY}, COMPACT, {}, NOW, cleaner=CleanerState("t", last_run=last)).metrics
    assert (metrics.time_since_last_run_ms, metrics.max_clean_time_secs) == (5000, 3)
    assert metrics.max_buffer_utilization_percent == 42


def test_a_cleaner_state_round_trips_and_a_damaged_one_is_refused_with_the_fix() -> None:
    import pytest

    from lakecleaner.errors import CorruptCleanerState

    state = replace(marked(DIRTY, attempts=3), last_run=LastRun("r", 1, 2, 1, 0))
    assert CleanerState.from_json(state.to_json(), "t", "loc") == state
    for damaged in (
        b"{",
        b'{"topic": "other", "uncleanable": []}',
        state.to_json().replace(b'"attempts": 3', b'"attempts": 0'),
    ):
        with pytest.raises(CorruptCleanerState, match="lakecleaner uncleanable clear --topic t"):
            CleanerState.from_json(damaged, "t", "loc")

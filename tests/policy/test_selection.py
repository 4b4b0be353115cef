"""Which partitions a run compacts and in which order (★ overdue first, then dirtiest)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lakecleaner.errors import TopicNotFound
from lakecleaner.log.manifest import Manifest
from lakecleaner.policy.plan import plan_topic
from lakecleaner.policy.selection import select_partitions
from tests.policy.policy_builders import COMPACT, DELETE, HOUR, NOW, active, manifest, segment

CONFIG = replace(COMPACT, max_compaction_lag_ms=HOUR)


def dirty(partition: int, clean: int, dirty: int, *, first_ts: int = NOW) -> Manifest:
    """A partition with `clean` then `dirty` bytes, whose dirty segment's first batch is at `first_ts`."""
    return manifest(
        segment(0, size=clean),
        segment(10, size=dirty, first_ts=first_ts),
        active(20),
        checkpoint=10,
        partition=partition,
    )


def topic(*logs: Manifest) -> dict[int, Manifest]:
    return {log.partition: log for log in logs}


def test_overdue_partitions_come_before_dirtier_ones() -> None:
    logs = topic(
        dirty(0, 100, 900),  # ratio 0.9
        dirty(1, 900, 100, first_ts=NOW - 2 * HOUR),  # ratio 0.1, overdue by 1 h
        dirty(2, 200, 800),  # ratio 0.8
        dirty(3, 900, 100, first_ts=NOW - 3 * HOUR),  # ratio 0.1, overdue by 2 h
        dirty(4, 700, 300),  # ratio 0.3: not due
    )
    plan = plan_topic("t", logs, CONFIG, {}, NOW)
    assert plan.selection.selected == (1, 3, 0, 2)
    assert plan.selection.status(4) == "no"


def test_equal_ratios_are_ordered_by_partition() -> None:
    plan = plan_topic("t", topic(dirty(5, 100, 900), dirty(2, 100, 900), dirty(7, 50, 450)), CONFIG, {}, NOW)
    assert plan.selection.selected == (2, 5, 7)


def test_the_per_run_limit_defers_the_rest() -> None:
    logs = topic(dirty(0, 100, 900), dirty(1, 200, 800), dirty(2, 300, 700))
    plan = plan_topic("t", logs, CONFIG, {}, NOW, max_partitions=2)
    assert (plan.selection.selected, plan.selection.deferred) == ((0, 1), (2,))
    assert plan.selection.status(2) == "deferred (per-run limit)"
    assert plan.metrics.partitions_due == 3
    with pytest.raises(ValueError, match="max_partitions must be at least 1"):
        plan_topic("t", logs, CONFIG, {}, NOW, max_partitions=0)


def test_force_compacts_every_partition_with_cleanable_bytes() -> None:
    nothing_cleanable = manifest(segment(0, size=100), active(10), checkpoint=10, partition=2)
    logs = topic(dirty(0, 900, 100), dirty(1, 100, 900), nothing_cleanable)
    assert plan_topic("t", logs, CONFIG, {}, NOW).selection.selected == (1,)
    forced = plan_topic("t", logs, CONFIG, {}, NOW, force=True).selection
    assert (forced.selected, forced.forced) == ((1, 0), (0,))
    assert (forced.status(0), forced.status(1), forced.status(2)) == ("forced #2", "yes #1", "no")


def test_force_does_not_compact_a_topic_that_is_not_compacted() -> None:
    plan = plan_topic("t", topic(dirty(0, 100, 900)), DELETE, {}, NOW, force=True)
    assert plan.selection.selected == ()


def test_a_partition_subset_limits_the_whole_plan() -> None:
    logs = topic(dirty(0, 100, 900), dirty(1, 100, 900), dirty(2, 100, 900))
    plan = plan_topic("t", logs, CONFIG, {}, NOW, partitions=[2, 0])
    assert [p.partition for p in plan.partitions] == [0, 2]
    assert plan.selection.selected == (0, 2)
    with pytest.raises(TopicNotFound, match="topic t has no partition 3, 9; its partitions are 0, 1, 2"):
        plan_topic("t", logs, CONFIG, {}, NOW, partitions=[9, 3, 1])


def test_a_manifest_under_the_wrong_key_is_refused() -> None:
    with pytest.raises(ValueError, match="the manifest given for t-1 is t-0"):
        plan_topic("t", {1: dirty(0, 1, 1)}, CONFIG, {}, NOW)


def test_selecting_nothing() -> None:
    assert select_partitions({}).selected == ()

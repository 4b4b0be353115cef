"""The idle roll of the active segment (★ DESIGN section 4, "Rolling"; KIP-354's forced roll)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lakecleaner.policy.roll import apply_roll, plan_roll
from tests.policy.policy_builders import COMPACT, DAY, DELETE, HOUR, NOW, active, manifest, segment


@pytest.mark.parametrize(("age", "roll"), [(HOUR, False), (HOUR + 1, True)])
def test_a_compacted_topic_rolls_once_the_first_batch_is_older_than_max_compaction_lag(age: int, roll: bool) -> None:
    config = replace(COMPACT, segment_ms=DAY, max_compaction_lag_ms=HOUR)
    decision = plan_roll(manifest(segment(0), active(10, first_ts=NOW - age, max_ts=NOW)), config, NOW)
    assert decision.roll is roll
    assert "max.compaction.lag.ms 3600000" in decision.reason


def test_segment_ms_bounds_the_roll_when_it_is_the_smaller() -> None:
    config = replace(COMPACT, segment_ms=HOUR, max_compaction_lag_ms=DAY)
    decision = plan_roll(manifest(active(0, first_ts=NOW - HOUR - 1)), config, NOW)
    assert decision.roll
    assert decision.reason == "the active segment's first batch is 3600001 ms old > segment.ms 3600000"


def test_a_delete_only_topic_ignores_max_compaction_lag() -> None:
    config = replace(DELETE, segment_ms=DAY, max_compaction_lag_ms=HOUR)
    assert not plan_roll(manifest(active(0, first_ts=NOW - 2 * HOUR)), config, NOW).roll
    assert plan_roll(manifest(active(0, first_ts=NOW - DAY - 1)), config, NOW).roll


def test_an_empty_active_segment_never_rolls() -> None:
    log = manifest(segment(0), active(10, 0, records=0, size=0, max_ts=-1, created_ms=0))
    decision = plan_roll(log, replace(COMPACT, max_compaction_lag_ms=1), NOW)
    assert (decision.roll, decision.reason) == (False, "the active segment is empty")


def test_a_sealed_log_has_nothing_to_roll() -> None:
    decision = plan_roll(manifest(segment(0, first_ts=0)), replace(COMPACT, max_compaction_lag_ms=1), NOW)
    assert (decision.roll, decision.reason) == (False, "no active segment: the last segment is sealed")


def test_without_a_first_batch_timestamp_the_creation_time_counts() -> None:
    config = replace(COMPACT, max_compaction_lag_ms=HOUR)
    assert plan_roll(manifest(active(0, first_ts=-1, created_ms=NOW - HOUR - 1)), config, NOW).roll
    assert not plan_roll(manifest(active(0, first_ts=-1, created_ms=NOW - HOUR)), config, NOW).roll


def test_apply_roll_seals_the_active_segment_in_a_new_version() -> None:
    log = manifest(segment(0), active(10))
    rolled = apply_roll(log, NOW)
    assert rolled.active_segment is None
    assert rolled.segments == (log.segments[0], replace(log.segments[1], sealed=True))
    assert (rolled.version, rolled.updated_ms) == (log.version + 1, NOW)
    assert rolled.problems() == []
    assert not plan_roll(rolled, replace(COMPACT, max_compaction_lag_ms=1), NOW).roll


def test_apply_roll_refuses_a_log_without_an_active_segment() -> None:
    with pytest.raises(ValueError, match="t-0 has no active segment to roll"):
        apply_roll(manifest(segment(0)), NOW)

"""The cleaner gauges (Kafka's names) and the KIP-354 deletion deadline."""

from __future__ import annotations

from dataclasses import replace

from lakecleaner.policy.cleanable import assess_compaction
from lakecleaner.policy.metrics import deletion_deadline, topic_metrics
from tests.policy.policy_builders import COMPACT, DAY, DELETE, HOUR, NOW, SECOND, active, manifest, segment

CONFIG = replace(COMPACT, max_compaction_lag_ms=HOUR)


def test_topic_gauges() -> None:
    logs = [
        # ratio 29/100 (0.29 * 100 is 28.999… in floating point; the gauge is exact), overdue by 1.5 s
        manifest(
            segment(0, size=71), segment(10, size=29, first_ts=NOW - HOUR - 1500), active(20, size=5), checkpoint=10
        ),
        # ratio 2/3, due
        manifest(segment(0, size=1), segment(10, size=2, first_ts=NOW), active(20, size=7), checkpoint=10),
        # no clean or cleanable bytes: left out of max-dirty-percent
        manifest(active(0, size=3)),
    ]
    metrics = topic_metrics([assess_compaction(log, CONFIG, NOW).gauges for log in logs])
    assert metrics.to_dict() == {
        "max-compaction-delay-secs": 1,
        "max-dirty-percent": 66,
        "cleanable-bytes": 31,
        "not-yet-cleanable-bytes": 15,
        "uncleanable-partitions-count": 0,  # no partition is marked uncleanable (tests/policy/test_uncleanable.py)
        "uncleanable-bytes": 0,
        "partitions-due": 2,
        "time-since-last-run-ms": None,  # no run yet
        "max-clean-time-secs": None,
        "max-buffer-utilization-percent": None,
    }
    assert topic_metrics([assess_compaction(logs[0], CONFIG, NOW).gauges]).max_dirty_percent == 29


def test_gauges_of_a_topic_that_is_not_compacted_are_zero() -> None:
    log = manifest(segment(0, size=1), segment(10, size=2, first_ts=1), active(20), checkpoint=10)
    assert set(topic_metrics([assess_compaction(log, DELETE, NOW).gauges]).to_dict().values()) == {0, None}


def test_the_record_deadline_is_the_earliest_first_batch_at_or_after_f_plus_the_max_lag() -> None:
    log = manifest(
        segment(0, first_ts=NOW - DAY),  # below F: already clean
        segment(10, first_ts=0),  # ignored
        segment(20, first_ts=NOW - 10 * SECOND),
        active(30, first_ts=NOW - 20 * SECOND),  # the active segment counts
        checkpoint=10,
    )
    deadline = deletion_deadline(log, CONFIG, 10, NOW)
    assert deadline is not None
    assert (deadline.record_deadline_ms, deadline.tombstone_horizon_ms) == (NOW - 20 * SECOND + HOUR, None)
    assert (deadline.deadline_ms, deadline.seconds_left) == (NOW - 20 * SECOND + HOUR, 3580)


def test_an_overdue_deadline_has_negative_seconds_left() -> None:
    log = manifest(segment(0, first_ts=NOW - HOUR - 1), active(10))
    deadline = deletion_deadline(log, CONFIG, 0, NOW)
    assert deadline is not None and deadline.seconds_left == -1


def test_the_tombstone_horizon_is_a_deadline_too() -> None:
    log = manifest(segment(0, horizon=NOW + 5 * SECOND), segment(10, horizon=NOW + 9 * SECOND), active(20))
    deadline = deletion_deadline(log, COMPACT, 20, NOW)  # max lag disabled: only the tombstones
    assert deadline is not None
    assert (deadline.record_deadline_ms, deadline.tombstone_horizon_ms, deadline.seconds_left) == (None, NOW + 5000, 5)
    with_lag = deletion_deadline(log, replace(COMPACT, max_compaction_lag_ms=SECOND), 0, NOW)
    assert with_lag is not None and with_lag.deadline_ms == log.segments[0].first_batch_max_timestamp + SECOND


def test_no_deadline_without_max_lag_or_tombstones() -> None:
    assert deletion_deadline(manifest(segment(0, first_ts=1), active(10)), COMPACT, 0, NOW) is None
    assert deletion_deadline(manifest(segment(0, first_ts=0)), CONFIG, 0, NOW) is None

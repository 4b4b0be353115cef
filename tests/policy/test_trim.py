"""`trim` (Kafka's DeleteRecords): validation and the log start offset it moves."""

from __future__ import annotations

import pytest

from lakecleaner.errors import OffsetOutOfRange
from lakecleaner.policy.retention import LOG_START_BREACH, plan_retention
from lakecleaner.policy.trim import apply_trim, plan_trim
from tests.policy.policy_builders import COMPACT, NOW, active, manifest, segment


def test_a_trim_beyond_the_log_end_is_refused() -> None:
    log = manifest(segment(0), active(10), log_start=5)
    with pytest.raises(OffsetOutOfRange, match="offset 21: it is beyond the log end offset 20"):
        plan_trim(log, 21)
    with pytest.raises(OffsetOutOfRange):
        apply_trim(log, 21, NOW)


def test_a_trim_below_the_log_start_is_refused_not_clamped() -> None:
    log = manifest(segment(0), active(10), log_start=5)
    with pytest.raises(OffsetOutOfRange, match="offset 4: it is below the log start offset 5"):
        plan_trim(log, 4)
    with pytest.raises(OffsetOutOfRange):
        apply_trim(log, 4, NOW)


def test_a_trim_to_the_current_log_start_is_a_no_op() -> None:
    log = manifest(segment(0), active(10), log_start=5)
    assert plan_trim(log, 5).no_op
    assert apply_trim(log, 5, NOW) is log


def test_a_trim_moves_the_log_start_and_retention_then_deletes_the_released_segments() -> None:
    log = manifest(segment(0), segment(10), segment(20), active(30))
    plan = plan_trim(log, 25)
    assert (plan.no_op, plan.released_segments) == (False, ("s0", "s10"))
    trimmed = apply_trim(log, 25, NOW)
    assert (trimmed.log_start_offset, trimmed.version, trimmed.segments) == (25, log.version + 1, log.segments)
    retention = plan_retention(trimmed, COMPACT, None, NOW)  # compact-only: the log start rule alone
    assert [(d.segment_id, d.rule) for d in retention.deletions] == [
        ("s0", LOG_START_BREACH),
        ("s10", LOG_START_BREACH),
    ]


def test_a_trim_to_the_log_end_is_allowed() -> None:
    log = manifest(segment(0), active(10))
    assert apply_trim(log, 20, NOW).log_start_offset == 20
    assert plan_trim(log, 20).released_segments == ("s0",)  # the last segment is never released by rule 1

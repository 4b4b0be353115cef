"""The wording helpers of the reasons."""

from __future__ import annotations

from lakecleaner.policy.text import format_duration_ms, format_ratio, format_timestamp_ms


def test_a_ratio_is_never_shown_equal_to_a_threshold_it_is_not_equal_to() -> None:
    assert format_ratio(0.62, 0.5) == "0.62"
    assert format_ratio(0.5, 0.5) == "0.50"
    assert format_ratio(0.4999, 0.5) == "0.4999"
    assert format_ratio(0.5000001, 0.5) == "0.5000001"
    assert format_ratio(0.3, 0.3) == "0.30"


def test_durations_and_timestamps() -> None:
    assert (format_duration_ms(250), format_duration_ms(3_600_000), format_duration_ms(1999)) == (
        "250 ms",
        "3600 s",
        "1 s",
    )
    assert format_timestamp_ms(1_700_000_000_123) == "2023-11-14T22:13:20.123Z"
    assert format_timestamp_ms(2**63 - 1) == f"{2**63 - 1} ms"

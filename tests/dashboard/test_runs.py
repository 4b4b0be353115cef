"""A run's record as the dashboard reads it from run.json: the mirror's lag (issue 47)."""

from __future__ import annotations

from typing import Any

import pytest

from lakecleaner.runs.records import RunRecord


def record(summary: dict[str, Any] | None) -> RunRecord:
    return RunRecord("r", None, summary, ("run",), 0)


@pytest.mark.parametrize(
    ("summary", "lag"),
    [
        ({"mirror": {"partitions": [{"partition": 0, "lag": 3}, {"partition": 1, "lag": 4}]}}, 7),
        ({"mirror": {"partitions": []}}, 0),
        ({"assess": {}}, None),  # not a mirrored topic's run
        (None, None),
        ({"mirror": "garbage"}, None),  # a report of a shape no writer makes: nothing, not an error
        ({"mirror": {"partitions": [{"lag": True}, {"lag": "9"}, 5, {"lag": 2}]}}, 2),
    ],
)
def test_the_mirror_lag_is_the_sum_over_partitions_of_a_runs_mirror(
    summary: dict[str, Any] | None, lag: int | None
) -> None:
    assert record(summary).mirror_lag == lag


def test_the_offsets_kafka_deleted_before_they_were_mirrored_reach_the_topics_page_through_the_stored_digest() -> None:
    """Issue 74: a run's `deleted_before_mirrored` is a sentence per gap, kept in the topic's
    stored run digests (what the topic page reads), and shown in its warning box."""
    from lakecleaner.io.strict_json import Fields
    from lakecleaner.runs.digests import RunDigest

    summary = {"mirror": {"partitions": [], "deleted_before_mirrored": [{"partition": 3, "from": 50, "to": 79}, 7]}}
    gaps = record(summary).mirror_gaps
    assert gaps == ("partition 3: offsets 50..79 were deleted in Kafka before they were mirrored",)
    assert record({"mirror": "garbage"}).mirror_gaps == () == record(None).mirror_gaps
    digest = RunDigest.of(record(summary))
    assert RunDigest.from_fields(Fields(digest.to_stored(), "digest")).mirror_gaps == gaps
    older = {k: v for k, v in digest.to_stored().items() if k != "mirror_gaps"}  # stored before issue 74
    assert RunDigest.from_fields(Fields(older, "digest")).mirror_gaps == ()

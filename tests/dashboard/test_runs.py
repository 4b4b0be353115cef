"""A run's record as the dashboard reads it from run.json: the mirror's lag (issue 47)."""

from __future__ import annotations

from typing import Any

import pytest

from lakecleaner.dashboard.runs import RunRecord


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

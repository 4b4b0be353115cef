"""The report task's digest of a DAG run: what it logs and hands on (XCom) stays the same size
however many partitions the topic has; run.json keeps every detail."""

from __future__ import annotations

import json
from typing import Any

from lakecleaner.retention.executor import COMMITTED, FAILED, PartitionRetentionResult, RetentionRunReport
from lakecleaner.runs import outcome

LOCATION = "s3://bucket/_lakecleaner/runs/t/r/run.json"


def summary(partitions: int, failing: int) -> dict[str, Any]:
    """A run of `partitions` partitions, all compacted, `failing` of them failing retention."""
    retention = RetentionRunReport(
        "t",
        "r",
        0,
        tuple(
            PartitionRetentionResult("t", p, FAILED, None, error=f"partition {p} broke")
            if p < failing
            else PartitionRetentionResult("t", p, COMMITTED, None)
            for p in range(partitions)
        ),
    ).to_dict()
    return {
        "topic": "t",
        "run_id": "r",
        "location": LOCATION,
        "assess": {"now_ms": 0, "selected": list(range(partitions)), "rolled": [], "uncleanable": {}},
        "compaction": {"partitions": [{"partition": p, "status": "committed"} for p in range(partitions)]},
        "retention": retention,
        "physical_deletion": {"files_deleted": 7, "partitions_failed": 0, "partitions": []},
    }


def test_the_digest_does_not_grow_with_the_partitions_and_counts_them_all() -> None:
    small, large = (outcome.run_digest(summary(n, failing=25)) for n in (100, 1000))
    assert len(json.dumps(large)) - len(json.dumps(small)) < 10  # only the counts' digits differ
    assert large["compaction"] == {"committed": 1000}
    assert large["retention"] == {"committed": 975, "failed": 25, "segments_deleted": 0, "bytes_deleted": 0}
    assert large["physical_deletion"] == {"files_deleted": 7, "partitions_failed": 0}
    assert (large["partitions_selected"], large["changed_log"], large["location"]) == (1000, True, LOCATION)
    assert large["failure_count"] == 25 and len(large["failures"]) == outcome.SENTENCES_SHOWN
    assert large["failures"][0] == "retention of partition 0: failed: partition 0 broke"
    message = outcome.shown(large["failures"], large["failure_count"], large["location"])
    assert message.endswith(f"; and 5 more in {LOCATION}")


def test_a_run_that_changed_nothing_says_so() -> None:
    quiet = summary(3, failing=0)
    quiet["compaction"] = None
    quiet["retention"] = RetentionRunReport("t", "r", 0, ()).to_dict()
    digest = outcome.run_digest(quiet)
    assert not digest["changed_log"] and digest["failures"] == [] and digest["compaction"] == {}
    assert outcome.shown(digest["failures"], 0, LOCATION) == ""

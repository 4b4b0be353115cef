"""Issue #20: deleted data is physically gone from the bucket by the promised deadline, proven by
reading every object, with the topics' DAGs run by the real scheduler (a backfill over three daily
ticks moves the clock forward) on the S3 server the tests use.

Each erasure topic (topics.py) holds two values of a data subject's key and then its tombstone, in a
partition that goes idle. Before the runs, `audit key` lists every copy with the time it will be
gone; after them, on `erasure-compact` and `erasure-compact-delete`, no object in the bucket holds
the key or its values (raw bytes, and every Parquet file decoded), no run report or Airflow task
log names them, and the audit agrees. On `erasure-failing` a damaged segment makes the first
compaction fail: the copies stay, and the audit reports them overdue with the reason, not silently.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakecleaner.audit import KeyAudit, audit_key
from lakecleaner.policy.erasure import SUPERSEDED, TOMBSTONE
from lakecleaner.runs.naming import dag_id_of, report_run_id
from lakecleaner.runs.reports import load_report
from tests.scheduler.conftest import World
from tests.scheduler.topics import (
    ERASURE_COMPACT,
    ERASURE_COMPACT_DELETE,
    ERASURE_FAILING,
    SECRETS,
    SUBJECT,
)

TRACES = (SUBJECT, *SECRETS)


def finished(world: World, topic: str) -> list[dict[str, Any]]:
    try:
        return world.airflow.wait_for_dag_runs(dag_id_of(topic), 3, timeout_s=900)
    except (TimeoutError, RuntimeError) as exc:
        pytest.fail(f"{exc}\n{world.diagnostics()}")


def traces_in_bucket(world: World, exclude: str) -> list[str]:
    """Every object of the lake (but those under `exclude`) that holds the subject's key or one of
    its values: its raw bytes, and for a Parquet file its decoded key and value columns."""
    found = []
    for obj in world.lake.store.list(""):
        if obj.key.startswith(exclude):
            continue
        data = world.lake.store.read(obj.key)
        if any(trace in data for trace in TRACES):
            found.append(obj.key)
        elif obj.key.endswith(".parquet"):
            table = pq.read_table(pa.BufferReader(data), columns=["key", "value"])
            cells = set(table.column("key").to_pylist()) | set(table.column("value").to_pylist())
            if cells & set(TRACES):
                found.append(obj.key)
    return found


def traces_in_task_logs(world: World) -> list[str]:
    logs = (world.airflow.home / "logs").rglob("*.log")
    return [str(p) for p in logs if any(trace in p.read_bytes() for trace in TRACES)]


def on_time(audit: KeyAudit, now_ms: int, last_tick_ms: int) -> None:
    """Every copy is listed with a deadline that has not passed and comes before the last tick."""
    assert not audit.overdue, audit.to_dict()
    for copy in audit.copies:
        assert copy.deadline is not None and copy.deadline.gone_by_ms is not None
        assert now_ms <= copy.deadline.gone_by_ms <= last_tick_ms, copy.to_dict()


@pytest.mark.parametrize("topic", [ERASURE_COMPACT, ERASURE_COMPACT_DELETE])
def test_a_deleted_key_is_physically_gone_from_the_bucket_by_its_deadline(
    world: World, started: dict[str, Any], topic: str
) -> None:
    before: KeyAudit = started["erasure_before"][topic]
    ticks_ms = [int(t.timestamp() * 1000) for t in world.ticks]
    assert [c.kind for c in before.copies] == [SUPERSEDED, SUPERSEDED, TOMBSTONE]
    on_time(before, before.now_ms, ticks_ms[-1])
    runs = finished(world, topic)
    assert [r["state"] for r in runs] == ["success"] * 3, world.diagnostics()
    after = audit_key(world.lake, topic, SUBJECT, ticks_ms[-1])
    assert after.copies == [] and not after.overdue, after.to_dict()
    assert world.lake.cleaner_state.read(topic).last_dag_run_ms == ticks_ms[-1]  # the audit's sign the DAG runs
    kept = {r["key"] for r in world.lake.topic(topic).partition(0).read().to_pylist()}
    # compaction keeps the other keys; on compact,delete retention.ms (30 h) has deleted them too
    assert kept == (set() if topic == ERASURE_COMPACT_DELETE else {b"other-1", b"other-2"})
    if topic == ERASURE_COMPACT:  # the last topic checked sees the whole bucket after both
        return
    finished(world, ERASURE_COMPACT)
    finished(world, ERASURE_FAILING)
    assert traces_in_bucket(world, exclude=f"topics/{ERASURE_FAILING}/") == []
    assert traces_in_task_logs(world) == []


def test_a_failed_compaction_makes_the_copies_overdue_with_the_reason(world: World, started: dict[str, Any]) -> None:
    runs = finished(world, ERASURE_FAILING)
    assert runs[0]["state"] == "failed"  # the run whose compaction failed says so
    assert [r["state"] for r in runs[1:]] == ["success", "success"]  # later runs skip the partition
    last_tick = int(world.ticks[-1].timestamp() * 1000)
    audit = audit_key(world.lake, ERASURE_FAILING, SUBJECT, last_tick)
    assert audit.overdue
    superseded = [c for c in audit.copies if c.kind == SUPERSEDED]
    assert len(superseded) == 2
    for copy in superseded:
        assert copy.deadline is not None and "not compacted" in (copy.deadline.overdue or ""), copy.to_dict()
    state = world.lake.cleaner_state.read(ERASURE_FAILING)
    assert list(state.uncleanable) == [0] and state.uncleanable[0].attempts == 1
    # Issue #19: the later runs' reports, the plan and the dashboard say the partition is skipped, and why
    summary = load_report(world.lake.store, ERASURE_FAILING, report_run_id(runs[1]["dag_run_id"]), "run")
    assert "uncleanable since" in summary["assess"]["uncleanable"]["0"]
    status, topic = world.airflow.api("GET", f"/lakecleaner/api/topics/{ERASURE_FAILING}", user="admin")
    assert status == 200 and list(topic["uncleanable_partitions"]) == ["0"]
    assert topic["metrics"]["uncleanable-partitions-count"] == 1 and topic["metrics"]["uncleanable-bytes"] > 0
    _, page = world.airflow.api("GET", f"/lakecleaner/topics/{ERASURE_FAILING}", user="admin", raw=True)
    assert 'data-uncleanable="0"' in page and "is not compacted: uncleanable since" in page
    # Issue #20: the dashboard shows offsets and deadlines, never the records it is about
    _, api = world.airflow.api("GET", f"/lakecleaner/api/topics/{ERASURE_FAILING}", user="admin", raw=True)
    assert not any(trace.decode() in text for trace in TRACES for text in (page, api))

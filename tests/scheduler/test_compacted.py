"""Issue #13: a compacted topic's DAG reaches compaction under a real scheduler, however its run starts.

Each way a run reaches Airflow's scheduler has its own compacted topic (topics.py): a run the
scheduler creates itself, a REST trigger with a logical date, one with `"logical_date": null`
(whose "now" is the run's `run_after`), and a backfill of two intervals. Every run must pass
through the `compact` task, which waits for a slot of the pool `lakecleaner airflow setup` created,
commit, and leave the KIP-280 winners. The runs are all started first (conftest's `started`, with
the backfill test's), so their Spark jobs overlap within the pool's two slots; each test
then waits for its own.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from lakecleaner.clock import epoch_ms
from lakecleaner.runs.naming import dag_id_of, report_run_id
from lakecleaner.runs.reports import load_report
from tests.scheduler.conftest import World
from tests.scheduler.topics import (
    CDC_BACKFILLED,
    CDC_CONFIG,
    CDC_REST,
    CDC_REST_NULL,
    CDC_SCHEDULED,
    CDC_WINNERS,
    HOUR,
    cdc_log,
)


def finished_runs(world: World, topic: str, count: int) -> list[dict[str, Any]]:
    try:
        runs = world.airflow.wait_for_dag_runs(dag_id_of(topic), count, timeout_s=900)
    except (TimeoutError, RuntimeError) as exc:
        pytest.fail(f"{exc}\n{world.diagnostics()}")
    assert [r["state"] for r in runs] == ["success"] * count, world.diagnostics()
    return runs


def compacted(world: World, topic: str, run: dict[str, Any]) -> dict[str, Any]:
    """What a run's summary (run.json) says: its now, the compact task's state, where the
    compaction ran and the outcome of partition 0's compaction, with the range it cleaned."""
    summary = load_report(world.lake.store, topic, report_run_id(run["dag_run_id"]), "run")
    (partition,) = summary["compaction"]["partitions"]
    return {
        "now_ms": summary["assess"]["now_ms"],
        "selected": summary["assess"]["selected"],
        "spark": summary["compaction"]["spark"],
        "status": partition["status"],
        "range": (partition["first_dirty_offset"], partition["first_uncleanable_offset"]),
    }


def task_states(world: World, topic: str, run: dict[str, Any]) -> dict[str, str]:
    path = f"/api/v2/dags/{dag_id_of(topic)}/dagRuns/{run['dag_run_id']}/taskInstances"
    status, body = world.airflow.api("GET", path, user="admin")
    assert status == 200, body
    return {ti["task_id"]: ti["state"] for ti in body["task_instances"]}


def assert_compacted_to_the_winners(world: World, topic: str, run: dict[str, Any], now_ms: int) -> None:
    assert task_states(world, topic, run)["compact"] == "success"
    assert compacted(world, topic, run) == {
        "now_ms": now_ms,
        "selected": [0],
        "spark": "connect",  # the world's spark_lakecleaner connection (conftest.py)
        "status": "committed",
        "range": (0, 9),
    }
    assert cdc_log(world.lake, topic) == CDC_WINNERS
    (tombstone,) = [r for r in world.lake.topic(topic).partition(0).read().to_pylist() if r["value"] is None]
    assert tombstone["delete_horizon_ms"] == now_ms + CDC_CONFIG["delete.retention.ms"]


def test_setup_created_the_compact_tasks_pool_with_the_configured_slots(world: World) -> None:
    status, pool = world.airflow.api("GET", "/api/v2/pools/lakecleaner_spark", user="admin")
    assert status == 200 and pool["slots"] == 2


def test_a_run_the_scheduler_creates_compacts_the_topic(world: World, started: dict[str, Any]) -> None:
    (run,) = finished_runs(world, CDC_SCHEDULED, 1)
    assert run["run_type"] == "scheduled"
    assert datetime.fromisoformat(run["data_interval_end"]) == world.ticks[-1]
    assert_compacted_to_the_winners(world, CDC_SCHEDULED, run, epoch_ms(world.ticks[-1]))


def test_a_rest_trigger_with_a_logical_date_compacts_at_that_date(world: World, started: dict[str, Any]) -> None:
    (run,) = finished_runs(world, CDC_REST, 1)
    assert run["dag_run_id"] == started[CDC_REST] and run["run_type"] == "manual"
    assert_compacted_to_the_winners(world, CDC_REST, run, epoch_ms(world.ticks[-1]))


def test_a_rest_trigger_without_a_logical_date_compacts_at_its_run_after(world: World, started: dict[str, Any]) -> None:
    (run,) = finished_runs(world, CDC_REST_NULL, 1)
    assert run["dag_run_id"] == started[CDC_REST_NULL]
    assert run["logical_date"] is None and run["data_interval_end"] is None
    assert_compacted_to_the_winners(world, CDC_REST_NULL, run, epoch_ms(datetime.fromisoformat(run["run_after"])))


def test_a_backfill_of_two_intervals_compacts_what_each_interval_allows(world: World, started: dict[str, Any]) -> None:
    runs = finished_runs(world, CDC_BACKFILLED, 2)
    assert [r["run_type"] for r in runs] == ["backfill", "backfill"]
    earlier, latest = (epoch_ms(t) for t in world.ticks[1:])
    # A day before the latest tick, min.compaction.lag.ms (12 h) holds back the second and third
    # segments (30 and 20 hours before the latest tick): only [0, 4) is cleaned. Then the rest.
    assert compacted(world, CDC_BACKFILLED, runs[0]) == {
        "now_ms": earlier,
        "selected": [0],
        "spark": "connect",
        "status": "committed",
        "range": (0, 4),
    }
    assert compacted(world, CDC_BACKFILLED, runs[1]) == {
        "now_ms": latest,
        "selected": [0],
        "spark": "connect",
        "status": "committed",
        "range": (4, 9),
    }
    assert [task_states(world, CDC_BACKFILLED, r)["compact"] for r in runs] == ["success", "success"]
    assert cdc_log(world.lake, CDC_BACKFILLED) == CDC_WINNERS
    (tombstone,) = [r for r in world.lake.topic(CDC_BACKFILLED).partition(0).read().to_pylist() if r["value"] is None]
    assert tombstone["delete_horizon_ms"] == latest + 24 * HOUR

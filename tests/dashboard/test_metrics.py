"""Metrics: names and values, the bytes a run reclaims, and delivery to a real StatsD socket."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from lakecleaner.config import load_config
from lakecleaner.engine.report import CleanerStats, PartitionReport, RunReport
from lakecleaner.metrics import metric_name, reclaimed
from lakecleaner.orchestration import tasks
from tests.dashboard.conftest import StatsdListener, make_scene

EMIT = """
import json, sys
from airflow.sdk.configuration import conf
from airflow.sdk.observability import stats
from airflow.sdk.observability.metrics import stats_utils
from lakecleaner.metrics import emit_topic_metrics

# What Airflow's task runner does before it runs a task.
legacy = conf.getboolean("metrics", "legacy_names_on")
stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=legacy)
print(json.dumps(emit_topic_metrics(sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]))))
"""

PLAN_METRICS = {
    "max-compaction-delay-secs": 14401,
    "max-dirty-percent": 66,
    "cleanable-bytes": 8467,
    "uncleanable-bytes": 12017,
    "partitions-due": 2,
}


def test_metric_names() -> None:
    assert metric_name("orders", "max-compaction-delay-secs") == "lakecleaner.orders.max_compaction_delay_secs"
    assert metric_name("orders.v1", "bytes_reclaimed") == "lakecleaner.orders_v1.bytes_reclaimed"


def test_a_run_reclaims_what_its_committed_retention_and_compaction_removed(tmp_path: Path) -> None:
    scene = make_scene(tmp_path)
    config = load_config(scene.config_path)
    dry = tasks.gather(
        config,
        "page-views",
        "dry",
        {"retention": tasks.retention(config, "page-views", scene.now_ms, {"dry_run": True}, "dry")},
    )["retention"]
    assert reclaimed({"retention": dry}).bytes == 0 and dry["partitions"][0]["deleted_by_rule"]
    pushed = tasks.retention(config, "page-views", scene.now_ms, {"dry_run": False}, "real")
    retention = tasks.gather(config, "page-views", "real", {"retention": pushed})["retention"]
    compaction = RunReport("real", "customers", scene.now_ms, scene.now_ms)
    stats = CleanerStats(records_read=300, bytes_read=12_000, records_written=120, bytes_written=5_000)
    compaction.partitions = [
        PartitionReport(0, "committed", stats=stats),
        PartitionReport(1, "aborted", stats=CleanerStats(records_read=9, bytes_read=99)),
    ]
    summary = {"retention": retention, "compaction": compaction.to_dict(), "physical_deletion": {"files_deleted": 3}}
    got = reclaimed(summary)
    deleted = retention["partitions"][0]["deleted_by_rule"].values()
    assert retention["bytes_deleted"] > 0
    assert got.bytes == retention["bytes_deleted"] + 7_000
    assert got.records == sum(r["records"] for r in deleted) + 180
    assert (got.segments_deleted, got.files_deleted) == (retention["segments_deleted"], 3)


def test_metrics_reach_statsd_through_airflows_stats(tmp_path: Path) -> None:
    listener = StatsdListener()
    try:
        script = tmp_path / "emit.py"
        script.write_text(EMIT)
        env = {
            "AIRFLOW_HOME": str(tmp_path / "airflow"),
            "AIRFLOW__METRICS__STATSD_ON": "True",
            "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
            "AIRFLOW__METRICS__STATSD_PORT": str(listener.port),
            "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
        }
        deleted = {"consumed": {"segments": 2, "bytes": 8000, "records": 200}}
        run = {"retention": {"partitions": [{"status": "committed", "deleted_by_rule": deleted}]}}
        proc = subprocess.run(
            [sys.executable, str(script), "orders.v1", json.dumps(PLAN_METRICS), json.dumps(run)],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        sent = json.loads(proc.stdout.strip().splitlines()[-1])
        expected = {f"airflow.{name}": value for name, value in sent.items()}
        deadline = time.monotonic() + 10
        while set(listener.metrics("airflow.lakecleaner.")) != set(expected) and time.monotonic() < deadline:
            time.sleep(0.1)
        received = listener.metrics("airflow.lakecleaner.")
    finally:
        listener.close()
    assert received["airflow.lakecleaner.orders_v1.max_compaction_delay_secs"] == "14401|g"
    assert received["airflow.lakecleaner.orders_v1.partitions_due"] == "2|g"
    assert received["airflow.lakecleaner.orders_v1.bytes_reclaimed"] == "8000|c"
    assert received["airflow.lakecleaner.orders_v1.records_removed"] == "200|c"
    assert received["airflow.lakecleaner.orders_v1.segments_deleted"] == "2|c"
    assert set(received) == set(expected)

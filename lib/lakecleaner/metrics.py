"""Metrics: a topic's cleaner gauges and a run's reclaimed space, emitted through Airflow's Stats.

Airflow's task runner configures Stats from the `[metrics]` section (StatsD, DogStatsD or
OpenTelemetry: `AIRFLOW__METRICS__STATSD_ON`, `..._STATSD_HOST`, `..._STATSD_PORT`, `..._OTEL_ON`),
so a DAG's `report` task only has to call `emit_topic_metrics`. The names (under Airflow's
`statsd_prefix`, `airflow.` by default) are documented in docs/dashboard.md:

* gauges, one per cleaner gauge of the plan (Kafka's names with `_` for `-`):
  `lakecleaner.<topic>.max_compaction_delay_secs`, `.max_dirty_percent`, `.cleanable_bytes`,
  `.not_yet_cleanable_bytes`, `.uncleanable_partitions_count`, `.uncleanable_bytes`,
  `.partitions_due`, and from the last run `.time_since_last_run_ms`, `.max_clean_time_secs`,
  `.max_buffer_utilization_percent` (not sent before the topic's first run);
* counters, per run: `lakecleaner.<topic>.bytes_reclaimed`, `.records_removed`,
  `.segments_deleted` (retention) and `.files_deleted` (physical deletion).

A `.` in a topic name becomes `_` in the metric name (Kafka warns of the same collision), so the
topic stays one segment of the StatsD hierarchy; the exact name is also sent as the `topic` tag.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PREFIX = "lakecleaner"
COMMITTED = "committed"


@dataclass(frozen=True)
class Reclaimed:
    """What a run removed from the log: by retention (whole segments) and by compaction (the
    range's bytes and records before the pass minus after it), over committed partitions only,
    so a dry run or a failed partition reclaims nothing; and the files physically deleted."""

    bytes: int = 0
    records: int = 0
    segments_deleted: int = 0
    files_deleted: int = 0

    def to_dict(self) -> dict[str, int]:
        return {
            "bytes_reclaimed": self.bytes,
            "records_removed": self.records,
            "segments_deleted": self.segments_deleted,
            "files_deleted": self.files_deleted,
        }


def _committed(part: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The partitions of a run report (retention or compaction) that committed."""
    return [p for p in (part or {}).get("partitions") or [] if p.get("status") == COMMITTED]


def reclaimed(run_summary: Mapping[str, Any]) -> Reclaimed:
    """What the run of `run_summary` (a run.json: `retention`, `compaction`, `physical_deletion`) reclaimed."""
    deleted = [rule for p in _committed(run_summary.get("retention")) for rule in p["deleted_by_rule"].values()]
    compacted = [p["stats"] for p in _committed(run_summary.get("compaction"))]
    return Reclaimed(
        bytes=sum(r["bytes"] for r in deleted) + sum(s["bytes_read"] - s["bytes_written"] for s in compacted),
        records=sum(r["records"] for r in deleted) + sum(s["records_read"] - s["records_written"] for s in compacted),
        segments_deleted=sum(r["segments"] for r in deleted),
        files_deleted=int((run_summary.get("physical_deletion") or {}).get("files_deleted") or 0),
    )


def metric_name(topic: str, name: str) -> str:
    """`lakecleaner.<topic>.<name>`, with `.` in the topic and `-` in the name replaced by `_`."""
    return f"{PREFIX}.{topic.replace('.', '_')}.{name.replace('-', '_')}"


def emit_topic_metrics(
    topic: str, plan_metrics: Mapping[str, Any] | None, run_summary: Mapping[str, Any]
) -> dict[str, int]:
    """Emit the plan's cleaner gauges (`TopicMetrics.to_dict()`, none when the assessment failed)
    and the run's reclaimed space as counters; returns every metric name with the value sent."""
    from airflow.sdk.observability import stats  # Airflow's, in the task that calls this (the core install has none)

    tags = {"topic": topic}
    sent: dict[str, int] = {}
    for name, value in (plan_metrics or {}).items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            sent[metric_name(topic, name)] = int(value)
            stats.gauge(metric_name(topic, name), value, tags=tags)
    for name, count in reclaimed(run_summary).to_dict().items():
        sent[metric_name(topic, name)] = count
        stats.incr(metric_name(topic, name), count, tags=tags)
    return sent

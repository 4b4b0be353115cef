"""One topic's row of the lake-wide overview, from its facts and its recent runs: what is due and
why, the nearest deletion deadline (KIP-354, KIP-534), the cleaner's gauges and the trend. Pure:
the dashboard's JSON API and `lakecleaner plan --all` show the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lakecleaner.lake import failure_runs, partitions_label
from lakecleaner.policy.metrics import topic_metrics
from lakecleaner.policy.selection import select_partitions
from lakecleaner.policy.text import format_timestamp_ms
from lakecleaner.runs.digests import RECENT_RUNS, RunDigest
from lakecleaner.runs.naming import dag_id_of
from lakecleaner.summaries.read import TopicFacts


@dataclass(frozen=True)
class Due:
    """A partition with work due, and why (compaction reason, retention reason)."""

    partition: int
    compaction: str | None
    retention: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"partition": self.partition, "compaction": self.compaction, "retention": self.retention}


def partitions_due(facts: TopicFacts) -> list[Due]:
    """The partitions due for compaction or with segments retention deletes, each with the reasons."""
    due = []
    for partition, entry in sorted(facts.partitions.items()):
        compaction = entry.compaction_reason if entry.gauges.due else None
        if compaction or entry.retention_reason:
            due.append(Due(partition, compaction, entry.retention_reason))
    return due


def nearest_deadline(facts: TopicFacts, now_ms: int) -> dict[str, Any] | None:
    """The partition whose deletion deadline (KIP-354 / tombstone horizon) comes first."""
    deadlines = [(ms, p) for p, e in facts.partitions.items() if (ms := e.figures.nearest_deadline_ms) is not None]
    if not deadlines:
        return None
    _, partition = min(deadlines)
    deadline = facts.partitions[partition].deadline(now_ms)
    assert deadline is not None
    return {"partition": partition, "at": format_timestamp_ms(deadline.deadline_ms), **deadline.to_dict()}


def topic_overview(facts: TopicFacts, runs: Sequence[RunDigest], now_ms: int) -> dict[str, Any]:
    """One topic's row of the overview: policy, size, what is due and why, the cleaner gauges,
    the nearest deletion deadline, the last run and the bytes reclaimed by the recent runs, and
    where the figures come from (`source`: the summary as of when, and how many partitions were
    planned from their manifests)."""
    entries = facts.partitions
    gauges = {p: e.gauges for p, e in entries.items()}
    metrics = topic_metrics(list(gauges.values()), facts.last_run, now_ms)
    recent = [r.reclaimed for r in runs[:RECENT_RUNS]]
    return {
        "topic": facts.topic,
        "dag_id": dag_id_of(facts.topic),
        "policy": ",".join(facts.cleanup_policy),
        "partitions": len(entries) + len(facts.unreadable),
        "unreadable_partitions": {
            partitions_label(first, last): reason for first, last, reason in failure_runs(facts.unreadable)
        },
        "uncleanable_partitions": {
            str(p): e.compaction_reason for p, e in sorted(entries.items()) if e.gauges.uncleanable
        },
        "records": sum(e.figures.records for e in entries.values()),
        "bytes": sum(e.figures.size_bytes for e in entries.values()),
        "metrics": metrics.to_dict(),
        "max_compaction_delay_secs": metrics.max_compaction_delay_secs,
        "partitions_due": [d.to_dict() for d in partitions_due(facts)],
        "compaction_order": list(select_partitions(gauges).selected),
        "nearest_deadline": nearest_deadline(facts, now_ms),
        "last_run": runs[0].to_dict() if runs else None,
        "mirror_lag": next((r.mirror_lag for r in runs if r.mirror_lag is not None), None),
        "mirror_gaps": [f"{gap} (run {r.run_id})" for r in runs[:RECENT_RUNS] for gap in r.mirror_gaps],
        "reclaimed_recent": {
            "runs": len(recent),
            "bytes": sum(r.bytes for r in recent),
            "records": sum(r.records for r in recent),
        },
        "trend": trend(runs, facts.compacted),
        "source": facts.source(),
    }


def trend(runs: Sequence[RunDigest], compacted: bool) -> dict[str, Any]:
    """The overview's sparkline: the topic's dirty ratio (compacted) or log size at each of the runs
    already read for the row (no further reads), oldest first."""
    metric = "dirty_ratio" if compacted else "size_bytes"
    values = [v for r in reversed(runs) if (v := getattr(r, metric)) is not None]
    return {"metric": metric, "values": values}


__all__ = ["Due", "nearest_deadline", "partitions_due", "topic_overview", "trend"]

"""`lakecleaner plan --all`: what is due across the lake, a row per topic, from the topics'
summaries where they are current and from the manifests where they are not (issue 50)."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from lakecleaner.cli.base import Context, exit_on_unreadable
from lakecleaner.cli.output import console, format_bytes
from lakecleaner.cli.status import source_note
from lakecleaner.summaries.facts import load_facts
from lakecleaner.summaries.overview import topic_overview
from lakecleaner.summaries.read import TopicFacts


def lake_plan_row(facts: TopicFacts, now_ms: int) -> dict[str, Any]:
    """One topic's line of the lake-wide plan: its size, Kafka's max-dirty-percent, the partitions
    due for compaction (in the order the cleaner would take them) and for retention, the nearest
    deletion deadline (KIP-354 / KIP-534) and where the figures come from. A summary's "due" is
    as of when it was planned (`source`); `plan --topic` plans the topic again at now."""
    row = topic_overview(facts, facts.runs or [], now_ms)
    return {
        "topic": row["topic"],
        "policy": row["policy"],
        "partitions": row["partitions"],
        "records": row["records"],
        "bytes": row["bytes"],
        "max_dirty_percent": row["metrics"]["max-dirty-percent"],
        "compaction_due": row["compaction_order"],
        "retention_due": [d["partition"] for d in row["partitions_due"] if d["retention"]],
        "uncleanable_partitions": sorted(int(p) for p in row["uncleanable_partitions"]),
        "nearest_deadline": row["nearest_deadline"],
        "unreadable_partitions": row["unreadable_partitions"],
        "source": {**row["source"], "note": source_note(facts)},
    }


def show_lake_plan(ctx: Context, now_ms: int) -> None:
    """Every topic of the lake on one line each (`lake_plan_row`); a topic or partition that cannot
    be read is reported, the others shown, and the command then exits 1."""
    loaded = load_facts(ctx.lake, ctx.lake.list_topics(), now_ms)
    rows = [lake_plan_row(facts, now_ms) for facts in loaded.values() if isinstance(facts, TopicFacts)]
    unopened = {name: reason for name, reason in loaded.items() if isinstance(reason, str)}

    def human() -> None:
        if not loaded:
            console.print("no topics in the lake")
            return
        console.print(_table(rows, unopened))

    ctx.emit({"now_ms": now_ms, "topics": rows, "unreadable_topics": unopened}, human)
    exit_on_unreadable(unopened, {f.topic: f.unreadable for f in loaded.values() if isinstance(f, TopicFacts)})


def _table(rows: list[dict[str, Any]], unopened: dict[str, str]) -> Table:
    """The rows as a table within 120 columns; the caption says what its words mean."""
    table = Table(title="what is due, by topic", caption_justify="left")
    for column in ("topic", "policy", "parts", "bytes", "dirty %", "compact", "retain", "deadline in", "from"):
        table.add_column(column, justify="left" if column in ("topic", "policy", "from") else "right")
    for r in rows:
        deadline = r["nearest_deadline"]
        table.add_row(
            r["topic"],
            r["policy"],
            str(r["partitions"]) + (" !" if r["unreadable_partitions"] else ""),
            format_bytes(r["bytes"]),
            str(r["max_dirty_percent"]),
            _count(r["compaction_due"]),
            _count(r["retention_due"]),
            "-" if deadline is None else _hours(deadline["seconds_left"]),
            _source_word(r["source"]),
        )
    for name, reason in unopened.items():
        table.add_row(name, "FAILED", "", "", "", "", "", "", reason[:40])
    table.caption = (
        "compact / retain: partitions due for compaction (Kafka's cleaner would take them now) and with "
        "segments retention deletes; dirty %: Kafka's max-dirty-percent; deadline in: hours to the nearest "
        "deletion deadline (max.compaction.lag.ms, delete.retention.ms); from: the topic's summary "
        "(as planned then) or its manifests (planned now); ! some partitions cannot be read. "
        "`plan --topic NAME` shows one topic's partitions and why."
    )
    return table


def _count(partitions: list[int]) -> str:
    return str(len(partitions)) if partitions else "-"


def _hours(seconds_left: int) -> str:
    """Whole hours to a deadline, `overdue` once it has passed."""
    return "overdue" if seconds_left < 0 else f"{seconds_left // 3600}h"


def _source_word(source: dict[str, Any]) -> str:
    """`summary`, `summary+N` (N partitions from their manifests) or `manifests`."""
    if source["summary_planned_at_ms"] is None:
        return "manifests"
    stale = source["partitions_from_manifests"]
    return f"summary+{stale}" if stale else "summary"

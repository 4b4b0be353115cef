"""A topic plan as a rich table, for `lakecleaner plan --topic T`."""

from __future__ import annotations

from rich.table import Table

from lakecleaner.policy.plan import PartitionPlan, TopicPlan
from lakecleaner.policy.text import format_ratio, format_timestamp_ms

_COLUMNS = (
    "partition",
    "due?",
    "reason",
    "F",
    "U",
    "clean B",
    "cleanable B",
    "dead B",
    "not yet cleanable B",
    "ratio",
    "max delay s",
    "roll?",
    "segments to delete",
    "new log start",
)
_TEXT_COLUMNS = {"due?", "reason", "roll?", "segments to delete"}
#: The columns `--wide` adds: what the ratio and KIP-354's delay are made of.
_WIDE_COLUMNS = {"clean B", "dead B", "not yet cleanable B", "max delay s"}


def render_topic_plan(plan: TopicPlan, *, wide: bool = False) -> Table:
    """One row per partition (due? or uncleanable, reason, F, U, cleanable bytes, dirty ratio,
    roll, segments to delete with their rules, new log start offset; `wide` adds the clean, dead
    (deletion vectors') and not-yet-cleanable bytes and KIP-354's delay); the caption carries the topic's cleaner gauges
    and the compaction order."""
    policy = ",".join(sorted(plan.config.cleanup_policy))
    table = Table(
        title=f"{plan.topic} (cleanup.policy={policy}) at {format_timestamp_ms(plan.now_ms)}",
        caption=_caption(plan),
    )
    shown = [i for i, header in enumerate(_COLUMNS) if wide or header not in _WIDE_COLUMNS]
    for i in shown:
        table.add_column(_COLUMNS[i], justify="left" if _COLUMNS[i] in _TEXT_COLUMNS else "right")
    for partition in plan.partitions:
        row = _row(plan, partition)
        table.add_row(*(row[i] for i in shown))
    return table


def _row(plan: TopicPlan, partition: PartitionPlan) -> tuple[str, ...]:
    compaction, retention = partition.compaction, partition.retention
    cleanable = compaction.range
    if cleanable is None:
        due = "-"
        range_cells = ("-",) * 8
    else:
        due = "uncleanable" if compaction.uncleanable else plan.selection.status(partition.partition)
        range_cells = (
            str(cleanable.first_dirty_offset),
            str(cleanable.first_uncleanable_offset),
            f"{cleanable.clean_bytes:,}",
            f"{cleanable.cleanable_bytes:,}",
            f"{cleanable.dead_bytes:,}",
            f"{cleanable.not_yet_cleanable_bytes:,}",
            format_ratio(cleanable.dirty_ratio, plan.config.min_cleanable_dirty_ratio),
            str(cleanable.max_compaction_delay_ms // 1000),
        )
    roll = "yes" if partition.roll.roll else "no"
    deletions = [f"{d.segment_id} [{d.base_offset}, {d.next_offset}): {d.rule}" for d in retention.deletions]
    if retention.roll_first:
        deletions.append("(rolls the active segment first)")
    if retention.consumed_skipped:
        deletions.append(retention.consumed_skipped)
    return (
        str(partition.partition),
        due,
        compaction.reason,
        *range_cells,
        roll,
        "\n".join(deletions) or "-",
        str(retention.new_log_start_offset),
    )


def _caption(plan: TopicPlan) -> str:
    gauges = "  ".join(f"{name}={value}" for name, value in plan.metrics.to_dict().items() if value is not None)
    order = ", ".join(str(p) for p in plan.selection.selected) or "none"
    return f"{gauges}  compaction order: {order}"

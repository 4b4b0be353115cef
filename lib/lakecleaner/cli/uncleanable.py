"""`lakecleaner uncleanable`: the partitions the cleaner skips until cleared (Kafka's uncleanable partitions)."""

from __future__ import annotations

import click
from rich.table import Table

from lakecleaner.cli.base import Context, cli, pass_ctx
from lakecleaner.cli.output import console
from lakecleaner.policy.text import format_timestamp_ms
from lakecleaner.summaries.refresh import refresh_after_change


@cli.group()
def uncleanable() -> None:
    """Partitions whose compaction failed and that later runs skip (Kafka's uncleanable partitions)."""


@uncleanable.command("list")
@click.option("--topic", required=True)
@pass_ctx
def uncleanable_list(ctx: Context, topic: str) -> None:
    """The partitions marked uncleanable: why, since when, how many attempts failed."""
    ctx.lake.topic(topic)
    state = ctx.lake.cleaner_state.read(topic)
    rows = [e.to_dict() for _, e in sorted(state.uncleanable.items())]

    def human() -> None:
        table = Table("partition", "attempts", "first failed", "last failed", "log end then", "reason")
        for r in rows:
            table.add_row(
                str(r["partition"]),
                str(r["attempts"]),
                format_timestamp_ms(r["first_failed_ms"]),
                format_timestamp_ms(r["last_failed_ms"]),
                str(r["log_end_offset"]),
                r["reason"],
            )
        console.print(table if rows else f"{topic}: no partition is marked uncleanable")

    ctx.emit({"topic": topic, "uncleanable": rows}, human)


@uncleanable.command("clear")
@click.option("--topic", required=True)
@click.option("--partition", "partitions", type=int, multiple=True, help="Only these partitions (default: all).")
@pass_ctx
def uncleanable_clear(ctx: Context, topic: str, partitions: tuple[int, ...]) -> None:
    """Forget that partitions are uncleanable, so that the next run compacts them if they are due."""
    t = ctx.lake.topic(topic)
    for p in partitions:
        t.partition(p)  # an unknown partition is an error, not a silent no-op
    cleared = ctx.lake.cleaner_state.clear(topic, partitions or None)
    refresh_after_change(ctx.lake, topic)
    ctx.emit(
        {"topic": topic, "cleared": cleared},
        lambda: console.print(
            f"{topic}: cleared {', '.join(map(str, cleared)) or 'nothing (no partition was marked)'}"
        ),
    )

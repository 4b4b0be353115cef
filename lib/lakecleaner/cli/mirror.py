"""`lakecleaner mirror`: a Kafka topic's records into the lake at their own offsets (issue 47)."""

from __future__ import annotations

import json
import signal
import threading
from types import FrameType

import click
from rich.table import Table

from lakecleaner.cli.base import Context, cli, pass_ctx
from lakecleaner.cli.output import console, err_console, format_bytes


@cli.command()
@click.option("--topic", required=True, help="A lake topic with `mirror:` in the config file.")
@click.option("--once", is_flag=True, help="Read up to the high watermarks seen at the start, then exit.")
@click.option("--max-seconds", type=click.FloatRange(min=0, min_open=True), help="End the run after this long.")
@click.option("--max-records", type=click.IntRange(min=1), help="End the run after this many records.")
@click.option(
    "--batch-bytes",
    type=click.IntRange(min=1),
    help="Bytes buffered per partition before an append (default 16 MiB).",
)
@click.option(
    "--give-up-seconds",
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds of errors the Kafka client retries (a broker restarting) before the run fails (default 60).",
)
@pass_ctx
def mirror(
    ctx: Context,
    topic: str,
    once: bool,
    max_seconds: float | None,
    max_records: int | None,
    batch_bytes: int | None,
    give_up_seconds: float | None,
) -> None:
    """Append a Kafka topic's records to lake topic TOPIC at their Kafka offsets, byte for byte,
    resuming at the lake's log end. Without --once it runs until SIGTERM (or a limit), then appends
    what it holds and exits 0. Each append prints a progress line on stderr (a JSON object with
    --json)."""
    from lakecleaner.kafka.mirror import (
        DEFAULT_BATCH_BYTES,
        DEFAULT_GIVE_UP_S,
        MirrorLimits,
        PartitionProgress,
        mirror_topic,
    )

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, on_signal)

    def appended(progress: PartitionProgress) -> None:
        if ctx.as_json:
            click.echo(json.dumps({"topic": topic, **progress.to_dict()}), err=True)
        else:
            err_console.print(
                f"{topic}-{progress.partition}: {progress.records:,} records to offset {progress.next_offset} "
                f"(lag {progress.lag:,})"
            )

    limits = MirrorLimits(
        once,
        max_seconds,
        max_records,
        batch_bytes or DEFAULT_BATCH_BYTES,
        give_up_s=give_up_seconds or DEFAULT_GIVE_UP_S,
    )
    try:
        report = mirror_topic(ctx.lake, topic, limits, stop=stop, on_append=appended)
    finally:
        signal.signal(signal.SIGTERM, previous)

    def human() -> None:
        table = Table(title=f"mirror {report.cluster}/{report.source_topic} → {topic} ({report.stopped})")
        for column in ("part", "from", "to", "records", "bytes", "lag"):
            table.add_column(column, justify="right")
        for p in report.partitions:
            table.add_row(
                str(p.partition),
                str(p.start_offset),
                str(p.next_offset),
                f"{p.records:,}",
                format_bytes(p.bytes),
                f"{p.lag:,}",
            )
        console.print(table)
        if report.created:
            console.print(f"created lake topic {topic} with {report.added_partitions} partition(s)")
        elif report.added_partitions:
            console.print(f"added {report.added_partitions} partition(s) to {topic}, as Kafka did")

    ctx.emit(report.to_dict(), human)

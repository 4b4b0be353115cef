"""`lakecleaner mirror`: a Kafka topic's records into the lake at their own offsets (issue 47)."""

from __future__ import annotations

import json
import signal
import sys
import threading
from types import FrameType

import click
from rich.table import Table

from lakecleaner.cli.base import Context, cli, exit_on_failures, pass_ctx
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
@click.option(
    "--restart-from-kafka",
    is_flag=True,
    help="Follow a Kafka topic that is not the one recorded (deleted and created again) as a new history, "
    "appended after every record the lake holds; asks first unless --yes.",
)
@click.option("--yes", is_flag=True, help="Do not ask before --restart-from-kafka.")
@pass_ctx
def mirror(
    ctx: Context,
    topic: str,
    once: bool,
    max_seconds: float | None,
    max_records: int | None,
    batch_bytes: int | None,
    give_up_seconds: float | None,
    restart_from_kafka: bool,
    yes: bool,
) -> None:
    """Append a Kafka topic's records to lake topic TOPIC at their Kafka offsets, byte for byte,
    resuming at the lake's log end. Without --once it runs until SIGTERM (or a limit), then appends
    what it holds and exits 0. Each append prints a progress line on stderr (a JSON object with
    --json). A Kafka topic that is not the one the lake topic recorded (another topic id or cluster
    id) is refused with nothing written (exit 2); a partition that cannot be mirrored is reported
    and the others are mirrored (exit 1)."""
    if restart_from_kafka and not yes:
        if not sys.stdin.isatty():
            raise click.UsageError("--restart-from-kafka asks first; give --yes to confirm without a terminal")
        click.confirm(
            f"Lake topic {topic} will follow the Kafka topic its mirror names now as a new history, after every "
            "record the lake holds (the records it holds stay). Go on?",
            abort=True,
            err=True,
        )
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
        report = mirror_topic(
            ctx.lake, topic, limits, stop=stop, on_append=appended, restart_from_kafka=restart_from_kafka
        )
    finally:
        signal.signal(signal.SIGTERM, previous)

    def human() -> None:
        title = f"mirror {report.cluster}/{report.source.topic} → {topic} ({report.stopped})"
        table = Table(title=title)
        for column in ("part", "from", "to", "records", "bytes", "lag", "status"):
            table.add_column(column, justify="right")
        for p in report.partitions:
            table.add_row(
                str(p.partition),
                str(p.start_offset),
                str(p.next_offset),
                f"{p.records:,}",
                format_bytes(p.bytes),
                f"{p.lag:,}",
                "failed" if p.error else "ok",
            )
        console.print(table)
        if report.restarted:
            console.print(
                f"following Kafka topic {report.source.topic} (topic id {report.source.topic_id}) as a new history "
                f"from lake offset {report.source.offset_delta}"
            )
        if report.created:
            console.print(f"created lake topic {topic} with {report.added_partitions} partition(s)")
        elif report.added_partitions:
            console.print(f"added {report.added_partitions} partition(s) to {topic}, as Kafka did")

    ctx.emit(report.to_dict(), human)
    for gap in report.deleted_before_mirrored:
        click.echo(  # one line each, never wrapped
            f"warning: {topic}-{gap.partition}: offsets {gap.first}..{gap.last} were deleted in Kafka before they were "
            "mirrored (retention or DeleteRecords)",
            err=True,
        )
    exit_on_failures([(f"{topic}-{p}", error) for p, error in sorted(report.failures.items())])

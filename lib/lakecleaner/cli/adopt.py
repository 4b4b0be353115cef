"""`lakecleaner adopt`: logs built from what other tools already wrote (issue 49)."""

from __future__ import annotations

import sys

import click
from rich.table import Table

from lakecleaner.cli.base import Context, cli, pass_ctx
from lakecleaner.cli.output import console


@cli.group()
def adopt() -> None:
    """Build a topic's log from files another tool wrote (Kafka Connect's S3 sink)."""


@adopt.command("connect")
@click.option(
    "--topic", required=True, help="The topic the sink wrote (its files are named <topic>+<partition>+<offset>)."
)
@click.option(
    "--from", "source", required=True, help="The sink's folder of the topic: <s3.bucket.name>/<topics.dir>/<topic>."
)
@click.option("--format", "fmt", type=click.Choice(["parquet", "avro", "json"]), help="Only files of this format.")
@click.option(
    "--key-field", help="Take keys from this field of the value (dotted: after.id) when there are no .keys files."
)
@click.option(
    "--timestamp-field", help="Take timestamps (epoch ms) from this field of the value; default: the file's time."
)
@click.option(
    "--settle-seconds",
    type=click.IntRange(min=0),
    default=300,
    show_default=True,
    help="Leave files younger than this alone (the sink may still be writing their sidecars).",
)
@click.option(
    "--tombstone-partition", default="tombstone", show_default=True, help="The connector's tombstone.encoded.partition."
)
@click.option(
    "--keep-originals",
    is_flag=True,
    help="Keep the sink's files after adoption (default: gc deletes them file.delete.delay.ms after they are adopted).",
)
@click.option(
    "--deletes",
    type=click.Choice(["tombstone", "keep"]),
    default="tombstone",
    show_default=True,
    help="What a change event that deletes (Debezium's op d) becomes on a compacted topic.",
)
@click.option(
    "--prefer",
    multiple=True,
    help="A file (its key under --from) that changed after adoption or holds offsets with other bytes: take it "
    "as it is now and go on (repeatable).",
)
@click.option("--dry-run", is_flag=True, help="Read what would be adopted and say what would stop; write nothing.")
@pass_ctx
def adopt_connect_command(
    ctx: Context,
    topic: str,
    source: str,
    fmt: str | None,
    key_field: str | None,
    timestamp_field: str | None,
    settle_seconds: int,
    tombstone_partition: str,
    keep_originals: bool,
    deletes: str,
    prefer: tuple[str, ...],
    dry_run: bool,
) -> None:
    """Append what Kafka Connect's S3 sink wrote of a topic since the last run, at the records'
    own offsets (creating the topic when it does not exist). Run it again to pick up new files."""
    from lakecleaner.adopt.connect import adopt_connect
    from lakecleaner.config.adopt import ConnectSource

    spec = ConnectSource(
        source, fmt, key_field, timestamp_field, settle_seconds * 1000, tombstone_partition, keep_originals, deletes
    )
    report = adopt_connect(ctx.lake, topic, spec, dry_run=dry_run, prefer=prefer)

    def human() -> None:
        plan = report.plan
        title = f"{'dry run: would adopt' if dry_run else 'adopted'} {topic} from {source}"
        table = Table("partition", "files", "records", "next offset", "gaps", title=title)
        for partition, bundles in sorted(plan.partitions.items()):
            done = report.partitions.get(partition)
            if done is None:
                table.add_row(str(partition), str(len(bundles)), "–", "–", "–")
            else:
                table.add_row(
                    str(partition), str(done.files), str(done.records), str(done.next_offset), str(len(done.gaps))
                )
        console.print(table)
        console.print(f"files adopted by earlier runs, not read again: {plan.already_adopted}", markup=False)
        for read, other in plan.re_delivered:
            console.print(f"re-delivered: read {read}, not {other}", markup=False)
        for key, how in plan.changed.items():
            console.print(f"changed after it was adopted, read again: {key}: {how}", markup=False)
        for key, why in {**plan.late, **{k: w for a in report.partitions.values() for k, w in a.late.items()}}.items():
            console.print(f"kept, not adopted: {key}: {why}", markup=False)
        for partition, done in sorted(report.partitions.items()):
            if done.late_tombstones or done.superseded_tombstones:
                console.print(
                    f"partition {partition}: late tombstones applied {done.late_tombstones}, "
                    f"superseded by a later record {done.superseded_tombstones}",
                    markup=False,
                )
        for key, why in plan.unsettled.items():
            console.print(f"left for a later run: {key}: {why}", markup=False)
        if report.ignored:
            console.print(f"not sink files of {topic}: {len(report.ignored)} objects", markup=False)
        for partition, why in sorted(report.failures.items()):
            console.print(f"partition {partition} stopped: {why}", markup=False)

    ctx.emit(report.to_dict(), human)
    if report.failures:
        sys.exit(1)

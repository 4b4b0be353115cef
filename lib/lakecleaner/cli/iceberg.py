"""`lakecleaner iceberg`: the topics' Iceberg tables (issue 48): catch them up, and see how to read them."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

import click
from rich.table import Table

from lakecleaner.cli.base import Context, cli, pass_ctx
from lakecleaner.cli.output import console, err_console
from lakecleaner.errors import LakeCleanerError

T = TypeVar("T")


@cli.group()
def iceberg() -> None:
    """Each topic as an Iceberg table whose data files are its segment files (`iceberg:` in the config)."""


def _tabled_topics(ctx: Context, topic: str | None) -> list[str]:
    """`topic` (which must have a table), or every topic of the lake that has one."""
    if topic is not None:
        ctx.lake.topic(topic)
        if not ctx.config.iceberg_enabled(topic):
            raise LakeCleanerError(
                f"topic {topic} has no Iceberg table: set `iceberg: {{enabled: true}}` under topics.{topic} "
                f"(or lake-wide) in {ctx.config.source}"
            )
        return [topic]
    return [name for name in ctx.lake.list_topics() if ctx.config.iceberg_enabled(name)]


def _each_topic(ctx: Context, names: list[str], work: Callable[[str], T]) -> tuple[list[T], dict[str, str]]:
    """`work` for each topic, a damaged table or catalog one topic's failure, in one line
    (`iceberg.damage`): the results, and why each other topic failed."""
    from lakecleaner.iceberg.damage import iceberg_errors

    results: list[T] = []
    failed: dict[str, str] = {}
    for name in names:
        try:
            with iceberg_errors(ctx.lake, name):
                results.append(work(name))
        except LakeCleanerError as exc:
            failed[name] = str(exc)
    return results, failed


@iceberg.command("sync")
@click.option("--topic", help="Only this topic (default: every topic with a table).")
@click.option(
    "--rebuild",
    is_flag=True,
    help="Drop the tables and make them anew from the manifests (a damaged table; the log is not touched).",
)
@pass_ctx
def iceberg_sync(ctx: Context, topic: str | None, rebuild: bool) -> None:
    """Make each table's files the segment files of the committed manifests, each once, in one
    snapshot (none when they already are). Idempotent: what catches a table up after a crash
    between a manifest's commit and the table's. A topic whose tables cannot be synced is one
    line naming the table and the fix; the others are synced, and the command exits 1."""
    from lakecleaner.iceberg.follow import TopicSync, rebuild_tables, sync_topic

    def sync(name: str) -> TopicSync:
        return rebuild_tables(ctx.lake.topic(name)) if rebuild else sync_topic(ctx.lake, name)

    results, failed = _each_topic(ctx, _tabled_topics(ctx, topic), sync)

    def human() -> None:
        for r in results:
            change = (
                f"+{r.log.added} -{r.log.removed} files, snapshot {r.log.snapshot_id}"
                if r.log.snapshot_id
                else "in step"
            )
            latest = "" if r.latest_partitions is None else f"; latest values: {r.latest_partitions} partition(s) moved"
            console.print(f"{r.log.topic} → {r.log.table}: {change}{latest}", markup=False)
        for name, reason in failed.items():
            err_console.print(f"{name}: {reason}", markup=False, highlight=False)
        if not results and not failed:
            console.print("no topic has an Iceberg table (iceberg.enabled in the config)")

    ctx.emit({"topics": [r.to_dict() for r in results], "failed": failed}, human)
    if failed:
        sys.exit(1)


@iceberg.command("compact")
@click.option("--topic", help="Only this topic (default: every topic with a table).")
@pass_ctx
def iceberg_compact(ctx: Context, topic: str | None) -> None:
    """Table maintenance of the latest-values tables now, as each DAG run's gc does it: rewrite a
    partition's data files without the rows its position-delete files hide when they pass their
    thresholds or a hidden row is due for removal (max.compaction.lag.ms), and fold the batches
    appended since into one file. Readers see the same rows; the old files leave after
    file.delete.delay.ms."""
    from lakecleaner.clock import wall_clock_ms
    from lakecleaner.iceberg.maintenance import Rewrite, maintain_latest

    def compact(name: str) -> tuple[str, list[Rewrite]]:
        return name, maintain_latest(ctx.lake.topic(name), wall_clock_ms())

    results, failed = _each_topic(ctx, _tabled_topics(ctx, topic), compact)

    def human() -> None:
        for name, rewrites in results:
            for r in rewrites:
                console.print(
                    f"{name}-{r.partition}: {r.kind} rewrite ({r.reason}): {r.files_removed} files replaced, "
                    f"{r.rows_written} rows and {r.bytes_written} bytes written in {r.seconds} s",
                    markup=False,
                )
            if not rewrites:
                console.print(f"{name}: nothing due", markup=False)
        for name, reason in failed.items():
            err_console.print(f"{name}: {reason}", markup=False, highlight=False)

    payload = {name: [r.to_dict() for r in rewrites] for name, rewrites in results}
    ctx.emit({"topics": payload, "failed": failed}, human)
    if failed:
        sys.exit(1)


@iceberg.command("status")
@click.option("--topic", help="Only this topic (default: every topic with a table).")
@pass_ctx
def iceberg_status(ctx: Context, topic: str | None) -> None:
    """Per topic: its tables, the catalog properties a reader passes to pyiceberg's load_catalog
    and the configuration Spark takes (secrets masked), the current snapshot, and whether the
    table matches the manifests."""
    from lakecleaner.iceberg.table_status import table_status

    statuses, failed = _each_topic(ctx, _tabled_topics(ctx, topic), lambda name: table_status(ctx.lake, name))

    def human() -> None:
        table = Table("topic", "tables", "snapshot", "in step", title="Iceberg tables")
        for s in statuses:
            if s.in_step:
                step = "yes"
            elif s.not_made:
                step = f"no: {', '.join(s.not_made)} not made yet (the next DAG run or iceberg sync makes it)"
            else:
                step = (
                    f"no: {s.missing} files to add, {s.extra} to remove, {s.duplicate} registered twice "
                    "(run iceberg sync)"
                )
            table.add_row(s.topic, ", ".join(s.tables), str(s.snapshot_id or "–"), step)
        for name in failed:
            table.add_row(name, "–", "–", "unreadable (below)")
        console.print(table)
        for name, reason in failed.items():
            console.print(f"{name}: {reason}", markup=False, highlight=False, soft_wrap=True)
        for s in statuses:
            if s.latest_files is not None:
                f = s.latest_files
                console.print(
                    f"{s.topic} latest values: {f.data_files} data files, {f.delete_files} delete files hiding "
                    f"{f.dead_rows} rows (iceberg compact rewrites them)",
                    markup=False,
                )
        if statuses:
            console.print("catalog (pyiceberg's load_catalog(name, **properties)):")
            for key, value in statuses[0].catalog.items():
                console.print(f"  {key}: {value}", markup=False, soft_wrap=True)
            spark = statuses[0].spark
            if "error" in spark:
                console.print(f"Spark: {spark['error']}", markup=False)
            else:
                packages = ",".join(spark["packages"])
                console.print(f"Spark (Iceberg's runtime, for Spark 4.1): --packages {packages}", soft_wrap=True)
                for key, value in spark["conf"].items():
                    console.print(f"  --conf {key}={value}", markup=False, soft_wrap=True)

    ctx.emit({"topics": [s.to_dict() for s in statuses], "failed": failed}, human)
    if failed or any(not s.in_step for s in statuses):
        sys.exit(1)

"""`lakecleaner plan`, `compact`, `retain`, `trim` and `gc`: Kafka's cleaner and retention, run by hand."""

from __future__ import annotations

import sys

import click
from rich.table import Table

from lakecleaner.cli.base import (
    NOW_HELP,
    Context,
    cli,
    exit_on_failures,
    parse_now,
    partitions_or_all,
    pass_ctx,
    unreadable_lines,
)
from lakecleaner.cli.output import console, format_bytes
from lakecleaner.summaries.refresh import refresh_after_change


@cli.command()
@click.option("--topic")
@click.option("--all", "whole_lake", is_flag=True, help="Every topic of the lake, a line each, from their summaries.")
@click.option("--now", "now_text", help=NOW_HELP)
@click.option("--partition", "partitions", type=int, multiple=True, help="Only these partitions.")
@click.option("--force", is_flag=True, help="Select every partition with cleanable bytes, ignoring the ratio.")
@click.option("--max-partitions", type=int, help="Compact at most this many partitions per run.")
@click.option("--wide", is_flag=True, help="Every column: also the clean and not-yet-cleanable bytes and the delay.")
@pass_ctx
def plan(
    ctx: Context,
    topic: str | None,
    whole_lake: bool,
    now_text: str | None,
    partitions: tuple[int, ...],
    force: bool,
    max_partitions: int | None,
    wide: bool,
) -> None:
    """Show what would be rolled, compacted and deleted, and why. Changes nothing.

    F: the first dirty offset (Kafka's firstDirtyOffset: the cleaner checkpoint, or the log start
    when it is further). U: the first uncleanable offset (firstUncleanableOffset: the active
    segment's base, or the first segment younger than min.compaction.lag.ms). The cleanable
    section is [F, U); ratio: its dirty bytes over the log's.

    --all: a line per topic of the lake instead, from each topic's summary where it is current
    (as planned then) and from its manifests where it is not.
    """
    from lakecleaner.policy import plan_topic
    from lakecleaner.policy.render import render_topic_plan

    now = parse_now(now_text)
    if whole_lake:
        _refuse_with_all(topic, partitions, force, max_partitions, wide)
        from lakecleaner.cli.lake_plan import show_lake_plan

        show_lake_plan(ctx, now)
        return
    if topic is None:
        raise click.UsageError("give --topic NAME, or --all for every topic")
    t = ctx.lake.topic(topic)
    read = t.read_manifests(partitions_or_all(partitions))
    manifests = read.manifests
    consumed = (
        ctx.lake.offsets.consumed_positions(topic, sorted(manifests)) if t.config.consumed_retention_enabled else {}
    )
    cleaner = ctx.lake.cleaner_state.read(topic)
    result = plan_topic(
        topic, manifests, t.config, consumed, now, force=force, max_partitions=max_partitions, cleaner=cleaner
    )
    source = ctx.lake.offsets.source_of(topic) if t.config.consumed_retention_enabled else None

    def human() -> None:
        console.print(render_topic_plan(result, wide=wide))
        if source is not None:
            console.print(f"consumed retention reads committed offsets from {source}", markup=False)

    ctx.emit(
        {**result.to_dict(), "unreadable": {str(p): e for p, e in read.failures.items()}, "offsets_source": source},
        human,
    )
    exit_on_failures(unreadable_lines(topic, read.failures))


def _refuse_with_all(
    topic: str | None, partitions: tuple[int, ...], force: bool, max_partitions: int | None, wide: bool
) -> None:
    """`plan --all` shows each topic's summary as planned: the options that plan one topic anew do not apply."""
    options: dict[str, object] = {"--topic": topic, "--partition": partitions, "--force": force}
    options |= {"--max-partitions": max_partitions, "--wide": wide}
    given = [name for name, value in options.items() if value]
    if given:
        raise click.UsageError(f"--all shows every topic as its summary planned it: drop {', '.join(given)}")


@cli.command()
@click.option("--topic", required=True)
@click.option("--now", "now_text", help=NOW_HELP)
@click.option("--partitions", "partition_list", default="", help="Comma-separated partitions (default: the due ones).")
@click.option("--force", is_flag=True, help="Compact every partition with cleanable bytes, ignoring the ratio.")
@click.option("--master", help="Spark master (default: the config's spark.master).")
@click.option("--remote", help="Spark Connect server, sc://host:port (default: the config's spark.remote).")
@pass_ctx
def compact(
    ctx: Context,
    topic: str,
    now_text: str | None,
    partition_list: str,
    force: bool,
    master: str | None,
    remote: str | None,
) -> None:
    """Compact a topic's due partitions on Spark (one application), as the DAG's compact task does."""
    from lakecleaner.engine import EngineOptions, compact_topic, print_report, requests_for
    from lakecleaner.engine.session import build_session
    from lakecleaner.policy import plan_topic

    now = parse_now(now_text)
    t = ctx.lake.topic(topic)
    chosen = [int(p) for p in partition_list.split(",") if p.strip()] or None
    read = t.read_manifests(chosen)
    cleaner = ctx.lake.cleaner_state.read(topic)
    plan_result = plan_topic(topic, read.manifests, t.config, {}, now, force=force, cleaner=cleaner)
    selected = plan_result.selection.selected
    requests = [r for p in selected if (r := requests_for(read.manifests[p], t.config, now))]
    unreadable = unreadable_lines(topic, read.failures)
    if not requests:
        ctx.emit({"topic": topic, "partitions": []}, lambda: console.print(f"{topic}: no partition is due"))
        exit_on_failures(unreadable)
        return
    spark = build_session(ctx.config.spark, f"lakecleaner-{topic}", master, remote)
    try:
        report = compact_topic(spark, ctx.lake, topic, requests, now, options=EngineOptions.of(ctx.config.cleaner))
    finally:
        spark.stop()
    refresh_after_change(ctx.lake, topic)
    ctx.emit({**report.to_dict(), "location": report.location}, lambda: print_report(report, console))
    failed = [(f"{topic}-{p.partition}", p.message) for p in report.partitions if p.failed]
    exit_on_failures([*unreadable, *failed])


@cli.command()
@click.option("--topic", required=True)
@click.option("--now", "now_text", help=NOW_HELP)
@click.option("--partition", "partitions", type=int, multiple=True, help="Only these partitions.")
@click.option("--dry-run", is_flag=True, help="Plan only: nothing is checked or committed.")
@pass_ctx
def retain(ctx: Context, topic: str, now_text: str | None, partitions: tuple[int, ...], dry_run: bool) -> None:
    """Apply time, size and consumed retention (KIP-68) to a topic."""
    from lakecleaner.retention import retain_topic

    chosen = partitions_or_all(partitions)
    report = retain_topic(ctx.lake, topic, parse_now(now_text), partitions=chosen, dry_run=dry_run)
    data = {**report.to_dict(), "location": report.location}

    def human() -> None:
        title = (
            f"DRY RUN: retention of {topic} would do this (nothing was deleted or committed)"
            if dry_run
            else f"retention of {topic}"
        )
        deleted = "would delete (rule: segments)" if dry_run else "deleted (rule: segments)"
        table = Table("part", "status", deleted, "bytes", "new log start", "held back by", title=title)
        for p in data["partitions"]:
            rules = ", ".join(f"{r}: {v['segments']}" for r, v in p["deleted_by_rule"].items()) or "-"
            deleted = sum(v["bytes"] for v in p["deleted_by_rule"].values())
            table.add_row(
                str(p["partition"]),
                p["status"],
                rules,
                format_bytes(deleted),
                str(p["new_log_start_offset"]),
                ", ".join(p["held_back_by"]) or "-",
            )
        console.print(table)
        for p in data["partitions"]:
            if p["error"]:
                console.print(f"partition {p['partition']}: {p['error']}", markup=False)
            if p["consumers_below_log_start"]:
                console.print(
                    f"partition {p['partition']}: groups below the new log start will reset: "
                    f"{p['consumers_below_log_start']}",
                    markup=False,
                )
        if report.offsets_source:
            console.print(f"consumed retention read committed offsets from {report.offsets_source}", markup=False)
        if report.location:
            console.print(f"report: {report.location}", markup=False)

    ctx.emit(data, human)
    if not report.success:
        sys.exit(1)


@cli.command()
@click.option("--topic", required=True)
@click.option("--partition", type=int, required=True)
@click.option("--offset", type=int, required=True, help="New log start offset: records below it are deleted.")
@pass_ctx
def trim(ctx: Context, topic: str, partition: int, offset: int) -> None:
    """Kafka's DeleteRecords: move a partition's log start offset forward."""
    from lakecleaner.retention import trim_partition

    manifest = trim_partition(ctx.lake, topic, partition, offset)
    ctx.emit(
        {"log_start_offset": manifest.log_start_offset, "version": manifest.version},
        lambda: console.print(f"{topic}-{partition}: log start offset is now {manifest.log_start_offset}"),
    )


@cli.command()
@click.option("--topic", required=True)
@click.option("--now", "now_text", help=NOW_HELP)
@click.option("--partition", "partitions", type=int, multiple=True, help="Only these partitions.")
@click.option("--dry-run", is_flag=True, help="List what would be deleted, and why; delete nothing.")
@pass_ctx
def gc(ctx: Context, topic: str, now_text: str | None, partitions: tuple[int, ...], dry_run: bool) -> None:
    """Physically delete files whose file.delete.delay.ms has passed, and old orphan files.

    Exits with status 1 when any partition failed (one line each on stderr), or while the topic's
    deletions are blocked (its Iceberg tables cannot be read: the line says which and the fix);
    the others proceed."""
    from lakecleaner.retention import gc_topic

    report = gc_topic(ctx.lake, topic, parse_now(now_text), partitions=partitions_or_all(partitions), dry_run=dry_run)

    def human() -> None:
        verb = "would delete" if dry_run else "deleted"
        for p in report.partitions:
            for path in p.deleted_pending:
                console.print(f"{topic}-{p.partition}: {verb} {path} (left the log, delay passed)", markup=False)
            for path in p.deleted_orphans:
                console.print(f"{topic}-{p.partition}: {verb} {path} (orphan: no manifest references it)", markup=False)
            for path in p.discarded_unfinished:
                what = "would discard" if dry_run else "discarded"
                console.print(
                    f"{topic}-{p.partition}: {what} an unfinished write of {path} (its writer crashed)", markup=False
                )
            if p.orphans_kept:
                console.print(f"{topic}-{p.partition}: orphans kept: {p.orphans_kept}", markup=False)
        if report.run_reports_pruned:
            pruned = "would prune" if dry_run else "pruned"
            console.print(f"{topic}: {pruned} the reports of {report.run_reports_pruned} old run(s)", markup=False)
        for warning in report.warnings:
            console.print(f"{topic}: warning: {warning}", markup=False)
        stored = f"; report: {report.location}" if report.location else ""
        console.print(f"{topic}: {verb} {report.files_deleted} file(s){stored}", markup=False)

    ctx.emit({**report.to_dict(), "location": report.location}, human)
    blocked = [(topic, report.blocked)] if report.blocked else []
    exit_on_failures([*blocked, *((f"{topic}-{p.partition}", p.error) for p in report.failed)])

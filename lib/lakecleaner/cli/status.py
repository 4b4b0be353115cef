"""`lakecleaner status`, `roll` and `repair`: what each partition holds, and mending it."""

from __future__ import annotations

import sys
from dataclasses import asdict
from typing import Any

import click
from rich.table import Table

from lakecleaner.cli.base import Context, cli, exit_on_unreadable, pass_ctx
from lakecleaner.cli.output import console, err_console, format_age, format_bytes
from lakecleaner.clock import wall_clock_ms
from lakecleaner.errors import LakeCleanerError
from lakecleaner.lake import failure_runs, partitions_label
from lakecleaner.log.repair import RepairAmbiguous, repair_partition
from lakecleaner.policy.text import format_timestamp_ms
from lakecleaner.summaries.partition_status import partition_status
from lakecleaner.summaries.read import TopicFacts
from lakecleaner.summaries.refresh import summary_store


def source_note(facts: TopicFacts) -> str:
    """Where a topic's rows come from, in words: its summary as of when, and the partitions read
    from their manifests (and why), or the manifests alone."""
    if facts.planned_at_ms is None:
        return f"from the manifests ({facts.why})" if facts.why else "from the manifests"
    note = f"from the topic's summary of {format_timestamp_ms(facts.planned_at_ms)}"
    if facts.from_manifests:
        count = len(facts.from_manifests)
        note += f"; {count} {'partition' if count == 1 else 'partitions'} from the manifests ({facts.why})"
    return note


@cli.command()
@click.option("--topic", "names", multiple=True, help="Topics to show (default: all).")
@pass_ctx
def status(ctx: Context, names: tuple[str, ...]) -> None:
    """A table per topic: segments, records, bytes (and those deletion vectors remove), offsets,
    checkpoint and active segment age."""
    show_status(ctx, list(names) or ctx.lake.list_topics())


def show_status(ctx: Context, names: list[str]) -> None:
    """Each topic's partitions, from the topic's summary where it is current and from the manifests
    where it is not (`summaries.facts.load_facts`, issue 50; each row says which); a partition that
    cannot be read is a FAILED row with the reason, and a topic whose topic.json cannot be read one
    line; the others are shown, and the command exits 1 at the end. A topic named that the lake
    does not hold is an error (exit 2)."""
    from lakecleaner.summaries.facts import load_facts

    now = wall_clock_ms()
    loaded = load_facts(ctx.lake, names, now)
    unopened = {name: facts for name, facts in loaded.items() if isinstance(facts, str)}
    if unopened:
        present = set(ctx.lake.list_topics())
        missing = [n for n in names if n in unopened and n not in present]
        if missing:
            raise LakeCleanerError(unopened[missing[0]])
    result: dict[str, list[dict[str, Any]]] = {}
    failed: dict[str, dict[int, str]] = {}
    notes: dict[str, str] = {}
    for name, facts in loaded.items():
        if isinstance(facts, str):
            continue
        fresh = set(facts.from_manifests)
        result[name] = [
            asdict(partition_status(entry, now, p not in fresh)) for p, entry in sorted(facts.partitions.items())
        ]
        failed[name] = dict(facts.unreadable)
        notes[name] = source_note(facts)

    def human() -> None:
        for name, rows in result.items():
            table = Table(title=f"topic {name}")
            for col in ("part", "segs", "records", "bytes", "dead", "log start", "next", "checkpoint", "active age"):
                table.add_column(col, justify="right")
            table.add_column("uncleanable")
            for r in rows:
                table.add_row(
                    str(r["partition"]),
                    str(r["segments"]),
                    f"{r['records']:,}",
                    format_bytes(r["bytes"]),
                    format_bytes(r["dead_bytes"]),
                    str(r["log_start_offset"]),
                    str(r["next_offset"]),
                    "-" if r["cleaner_checkpoint"] is None else str(r["cleaner_checkpoint"]),
                    format_age(r["active_segment_age_ms"]),
                    r["uncleanable"] or "",
                )
            for first, last, _ in failure_runs(failed[name]):
                table.add_row(partitions_label(first, last), "FAILED", *[""] * 8)
            table.caption = notes[name]
            console.print(table)
        if not result and not unopened:
            console.print("no topics in the lake")

    as_json: dict[str, list[dict[str, Any]]] = {
        name: rows + [{"partition": p, "error": e} for p, e in failed[name].items()] for name, rows in result.items()
    }
    as_json.update({name: [{"partition": None, "error": reason}] for name, reason in unopened.items()})
    ctx.emit(as_json, human)
    exit_on_unreadable(unopened, failed)


@cli.command()
@click.option("--topic", required=True)
@click.option("--partition", type=int, required=True)
@pass_ctx
def roll(ctx: Context, topic: str, partition: int) -> None:
    """Seal the active segment of a partition."""
    manifest = ctx.lake.topic(topic).partition(partition).roll()
    ctx.emit({"version": manifest.version}, lambda: console.print(f"rolled {topic}-{partition}"))


@cli.command()
@click.option("--topic", required=True)
@click.option("--partition", "partitions", type=int, multiple=True, help="Partitions to repair (default: all).")
@click.option("--force", is_flag=True, help="Rebuild even a readable manifest.")
@click.option("--log-start-offset", type=int, help="Log start offset to restore (after a trim or retention).")
@click.option(
    "--prefer",
    "prefer",
    multiple=True,
    metavar="FILE",
    help="A segment file (as a refused repair names it) that wins over any file covering the same offsets.",
)
@pass_ctx
def repair(
    ctx: Context,
    topic: str,
    partitions: tuple[int, ...],
    force: bool,
    log_start_offset: int | None,
    prefer: tuple[str, ...],
) -> None:
    """Rebuild a missing or damaged topic.json and partition manifests from what storage holds.

    Between files that cover the same offsets, repair keeps the one a commit acknowledged; where
    nothing tells them apart it changes nothing for that partition, names the files, and waits for
    --prefer. Exits 1 when a partition could not be repaired."""
    rebuilt = ctx.lake.repair_metadata(topic)
    t = ctx.lake.topic(topic)
    reports: list[dict[str, object]] = []
    refused: dict[int, str] = {}
    summaries = summary_store(ctx.lake)
    for p in partitions or range(t.partitions):
        log = t.partition(p)
        state = "ok"
        try:
            log.load()
        except LakeCleanerError as exc:
            state = str(exc)
        if state == "ok" and not force and not partitions:
            continue
        try:
            report = repair_partition(
                ctx.lake.store,
                topic,
                p,
                t.config,
                force=force,
                log_start_offset=log_start_offset,
                prefer=prefer,
                max_workers=ctx.lake.config.storage.max_concurrency,
                announced_version=summaries.announced_version(topic, p),
            )
        except RepairAmbiguous as exc:
            refused[p] = str(exc)
            continue
        reports.append({**report.to_dict(), "left_out_count": len(report.left_out)})
    if reports and ctx.config.iceberg_enabled(topic):  # a repair writes manifests directly: catch the table up
        from lakecleaner.iceberg.follow import sync_topic

        sync_topic(ctx.lake, topic)

    def human() -> None:
        if rebuilt is not None:
            kept = "its config overrides kept" if rebuilt.overrides_kept else "no config overrides could be kept"
            console.print(
                f"rebuilt the {rebuilt.previous_state} topic.json of {topic}: "
                f"{rebuilt.metadata.partitions} partition(s), {kept}"
            )
        if not reports and not refused:
            console.print(f"every manifest of {topic} is readable; nothing to repair")
        for r in reports:
            console.print(
                f"repaired {topic}-{r['partition']}: {r['segments']} segments, {r['records']} records, "
                f"offsets [{r['log_start_offset']}, {r['next_offset']}), {r['left_out_count']} file(s) left out"
            )
        for message in refused.values():
            err_console.print(f"[red]error:[/red] {message}")

    ctx.emit(
        {
            "topic_metadata": None if rebuilt is None else rebuilt.to_dict(),
            "partitions": reports,
            "refused": {str(p): m for p, m in refused.items()},
        },
        human,
    )
    if refused:
        sys.exit(1)

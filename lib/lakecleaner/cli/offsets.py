"""`lakecleaner offsets`: consumer groups' committed offsets."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import click
from rich.table import Table

from lakecleaner.cli.base import Context, cli, exit_on_failures, pass_ctx
from lakecleaner.cli.output import console
from lakecleaner.io.kafka.committed import CommittedOffset
from lakecleaner.offsets import GroupOffsets


@cli.group()
def offsets() -> None:
    """Consumer groups' committed offsets."""


@offsets.command("commit")
@click.option("--group", required=True)
@click.option("--topic", required=True)
@click.argument("assignments", nargs=-1, required=True)
@pass_ctx
def offsets_commit(ctx: Context, group: str, topic: str, assignments: tuple[str, ...]) -> None:
    """Commit PARTITION=OFFSET pairs (the next offset to consume) for GROUP on TOPIC."""
    parsed: dict[int, int] = {}
    for a in assignments:
        p, sep, o = a.partition("=")
        if not sep or not p.strip().isdigit() or not o.strip().isdigit():
            raise click.BadParameter(f"{a!r} is not PARTITION=OFFSET (e.g. 0=1500)")
        parsed[int(p)] = int(o)
    topic_obj = ctx.lake.topic(topic)
    for part in parsed:
        topic_obj.partition(part)
    ctx.lake.offsets.commit(group, topic, parsed)
    ctx.emit(
        {"group": group, "topic": topic, "offsets": parsed},
        lambda: console.print(f"committed {group} {topic} {parsed}"),
    )


def _in_lake(offsets: Mapping[int, CommittedOffset], delta: int) -> dict[int, CommittedOffset]:
    """A group's offsets of the Kafka topic a lake topic mirrors, as lake offsets."""
    return {p: replace(c, offset=c.offset + delta) for p, c in offsets.items()}


@offsets.command("list")
@click.option("--group", help="Only this group.")
@click.option("--topic", help="Only this topic, with the minimum committed offset per partition.")
@pass_ctx
def offsets_list(ctx: Context, group: str | None, topic: str | None) -> None:
    """List committed offsets per group, topic and partition: from the lake's own store, or, for a
    topic whose config says `consumer_offsets: {cluster: …}`, from that Kafka cluster, of the Kafka
    topic it mirrors (as lake offsets)."""
    rows = []
    cluster = ctx.lake.offsets.offsets_cluster(topic) if topic else None
    source = ctx.lake.offsets.source_of(topic)
    reads: dict[str, GroupOffsets | str]
    if topic and cluster:
        declared = [g for g in ctx.config.topics[topic].consumer_groups if not group or g == group]
        found = ctx.lake.offsets.cluster_offsets(topic, list(range(ctx.lake.topic(topic).partitions)), declared)
        reads = {g: GroupOffsets(g, {topic: _in_lake(o, found.offset_delta)}) for g, o in found.offsets.items()}
        reads.update(found.failures)
    else:
        reads = {group: ctx.lake.offsets.read_group(group)} if group else ctx.lake.offsets.read_all_groups()
    unreadable = {g: r for g, r in reads.items() if isinstance(r, str)}
    for g, read in reads.items():
        if isinstance(read, str):
            continue
        for t, parts in read.topics.items():
            if topic and t != topic:
                continue
            for p, c in sorted(parts.items()):
                rows.append({"group": g, "topic": t, "partition": p, "offset": c.offset, "commit_ms": c.commit_ms})
    minimum = {}
    if topic:
        t_obj = ctx.lake.topic(topic)
        for p, pos in ctx.lake.offsets.consumed_positions(topic, list(range(t_obj.partitions))).items():
            minimum[p] = {"offset": pos.offset, "reason": pos.reason}

    def human() -> None:
        table = Table("group", "topic", "partition", "committed offset", title=f"committed offsets in {source}")
        for r in rows:
            table.add_row(str(r["group"]), str(r["topic"]), str(r["partition"]), str(r["offset"]))
        console.print(table)
        for p, m in minimum.items():
            shown = m["offset"] if m["offset"] is not None else f"unknown ({m['reason']})"
            console.print(f"{topic}-{p}: minimum committed offset {shown}")

    ctx.emit({"source": source, "offsets": rows, "minimum": minimum}, human)
    exit_on_failures([(f"group {g}", reason) for g, reason in unreadable.items()])

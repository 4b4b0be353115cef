"""`lakecleaner audit`: where a key's records still are, what a topic holds past its deadlines, and
the lake's deletion deadlines."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, BinaryIO

import click
from rich.table import Table

from lakecleaner.cli.base import NOW_HELP, Context, cli, decode_base64, exit_on_unreadable, parse_now, pass_ctx
from lakecleaner.cli.output import console
from lakecleaner.policy.erasure import HIDDEN
from lakecleaner.policy.text import format_timestamp_ms

if TYPE_CHECKING:
    from lakecleaner.audit import KeyCopy


@cli.group()
def audit() -> None:
    """Prove erasure: where a key's records are still stored, and by when each copy is gone."""


def kind_words(copy: KeyCopy) -> str:
    """A copy's kind as the table shows it: a hidden copy (a deletion vector's or a position-delete
    file's, issue 79) says until when it is physically present."""
    if copy.kind != HIDDEN:
        return copy.kind
    gone_by = None if copy.deadline is None else copy.deadline.gone_by_ms
    until = "no deadline" if gone_by is None else format_timestamp_ms(gone_by)
    return f"hidden: logically deleted, physically present until {until}"


@audit.command("key")
@click.option("--topic", required=True)
@click.option("--key", "text_key", help="The key, as UTF-8 text.")
@click.option("--key-base64", "base64_key", help="The key's bytes, base64-encoded.")
@click.option(
    "--key-file",
    "key_file",
    type=click.File("rb"),
    help="A file holding the key's bytes exactly (no trailing newline is removed); - reads standard input.",
)
@click.option("--now", "now_text", help=NOW_HELP)
@pass_ctx
def audit_key_command(
    ctx: Context,
    topic: str,
    text_key: str | None,
    base64_key: str | None,
    key_file: BinaryIO | None,
    now_text: str | None,
) -> None:
    """Every stored copy of a key (live segments, files awaiting deletion, abandoned run outputs,
    spills, the lake's own files) with the time by which it is physically gone. Exits 1 when a copy
    is overdue or an object could not be read, so it can gate a compliance job."""
    from lakecleaner.audit import audit_key

    if sum(given is not None for given in (text_key, base64_key, key_file)) != 1:
        raise click.UsageError("give the key once: --key TEXT, --key-base64 B64 or --key-file PATH (- for stdin)")
    if key_file is not None:
        key = key_file.read()
    else:
        key = text_key.encode() if text_key is not None else decode_base64(str(base64_key), "--key-base64")
    result = audit_key(ctx.lake, topic, key, parse_now(now_text))

    def human() -> None:
        table = Table("partition", "object", "offset", "kind", "gone by", "overdue")
        for c in result.copies:
            d = c.deadline
            table.add_row(
                "-" if c.partition is None else str(c.partition),
                c.object,
                "-" if c.offset is None else str(c.offset),
                kind_words(c),
                "-" if d is None or d.gone_by_ms is None else format_timestamp_ms(d.gone_by_ms),
                "" if d is None or d.overdue is None else d.overdue,
            )
        console.print(table if result.copies else f"{topic}: no stored copy of the key")
        for name, reason in result.unreadable.items():
            console.print(f"[red]could not read {name}: {reason}[/red]")
        console.print("[red]OVERDUE[/red]" if result.overdue else "nothing is overdue")

    ctx.emit(result.to_dict(), human)
    if result.overdue:
        sys.exit(1)


@audit.command("topic")
@click.option("--topic", required=True)
@click.option("--now", "now_text", help=NOW_HELP)
@pass_ctx
def audit_topic_command(ctx: Context, topic: str, now_text: str | None) -> None:
    """Per partition, the earliest deadline by which data it still stores must be gone (dirty
    records, tombstones, files awaiting deletion, unreferenced files). Exits 1 when one is overdue."""
    from lakecleaner.audit import audit_topic

    partitions = audit_topic(ctx.lake, topic, parse_now(now_text))

    def human() -> None:
        table = Table("partition", "awaiting deletion", "unreferenced", "earliest", "gone by", "overdue")
        for p in partitions:
            d = p.deadline
            table.add_row(
                str(p.partition),
                str(p.pending_files),
                f"{p.unreferenced_files} + {p.unfinished_writes} unfinished"
                if p.unfinished_writes
                else str(p.unreferenced_files),
                p.error or p.what or "-",
                "-" if d is None or d.gone_by_ms is None else format_timestamp_ms(d.gone_by_ms),
                "" if d is None or d.overdue is None else d.overdue,
            )
        console.print(table)

    ctx.emit({"topic": topic, "partitions": [p.to_dict() for p in partitions]}, human)
    if any(p.overdue for p in partitions):
        sys.exit(1)


@audit.command("lake")
@click.option(
    "--within",
    "within_hours",
    type=click.IntRange(min=0),
    help="Only the deadlines due within this many hours (the overdue always). Default: every one.",
)
@click.option("--now", "now_text", help=NOW_HELP)
@pass_ctx
def audit_lake_command(ctx: Context, within_hours: int | None, now_text: str | None) -> None:
    """Every compacted partition of the lake by its deletion deadline, soonest first (KIP-354's
    max.compaction.lag.ms, KIP-534's tombstone horizon), from the topics' summaries where they are
    current and their manifests where they are not. Files awaiting deletion are counted (`audit
    topic` gives their times and finds unreferenced objects). Exits 1 when a deadline has passed
    or a topic or partition cannot be read."""
    from lakecleaner.summaries.deadlines import ErasureOverview
    from lakecleaner.summaries.facts import load_facts

    now = parse_now(now_text)
    overview = ErasureOverview.of(load_facts(ctx.lake, ctx.lake.list_topics(), now), now, within_hours)

    def human() -> None:
        table = Table("topic", "part", "deadline", "in", "rule", "awaiting deletion", "from")
        for d in overview.deadlines:
            left = d.deadline.seconds_left
            table.add_row(
                d.topic,
                str(d.partition),
                format_timestamp_ms(d.deadline.deadline_ms),
                f"OVERDUE by {_hours_minutes(-left)}" if d.overdue else _hours_minutes(left),
                d.rule,
                str(d.pending_deletes or "-"),
                "summary" if d.from_summary else "manifest",
            )
        within = "" if within_hours is None else " within it"
        console.print(table if overview.deadlines else "no deletion deadline" + within)
        if overview.pending_deletes:
            files = ", ".join(f"{topic} {n}" for topic, n in sorted(overview.pending_deletes.items()))
            console.print(f"files awaiting deletion (their times: `audit topic`): {files}")
        console.print("[red]OVERDUE[/red]" if overview.overdue else "nothing is overdue")

    ctx.emit(
        {
            "now_ms": now,
            "within_ms": overview.within_ms,
            "deadlines": [d.to_dict() for d in overview.deadlines],
            **overview.beside_deadlines(),
        },
        human,
    )
    exit_on_unreadable(overview.unreadable_topics, overview.unreadable_partitions)
    if overview.overdue:
        sys.exit(1)


def _hours_minutes(seconds: int) -> str:
    """`26h05m`: whole hours and minutes."""
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"

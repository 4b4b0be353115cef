"""`lakecleaner summaries`: the per-topic summaries the lake-wide views read (issue 50)."""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from lakecleaner.cli.base import NOW_HELP, Context, cli, parse_now, pass_ctx
from lakecleaner.cli.output import console
from lakecleaner.policy.text import format_timestamp_ms
from lakecleaner.summaries.refresh import refresh_summary


@cli.group()
def summaries() -> None:
    """Per-topic summaries: what the dashboard's overview reads instead of every manifest. Each DAG
    run refreshes its topic's; a commit leaves a marker, so a view never trusts a stale one."""


@summaries.command("refresh")
@click.option("--topic", "topics", multiple=True, help="Only these topics (default: every topic in the lake).")
@click.option("--now", "now_text", help=NOW_HELP)
@pass_ctx
def summaries_refresh(ctx: Context, topics: tuple[str, ...], now_text: str | None) -> None:
    """Rebuild topics' summaries from their manifests and clear the markers they now cover."""
    now_ms = parse_now(now_text)
    names = list(topics) or ctx.lake.list_topics()
    rows: list[dict[str, Any]] = []
    for name in names:
        refreshed = refresh_summary(ctx.lake, name, now_ms)
        summary = refreshed.summary
        rows.append(
            {
                "topic": name,
                "written": refreshed.written,
                "planned_at_ms": summary.planned_at_ms,
                "partitions": len(summary.partitions),
                "unreadable": len(summary.unreadable),
                "markers_deleted": refreshed.markers_deleted,
            }
        )

    def human() -> None:
        table = Table("topic", "summary", "planned at", "partitions", "unreadable", "markers cleared")
        for r in rows:
            table.add_row(
                r["topic"],
                "written" if r["written"] else "kept (newer)",
                format_timestamp_ms(r["planned_at_ms"]),
                str(r["partitions"]),
                str(r["unreadable"]),
                str(r["markers_deleted"]),
            )
        console.print(table if rows else "no topic in the lake")

    ctx.emit({"summaries": rows}, human)

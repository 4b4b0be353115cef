"""How the CLI prints: the consoles, sizes and ages for people, and the progress bar (silent with --json)."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

console = Console(width=None if sys.stdout.isatty() else 200)
err_console = Console(stderr=True, soft_wrap=True)  # paths and messages stay on one line


def format_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def format_age(ms: int | None) -> str:
    if ms is None:
        return "-"
    seconds = ms // 1000
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


class progress_bar:
    """A rich progress bar on stderr (silent with --json)."""

    def __init__(self, *, quiet: bool, label: str, total: int) -> None:
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=err_console,
            disable=quiet,
        )
        self.label, self.total = label, total

    def __enter__(self) -> tuple[Progress, Any]:
        self.progress.start()
        return self.progress, self.progress.add_task(self.label, total=self.total)

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

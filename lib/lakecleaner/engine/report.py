"""Run reports: per partition and in total, as JSON under `_lakecleaner/runs/<topic>/<run id>/`
and as a rich table.

The counters follow Kafka's CleanerStats (kafka-cleaner-semantics.md section 1.13):
records and bytes read are those of the cleaned range [log start, U) — Kafka recopies the whole
range — and records and bytes written are what the range holds after the pass, counting a group
that kept its files (★ no rewrite) as written unchanged. `bytes_rewritten` is what was
physically written (new files, and deletion vectors of kept ones). `recopy_percent` =
floor(100 × bytes written / max(bytes read, 1)), Kafka's cleaner-recopy-percent.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from lakecleaner.io import ObjectStore
from lakecleaner.runs.reports import store_report

if TYPE_CHECKING:
    from lakecleaner.quality import QualityReport

REPORT_NAME = "report"

COMMITTED = "committed"
ABORTED = "aborted"
FAILED_QUALITY = "failed-quality"
UNCLEANABLE = "uncleanable"
NOTHING_TO_DO = "nothing-to-do"
FAILED = "failed"
#: Statuses that make the job fail (aborted is a lost race: the next run retries).
FAILURES = frozenset({FAILED_QUALITY, UNCLEANABLE, FAILED})
#: The failures that mark a partition uncleanable in the cleaner state (its data failed it).
MARKED_UNCLEANABLE = frozenset({FAILED_QUALITY, UNCLEANABLE})


@dataclass
class CleanerStats:
    """What a pass did (summable over partitions)."""

    records_read: int = 0
    bytes_read: int = 0
    records_written: int = 0
    bytes_written: int = 0
    bytes_rewritten: int = 0
    records_superseded: int = 0
    unkeyed_dropped: int = 0
    below_log_start_dropped: int = 0
    tombstones_stamped: int = 0
    tombstones_removed: int = 0
    malformed_version_headers: int = 0
    groups_rewritten: int = 0
    groups_unchanged: int = 0
    #: Groups whose lost records a deletion vector removed, their files kept (issue 79).
    groups_vectored: int = 0

    @property
    def recopy_percent(self) -> int:
        return 100 * self.bytes_written // max(self.bytes_read, 1)

    def add(self, other: CleanerStats) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "recopy_percent": self.recopy_percent}


@dataclass
class PartitionReport:
    """One partition's outcome."""

    partition: int
    status: str
    message: str = ""
    first_dirty_offset: int | None = None
    first_uncleanable_offset: int | None = None
    manifest_version_before: int | None = None
    manifest_version_after: int | None = None
    stats: CleanerStats = field(default_factory=CleanerStats)
    quality: QualityReport | None = None
    files_written: list[str] = field(default_factory=list)
    duration_ms: int = 0
    #: Pass 1's key buckets (a task each, within log.cleaner.dedupe.buffer.size) and the largest
    #: offset map one of them held, in bytes.
    key_buckets: int = 0
    max_map_bytes: int = 0
    #: Segments the commit took out of the log, and the cleaned segments it put in their place.
    segments_replaced: int = 0
    segments_written: int = 0

    @property
    def failed(self) -> bool:
        return self.status in FAILURES

    def to_dict(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "status": self.status,
            "message": self.message,
            "error": self.message if self.failed or self.status == ABORTED else None,
            "first_dirty_offset": self.first_dirty_offset,
            "first_uncleanable_offset": self.first_uncleanable_offset,
            "manifest_version_before": self.manifest_version_before,
            "manifest_version_after": self.manifest_version_after,
            "stats": self.stats.to_dict(),
            "quality": None if self.quality is None else self.quality.to_dict(),
            "files_written": self.files_written,
            "duration_ms": self.duration_ms,
            "key_buckets": self.key_buckets,
            "max_map_bytes": self.max_map_bytes,
            "segments_replaced": self.segments_replaced,
            "segments_written": self.segments_written,
        }


@dataclass
class RunReport:
    """A whole run: every requested partition, the totals and the phase durations."""

    run_id: str
    topic: str
    now_ms: int
    started_ms: int
    duration_ms: int = 0
    phases_ms: dict[str, int] = field(default_factory=dict)
    partitions: list[PartitionReport] = field(default_factory=list)
    location: str | None = None
    #: Storage operations of the driver retried after a transient error (the Parquet reads and
    #: writes of Spark tasks are retried by pyarrow's S3 client, which does not count them).
    storage_retries: int = 0
    #: Where the run computed: "connect" (a client of a Spark Connect server) or the classic
    #: session's master (local[*], spark://host:7077, yarn, …). Never a URL: it may hold a token.
    spark: str = ""

    @property
    def statuses(self) -> dict[str, int]:
        """How many partitions ended in each status."""
        return dict(Counter(p.status for p in self.partitions))

    @property
    def totals(self) -> CleanerStats:
        total = CleanerStats()
        for p in self.partitions:
            total.add(p.stats)
        return total

    @property
    def failed(self) -> bool:
        return any(p.failed for p in self.partitions)

    def partition(self, partition: int) -> PartitionReport:
        return next(p for p in self.partitions if p.partition == partition)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "topic": self.topic,
            "now_ms": self.now_ms,
            "started_ms": self.started_ms,
            "duration_ms": self.duration_ms,
            "phases_ms": self.phases_ms,
            "failed": self.failed,
            "statuses": self.statuses,
            "storage_retries": self.storage_retries,
            "spark": self.spark,
            "totals": self.totals.to_dict(),
            "partitions": [p.to_dict() for p in self.partitions],
        }

    def save(self, store: ObjectStore) -> str:
        """Write the report to `_lakecleaner/runs/<topic>/<run id>/report.json`; returns its location."""
        self.location = store_report(store, self.topic, self.run_id, REPORT_NAME, self.to_dict())
        return self.location


def _mb(n: int) -> str:
    return f"{n / 1_000_000:.1f}"


def report_table(report: RunReport) -> Table:
    """The run as a rich table: one row per partition and a total."""
    title = f"compaction of {report.topic}, run {report.run_id} ({report.duration_ms / 1000:.1f} s on {report.spark})"
    table = Table(title=title)
    for name in (
        "partition",
        "status",
        "read",
        "written",
        "MB read",
        "MB written",
        "recopy %",
        "superseded",
        "unkeyed",
        "tombstones stamped/removed",
        "malformed",
        "groups rewritten/kept",
        "quality",
    ):
        table.add_column(name, justify="left" if name in ("status", "quality") else "right")
    rows = [(str(p.partition), p.status, p.stats, _quality_cell(p)) for p in report.partitions]
    rows.append(("total", "FAILED" if report.failed else "ok", report.totals, ""))
    for label, status, s, quality in rows:
        table.add_row(
            label,
            status,
            str(s.records_read),
            str(s.records_written),
            _mb(s.bytes_read),
            _mb(s.bytes_written),
            str(s.recopy_percent),
            str(s.records_superseded),
            str(s.unkeyed_dropped),
            f"{s.tombstones_stamped}/{s.tombstones_removed}",
            str(s.malformed_version_headers),
            f"{s.groups_rewritten}/{s.groups_unchanged}",
            quality,
        )
    return table


def _quality_cell(p: PartitionReport) -> str:
    if p.quality is None:
        return "-"
    return "passed" if p.quality.success else "FAILED"


def print_report(report: RunReport, console: Console | None = None) -> None:
    """Print the table and, for every partition that did not commit cleanly, why."""
    console = console or Console(width=None if sys.stdout.isatty() else 200)
    console.print(report_table(report))
    for p in report.partitions:
        if p.status not in (COMMITTED, NOTHING_TO_DO) or p.message:
            console.print(f"partition {p.partition}: {p.status}: {p.message}", markup=False, highlight=False)
    if report.storage_retries:
        console.print(f"storage operations retried: {report.storage_retries}", markup=False, highlight=False)
    if report.location:
        console.print(f"report: {report.location}", markup=False, highlight=False)

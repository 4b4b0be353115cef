"""What a table's current snapshot holds for some Kafka partitions: its data files and
position-delete files, read from the snapshot's manifests (those whose partition summary admits
the partitions), and a missing file of the table's as TableUnreadable naming the fix."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pyiceberg.conversions import from_bytes
from pyiceberg.expressions import In
from pyiceberg.manifest import DataFile, DataFileContent, ManifestEntry, ManifestFile
from pyiceberg.types import IntegerType

from lakecleaner.errors import TableUnreadable
from lakecleaner.iceberg.manifest_entries import manifest_entries


@dataclass(frozen=True)
class PartitionFiles:
    """A partition's data files and position-delete files in the current snapshot, and when its
    oldest delete file was committed (0 when its snapshot has expired; None without any)."""

    data: list[DataFile]
    deletes: list[DataFile]
    oldest_delete_ms: int | None

    @property
    def dead_rows(self) -> int:
        return sum(f.record_count for f in self.deletes)

    @property
    def live_rows(self) -> int:
        return sum(f.record_count for f in self.data) - self.dead_rows


def of_partitions(partitions: Iterable[int]) -> Any:
    """The row filter of the Kafka partitions `partitions`."""
    # In's __new__ takes (term, literals); mypy reads its pydantic fields instead
    return In("partition", set(partitions))  # type: ignore[call-arg, arg-type]


@contextlib.contextmanager
def unreadable_as(table: Any) -> Iterator[None]:
    """A file of the table's that is gone, as TableUnreadable naming the table and the fix."""
    try:
        yield
    except FileNotFoundError as exc:
        name = ".".join(table.name())
        raise TableUnreadable(
            f"Iceberg table {name}: its current snapshot cannot be read ({exc.filename or exc}); "
            "`lakecleaner iceberg sync --rebuild` makes it anew from the manifests"
        ) from exc


def table_entries(table: Any, partitions: Iterable[int]) -> list[DataFile]:
    """The data and position-delete files the table's current snapshot holds for `partitions`,
    an entry per registration (a file registered twice is there twice)."""
    return [e.data_file for e in _live_entries(table, set(partitions))]


def partition_files(table: Any, partition: int) -> PartitionFiles:
    """The partition's `PartitionFiles` (a delete file whose data files are gone is still the
    partition's)."""
    entries = _live_entries(table, {partition})
    deletes = [e for e in entries if e.data_file.content == DataFileContent.POSITION_DELETES]
    times = [_committed_ms(table, e.snapshot_id) for e in deletes]
    return PartitionFiles(
        [e.data_file for e in entries if e.data_file.content == DataFileContent.DATA],
        [e.data_file for e in deletes],
        min(times) if times else None,
    )


def _live_entries(table: Any, partitions: set[int]) -> list[ManifestEntry]:
    """The current snapshot's live manifest entries of `partitions`."""
    snapshot = table.current_snapshot()
    if snapshot is None or not partitions:
        return []
    low, high = min(partitions), max(partitions)
    with unreadable_as(table):
        manifests = [m for m in snapshot.manifests(table.io) if _may_hold(m, low, high)]
        entries = [e for m in manifests for e in manifest_entries(table.io, m)]
    return [e for e in entries if e.data_file.partition[0] in partitions]


def _committed_ms(table: Any, snapshot_id: int | None) -> int:
    snapshot = None if snapshot_id is None else table.snapshot_by_id(snapshot_id)
    return 0 if snapshot is None else int(snapshot.timestamp_ms)


def _may_hold(manifest: ManifestFile, low: int, high: int) -> bool:
    """Whether the manifest's partition summary admits a partition in [low, high] (True without one)."""
    summary = manifest.partitions[0] if manifest.partitions else None
    if summary is None or summary.lower_bound is None or summary.upper_bound is None:
        return True
    first, last = (int(from_bytes(IntegerType(), b)) for b in (summary.lower_bound, summary.upper_bound))
    return bool(first <= high and low <= last)


__all__ = ["PartitionFiles", "of_partitions", "partition_files", "table_entries", "unreadable_as"]

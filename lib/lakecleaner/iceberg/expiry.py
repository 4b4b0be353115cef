"""Deletion keeps its promises with readers of the tables (issue 48): before gc deletes files that
left the log, the tables' snapshots older than `file.delete.delay.ms` are expired, and the log
files the snapshots kept still reference are held back.

A reader that loaded a snapshot can read its files for the delay after the snapshot stopped being
current (as a Kafka consumer reads a deleted segment for `file.delete.delay.ms` after it left the
log): a snapshot is expired once the one that replaced it (the next in the table's snapshot log)
is older than the delay, and a file is physically deleted only when no snapshot kept for readers
references it. Snapshots are stamped by the wall clock, so ages are judged at the earlier of gc's
`now` and the wall clock (a `--now` ahead of the clock expires nothing sooner). The current
snapshot is never expired.

Expiring a snapshot leaves its manifest list and manifests behind; the latest-values table's
data and delete files are replaced by table maintenance (`iceberg.maintenance`) and by a rebuild;
and another writer of a table (Spark
appending to it) leaves data files a sync then drops (the log table holds only the log's files).
What neither a table's metadata nor a kept snapshot reaches, under its `metadata/` and `data/`,
is deleted once older than the delay, and never while a sync holds a lease on the table's folder
(`follow.sync_leases`: a commit in flight writes its files before they are reachable, however
long it takes). Such files may hold record bytes, so they are the erasure audit's too
(`audit.table_files`), which `Reach` tells when each one goes.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from pyiceberg.manifest import DataFile, DataFileContent

from lakecleaner.clock import wall_clock_ms
from lakecleaner.iceberg.manifest_entries import manifest_entries
from lakecleaner.iceberg.position_deletes import covers
from lakecleaner.iceberg.schema import LATEST_TABLE, LOG_TABLE, TableKind, table_folder
from lakecleaner.iceberg.snapshots import FOREVER, expired_snapshots, snapshot_releases
from lakecleaner.iceberg.sync import drop_tables, open_table
from lakecleaner.log.leases import leases_on

if TYPE_CHECKING:
    from lakecleaner.io import ObjectInfo
    from lakecleaner.lake import Lake

#: The folders of a table's location that Iceberg writers own.
TABLE_FOLDERS = ("metadata/", "data/")


@dataclass(frozen=True)
class Reach:
    """What a table's metadata reaches: each file (metadata or data), by location, with the time
    its readers were released — when the last snapshot (or metadata file) that references it
    stopped being current; a reader may read it for file.delete.delay.ms after (`FOREVER` for what
    the current snapshot and metadata reach) — and what the current snapshot and metadata reach."""

    released_ms: dict[str, int]
    current: frozenset[str]
    #: The current snapshot's position-delete files (issue 80), by location, which may hide rows
    #: of data files: a row a delete file hides is still stored until table maintenance rewrites
    #: its data file (`iceberg.maintenance`).
    deletes: tuple[DataFile, ...] = ()

    def hiding(self, location: str) -> list[DataFile]:
        """The current snapshot's delete files whose path bounds cover the data file at `location`."""
        return [f for f in self.deletes if covers(f, location)]


def table_kinds(lake: Lake, topic: str) -> list[TableKind]:
    """The tables the topic has: its log, and its latest values when it is compacted."""
    return [LOG_TABLE, LATEST_TABLE] if lake.topic(topic).config.compact else [LOG_TABLE]


def expire_and_hold(lake: Lake, topic: str, now_ms: int) -> frozenset[str]:
    """Expire each of the topic's tables' snapshots older than its file.delete.delay.ms (never
    the current one), delete what no longer reaches, and return the locations of every file the
    log table's kept snapshots reference."""
    cutoff = min(now_ms, wall_clock_ms()) - lake.topic(topic).config.file_delete_delay_ms
    held: frozenset[str] = frozenset()
    for kind in table_kinds(lake, topic):
        table = open_table(lake, topic, kind)
        old = expired_snapshots(table, cutoff)
        if old:
            table.maintenance.expire_snapshots().by_ids(old).commit()
            table = open_table(lake, topic, kind)
        reach = reach_of(table)
        if not syncing(lake, topic, kind):
            stale = [
                obj.key
                for obj in table_objects(lake, topic, kind)
                if lake.store.location(obj.key) not in reach.released_ms and obj.mtime_ms < cutoff
            ]
            lake.store.delete_many(stale)
        if kind is LOG_TABLE:
            held = frozenset(reach.released_ms)
    return held


def syncing(lake: Lake, topic: str, kind: TableKind) -> bool:
    """Whether a sync holds a live lease on the table's folder (by the wall clock)."""
    return bool(leases_on(lake.store, table_folder(topic, kind)))


def drop_turned_off(lake: Lake, topic: str, now_ms: int) -> list[str]:
    """A topic whose tables were turned off (`iceberg: {enabled: false}`) keeps nothing of them:
    its tables are dropped from the catalog (when it still has them, and they are this lake's),
    and every object of their folders goes once older than file.delete.delay.ms, as segments do
    (a reader may hold a snapshot loaded before). Returns the keys deleted."""
    cutoff = min(now_ms, wall_clock_ms()) - lake.topic(topic).config.file_delete_delay_ms
    objects = [obj for kind in (LOG_TABLE, LATEST_TABLE) for obj in table_objects(lake, topic, kind)]
    if not objects:
        return []
    if lake.config.iceberg.catalog or lake.store.root_uri.startswith("file://"):
        drop_tables(lake, topic)
    due = [obj.key for obj in objects if obj.mtime_ms < cutoff]
    lake.store.delete_many(due)
    return due


def table_objects(lake: Lake, topic: str, kind: TableKind) -> list[ObjectInfo]:
    """The objects under the table's own folders (`TABLE_FOLDERS`)."""
    base = table_folder(topic, kind)
    return [obj for folder in TABLE_FOLDERS for obj in lake.store.list(base + folder)]


def reach_of(table: Any) -> Reach:
    """What the table's metadata reaches (`Reach`): an old metadata file is released when the next
    one was written, a snapshot's files when the snapshot was (`snapshot_releases`)."""
    written = [(entry.metadata_file, entry.timestamp_ms) for entry in table.metadata.metadata_log]
    released: dict[str, int] = {table.metadata_location: FOREVER}
    for (location, _), (_, next_ms) in pairwise([*written, (table.metadata_location, table.metadata.last_updated_ms)]):
        released[location] = max(released.get(location, 0), next_ms)
    current_snapshot = table.current_snapshot()
    current: set[str] = {table.metadata_location}
    deletes: tuple[DataFile, ...] = ()
    snapshot_released = snapshot_releases(table)
    for snapshot in table.snapshots():
        reached = {snapshot.manifest_list}
        files: list[DataFile] = []
        for manifest in snapshot.manifests(table.io):
            reached.add(manifest.manifest_path)
            files += [e.data_file for e in manifest_entries(table.io, manifest)]
        reached.update(f.file_path for f in files)
        for location in reached:
            released[location] = max(released.get(location, 0), snapshot_released[snapshot.snapshot_id])
        if current_snapshot is not None and snapshot.snapshot_id == current_snapshot.snapshot_id:
            current |= reached
            deletes = tuple(f for f in files if f.content == DataFileContent.POSITION_DELETES)
    return Reach(released, frozenset(current), deletes)


__all__ = [
    "TABLE_FOLDERS",
    "Reach",
    "drop_turned_off",
    "expire_and_hold",
    "reach_of",
    "syncing",
    "table_kinds",
    "table_objects",
]

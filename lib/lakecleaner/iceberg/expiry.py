"""Deletion keeps its promises with readers of the table (issue 48): before gc deletes files that
left the log, the table's snapshots older than `file.delete.delay.ms` are expired, and the files
the snapshots kept still reference are held back.

A reader that loaded a snapshot can read its files while the snapshot is younger than the delay
(as a Kafka consumer reads a deleted segment for `file.delete.delay.ms`); a file is physically
deleted only when no snapshot kept for readers references it. Snapshots are stamped by the wall
clock, so their age is judged at the earlier of gc's `now` and the wall clock (a `--now` ahead of
the clock expires nothing sooner). The current snapshot is never expired.

Expiring a snapshot leaves its manifest list and manifests behind, and another writer of the
table (Spark appending to it) leaves data files under the table's `data/` that a sync then drops
(the table holds only the log's files): what neither the table's metadata nor a kept snapshot
reaches, under `metadata/` and `data/`, is deleted once older than the delay (a commit in flight
writes its files before they are reachable). Such files may hold record bytes (another writer's
column statistics, its data), so they are the erasure audit's too (`audit.table_files`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lakecleaner.clock import wall_clock_ms
from lakecleaner.iceberg.sync import log_table
from lakecleaner.log.layout import topic_prefix

if TYPE_CHECKING:
    from lakecleaner.io import ObjectInfo
    from lakecleaner.lake import Lake

#: The folders of a table's location that Iceberg writers own (under the topic's prefix).
TABLE_FOLDERS = ("metadata/", "data/")


def expire_and_hold(lake: Lake, topic: str, now_ms: int) -> frozenset[str]:
    """Expire the topic's table's snapshots older than its file.delete.delay.ms (never the current
    one), delete what no longer reaches, and return the locations of every data file the kept
    snapshots reference."""
    table = log_table(lake, topic)
    delay_ms = lake.topic(topic).config.file_delete_delay_ms
    cutoff = min(now_ms, wall_clock_ms()) - delay_ms
    current = table.current_snapshot()
    old = [
        s.snapshot_id
        for s in table.snapshots()
        if s.timestamp_ms < cutoff and (current is None or s.snapshot_id != current.snapshot_id)
    ]
    if old:
        table.maintenance.expire_snapshots().by_ids(old).commit()
        table = log_table(lake, topic)
    held, reachable = _reached(table)
    stale = [
        obj.key
        for obj in table_objects(lake, topic)
        if lake.store.location(obj.key) not in reachable | held and obj.mtime_ms < cutoff
    ]
    lake.store.delete_many(stale)
    return frozenset(held)


def table_objects(lake: Lake, topic: str) -> list[ObjectInfo]:
    """The objects under the table's own folders (`TABLE_FOLDERS`) at the topic's prefix."""
    return [obj for folder in TABLE_FOLDERS for obj in lake.store.list(topic_prefix(topic) + folder)]


def reachable_metadata(lake: Lake, topic: str) -> set[str]:
    """Locations of the table's metadata files that its current metadata reaches (itself, the
    metadata log, the kept snapshots' manifest lists and manifests) and the data files they list."""
    held, reachable = _reached(log_table(lake, topic))
    return held | reachable


def _reached(table: Any) -> tuple[set[str], set[str]]:
    """(data files the kept snapshots reference, metadata files the table reaches)."""
    held: set[str] = set()
    reachable = {table.metadata_location, *(entry.metadata_file for entry in table.metadata.metadata_log)}
    for snapshot in table.snapshots():
        reachable.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(table.io):
            reachable.add(manifest.manifest_path)
            held.update(e.data_file.file_path for e in manifest.fetch_manifest_entry(table.io, discard_deleted=True))
    return held, reachable


__all__ = ["TABLE_FOLDERS", "expire_and_hold", "reachable_metadata", "table_objects"]

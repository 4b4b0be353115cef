"""Deletion keeps its promises with readers of the table (issue 48): before gc deletes files that
left the log, the table's snapshots older than `file.delete.delay.ms` are expired, and the files
the snapshots kept still reference are held back.

A reader that loaded a snapshot can read its files while the snapshot is younger than the delay
(as a Kafka consumer reads a deleted segment for `file.delete.delay.ms`); a file is physically
deleted only when no snapshot kept for readers references it. Snapshots are stamped by the wall
clock, so their age is judged at the earlier of gc's `now` and the wall clock (a `--now` ahead of
the clock expires nothing sooner). The current snapshot is never expired.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakecleaner.clock import wall_clock_ms
from lakecleaner.iceberg.sync import log_table

if TYPE_CHECKING:
    from lakecleaner.lake import Lake


def expire_and_hold(lake: Lake, topic: str, now_ms: int) -> frozenset[str]:
    """Expire the topic's table's snapshots older than its file.delete.delay.ms (never the current
    one) and return the locations of every data file the snapshots kept reference."""
    table = log_table(lake, topic)
    cutoff = min(now_ms, wall_clock_ms()) - lake.topic(topic).config.file_delete_delay_ms
    current = table.current_snapshot()
    old = [
        s.snapshot_id
        for s in table.snapshots()
        if s.timestamp_ms < cutoff and (current is None or s.snapshot_id != current.snapshot_id)
    ]
    if old:
        table.maintenance.expire_snapshots().by_ids(old).commit()
        table = log_table(lake, topic)
    held: set[str] = set()
    for snapshot in table.snapshots():
        for manifest in snapshot.manifests(table.io):
            held.update(e.data_file.file_path for e in manifest.fetch_manifest_entry(table.io, discard_deleted=True))
    return frozenset(held)


__all__ = ["expire_and_hold"]

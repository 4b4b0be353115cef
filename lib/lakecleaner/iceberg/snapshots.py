"""When a table's snapshots are released by their readers, and expiring them as a sync commits.

A reader that loaded a snapshot can read it for file.delete.delay.ms after it stopped being
current (as a Kafka consumer reads a deleted segment for that long after it left the log): a
snapshot is released when the next entry of the table's snapshot log replaced it, and expired
once released longer ago than the delay. gc expires them (`iceberg.expiry`), and so does every
sync, a bounded number at a time (`expire_released`), so that a table's metadata, which pyiceberg
copies several times in each commit, holds the snapshots of about one delay, not of every commit
since the last gc (issue 80). Snapshots are stamped by the wall clock.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from pyiceberg.table.update.snapshot import ExpireSnapshots

#: The release time of what the current snapshot or metadata reaches: never.
FOREVER = 2**63 - 1
#: Snapshots one sync expires at most (`expire_released`): a table that gathered many while no
#: sync or gc ran sheds them over the next syncs, each commit's work bounded.
EXPIRED_PER_SYNC = 32


def snapshot_releases(table: Any) -> dict[int, int]:
    """Each snapshot's release time: when the next entry of the table's snapshot log replaced it;
    one never current, when it was taken; the current one, `FOREVER`."""
    replaced: dict[int, int] = {}
    for entry, following in pairwise(table.metadata.snapshot_log):
        if entry.snapshot_id != following.snapshot_id:
            replaced[entry.snapshot_id] = max(replaced.get(entry.snapshot_id, 0), following.timestamp_ms)
    current = table.current_snapshot()
    released = {s.snapshot_id: replaced.get(s.snapshot_id, s.timestamp_ms) for s in table.snapshots()}
    if current is not None:
        released[current.snapshot_id] = FOREVER
    return released


def expired_snapshots(table: Any, cutoff_ms: int) -> list[int]:
    """The snapshots readers no longer hold: released (`snapshot_releases`) before `cutoff_ms`,
    oldest first. Never the current snapshot."""
    released = snapshot_releases(table)
    old = [s.snapshot_id for s in table.snapshots() if released[s.snapshot_id] < cutoff_ms]
    return sorted(old, key=lambda snapshot_id: released[snapshot_id])


def expire_released(transaction: Any, table: Any, cutoff_ms: int) -> int:
    """Stage in `transaction` (on `table` as loaded) the expiry of its snapshots released before
    `cutoff_ms`, the oldest `EXPIRED_PER_SYNC`; how many. The files only they reached are gc's,
    once older than the delay (`iceberg.expiry`)."""
    old = expired_snapshots(table, cutoff_ms)[:EXPIRED_PER_SYNC]
    if old:
        ExpireSnapshots(transaction).by_ids(old).commit()
    return len(old)


__all__ = ["EXPIRED_PER_SYNC", "FOREVER", "expire_released", "expired_snapshots", "snapshot_releases"]

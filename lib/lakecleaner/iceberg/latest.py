"""The latest values of a compacted topic as an Iceberg table, `<table>_latest` (issue 48):
one row per live key of each partition — the key's winning record by the topic's compaction
strategy (the highest offset; or KIP-280's timestamp or header version), when that is not a
tombstone — as Confluent Tableflow's UPSERT mode keeps, without a cloud service.

It is kept without a second pass over the log. The table records, per partition, the log's next
offset and log start offset it reflects (`lakecleaner.latest.next-offset.<p>`, `.log-start.<p>`);
a sync of a partition reads only the records from there (what commits appended since) and takes
each key's winner among them and the partition's rows: a new winner replaces its key's row, a
winning tombstone removes it. Then rows whose offset fell below the log start go (retention and
trim removed the key's winner, so the log no longer has the key). Compaction changes neither
offset nor any key's winner, so it costs nothing here. A partition never synced is read whole
once.

A sync rewrites the partition's rows as one file (copy-on-write: a commit costs writing that
partition's live keys; Iceberg's equality deletes would make it cost the batch only, but
pyiceberg cannot write delete files yet) and moves the reflected offsets in the same snapshot, so
a crash leaves either the old rows and offset or the new ones.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.exceptions import CommitFailedException, ValidationException

from lakecleaner.clock import wall_clock_ms
from lakecleaner.config import TopicConfig
from lakecleaner.engine.versions import latest_per_key, order_table
from lakecleaner.errors import LakeCleanerError
from lakecleaner.iceberg.schema import LATEST_TABLE
from lakecleaner.iceberg.snapshots import expire_released
from lakecleaner.iceberg.sync import (
    COMMIT_ATTEMPTS,
    VERSION_PREFIX,
    not_older,
    of_partitions,
    open_table,
    unreadable_as,
)
from lakecleaner.iceberg.transactions import open_transaction
from lakecleaner.log.manifest import Manifest

if TYPE_CHECKING:
    from lakecleaner.lake import Lake, Topic

#: The table property holding the log's next offset a partition's rows reflect.
REFLECTED_PREFIX = "lakecleaner.latest.next-offset."
#: ... and the log start offset they were last filtered by.
REFLECTED_START_PREFIX = "lakecleaner.latest.log-start."
_COLUMNS = ["key", "offset", "timestamp", "value", "headers"]


def latest_table(lake: Lake, topic: str) -> Any:
    return open_table(lake, topic, LATEST_TABLE)


def reflected(table: Any, partition: int) -> int | None:
    """The log's next offset the partition's rows reflect; None when never synced."""
    value = table.properties.get(f"{REFLECTED_PREFIX}{partition}")
    return None if value is None else int(value)


def _reflected_start(table: Any, partition: int) -> int:
    """The log start offset the partition's rows were last filtered by."""
    return int(table.properties.get(f"{REFLECTED_START_PREFIX}{partition}", "0"))


def sync_latest(topic: Topic, manifests: Mapping[int, Manifest]) -> int:
    """Bring the partitions' latest rows up to their committed manifests (one snapshot per
    partition that changed), with the topic's config as the caller holds it; how many partitions
    changed."""
    return sum(_sync_partition(topic, partition, manifest) for partition, manifest in sorted(manifests.items()))


def _sync_partition(topic: Topic, partition: int, manifest: Manifest) -> bool:
    """One partition's rows brought up to its manifest; whether they changed. A commit another
    writer beat is redone from the table read again."""
    for attempt in range(COMMIT_ATTEMPTS):
        table = latest_table(topic.lake, topic.name)
        if not not_older(table, {partition: manifest}):  # a sync that ran late: the rows reflect a newer log
            return False
        since = reflected(table, partition)
        if since == manifest.next_offset and _reflected_start(table, partition) == manifest.log_start_offset:
            return False
        if since is not None and since > manifest.next_offset:  # a repair rebuilt the log shorter
            since = None
        rows, replaced = _merged(topic, table, partition, manifest, since)
        try:
            with open_transaction(table) as transaction:
                expire_released(transaction, table, wall_clock_ms() - topic.config.file_delete_delay_ms)
                if replaced:
                    transaction.overwrite(rows, overwrite_filter=of_partitions([partition]))
                elif rows.num_rows:
                    transaction.append(rows)
                transaction.set_properties(
                    {
                        f"{REFLECTED_PREFIX}{partition}": str(manifest.next_offset),
                        f"{REFLECTED_START_PREFIX}{partition}": str(manifest.log_start_offset),
                        f"{VERSION_PREFIX}{partition}": str(manifest.version),
                    }
                )
        except (CommitFailedException, ValidationException):
            time.sleep(0.05 * (attempt + 1))
            continue
        return True
    raise LakeCleanerError(
        f"Iceberg table of topic {topic}'s latest values: lost {COMMIT_ATTEMPTS} commit races in a row on "
        f"partition {partition}; run `lakecleaner iceberg sync --topic {topic}` again later"
    )


def _current_rows(table: Any, partition: int) -> pa.Table:
    if table.current_snapshot() is None:
        return table.schema().as_arrow().empty_table()
    with unreadable_as(table):
        return table.scan(row_filter=of_partitions([partition])).to_arrow()


def _merged(topic: Topic, table: Any, partition: int, manifest: Manifest, since: int | None) -> tuple[pa.Table, bool]:
    """The partition's rows after the records from `since` (the whole log when None), and
    whether the table holds rows of the partition to replace."""
    schema = table.schema().as_arrow()
    current = _current_rows(table, partition)
    start = manifest.log_start_offset if since is None else max(since, manifest.log_start_offset)
    start = min(start, manifest.next_offset)
    new = topic.partition(partition).read(start, manifest=manifest).select(_COLUMNS)
    kept = current.select(_COLUMNS).cast(new.schema) if since is not None else new.schema.empty_table()
    winners = _winners(pa.concat_tables([kept, new]), topic.config)
    in_log = pc.greater_equal(winners.column("offset"), manifest.log_start_offset)
    live = winners.filter(pc.and_(pc.is_valid(winners.column("value")), in_log))
    rows = pa.table(
        {"partition": pa.array([partition] * live.num_rows, pa.int32()), **{c: live.column(c) for c in _COLUMNS}}
    ).cast(schema)
    return rows, current.num_rows > 0


def _winners(records: pa.Table, config: TopicConfig) -> pa.Table:
    """Each key's winning record by the topic's compaction strategy (KIP-280: offset, timestamp
    or header version, ties to the highest offset), as the compaction keeps it
    (`engine.versions`). Offsets are unique among them (the rows kept are below the records read)."""
    if records.num_rows == 0:
        return records
    ordered, _ = order_table(records, config)
    best = latest_per_key(ordered)
    return records.filter(pc.is_in(records.column("offset"), value_set=best.column("offset")))


def in_step(table: Any, manifests: Mapping[int, Manifest]) -> bool:
    """Whether every partition's rows reflect its committed manifest's next and log start offsets."""
    return all(
        (reflected(table, p), _reflected_start(table, p)) == (m.next_offset, m.log_start_offset)
        for p, m in manifests.items()
    )


__all__ = ["REFLECTED_PREFIX", "in_step", "latest_table", "reflected", "sync_latest"]

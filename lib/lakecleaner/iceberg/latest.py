"""The latest values of a compacted topic as an Iceberg table, `<table>_latest` (issue 48):
one row per live key of each partition — the key's winning record by the topic's compaction
strategy (the highest offset; or KIP-280's timestamp or header version), when that is not a
tombstone — as Confluent Tableflow's UPSERT mode keeps, without a cloud service.

It is kept without a second pass over the log, merge-on-read (issue 80). The table records, per
partition, the log's next offset and log start offset it reflects
(`lakecleaner.latest.next-offset.<p>`, `.log-start.<p>`); a sync of a partition reads only the
records from there (what commits appended since), finds where the partition's live rows are
without reading their values (`iceberg.located`), and decides per key (`iceberg.upserts`): a new
winner supersedes its key's row, a winning tombstone removes it, rows whose offset fell below the
log start go. One snapshot (`iceberg.row_delta`) adds a data file of the batch's live winners and
a position-delete file of the rows that go, moves the reflected offsets, and so a crash leaves
either the old rows and offsets or the new ones. Compaction changes neither offset nor any key's
winner, so it costs nothing here. A partition never synced, one a repair rebuilt shorter, and one
of a timestamp- or header-ordered topic whose log start moved are made anew from the log. After
its commit, a sync folds the partition's batches once they are many (`iceberg.maintenance`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.io.pyarrow import _dataframe_to_data_files
from pyiceberg.manifest import DataFile
from pyiceberg.table import Transaction

from lakecleaner.clock import wall_clock_ms
from lakecleaner.engine.versions import source_columns
from lakecleaner.errors import LakeCleanerError
from lakecleaner.faults import crash_point
from lakecleaner.iceberg.entries import partition_files
from lakecleaner.iceberg.located import locate
from lakecleaner.iceberg.maintenance import fold_batches
from lakecleaner.iceberg.position_deletes import POSITION_DELETES, write_position_deletes
from lakecleaner.iceberg.row_delta import RowDelta
from lakecleaner.iceberg.schema import LATEST_TABLE
from lakecleaner.iceberg.snapshots import expire_released
from lakecleaner.iceberg.sync import (
    COMMIT_ATTEMPTS,
    VERSION_PREFIX,
    not_older,
    open_table,
)
from lakecleaner.iceberg.transactions import open_transaction
from lakecleaner.iceberg.upserts import made_anew, needs_earlier, upsert, winners
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
        if made_anew(topic.config, _reflected_start(table, partition), manifest.log_start_offset):
            since = None
        try:
            with open_transaction(table) as transaction:
                expire_released(transaction, table, wall_clock_ms() - topic.config.file_delete_delay_ms)
                change = (
                    _rebuilt(topic, table, partition, manifest)
                    if since is None
                    else _upserted(topic, table, partition, manifest, since)
                )
                if change.changes:
                    with RowDelta(transaction) as delta:
                        change.stage(delta, transaction, table)
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
        fold_batches(topic, table, partition)
        return True
    raise LakeCleanerError(
        f"Iceberg table of topic {topic}'s latest values: lost {COMMIT_ATTEMPTS} commit races in a row on "
        f"partition {partition}; run `lakecleaner iceberg sync --topic {topic}` again later"
    )


@dataclass(frozen=True)
class _Change:
    """A partition's change: records to append as rows, live rows to delete by position, and
    files of the current snapshot to remove whole."""

    partition: int
    appended: pa.Table
    deleted: pa.Table
    removed: list[DataFile]

    @property
    def changes(self) -> bool:
        return bool(self.appended.num_rows or self.deleted.num_rows or self.removed)

    def stage(self, delta: RowDelta, transaction: Transaction, table: Any) -> None:
        """The change in `delta`: a data file of the appended rows, a position-delete file."""
        rows = _as_rows(self.appended, self.partition, table.schema().as_arrow())
        if rows.num_rows:
            metadata = transaction.table_metadata
            for file in _dataframe_to_data_files(metadata, rows, table.io, delta.commit_uuid):
                delta.append_data_file(file)
        if self.deleted.num_rows:
            delta.add_deletes(
                write_position_deletes(
                    table.io, table.location_provider(), self.partition, self.deleted, table.spec().spec_id
                )
            )
            crash_point("latest.after_deletes_write")
        delta.remove(self.removed)


def _rebuilt(topic: Topic, table: Any, partition: int, manifest: Manifest) -> _Change:
    """The partition's rows made anew from the whole log (a partition never synced, or a log a
    repair rebuilt shorter): its files removed, each live key's winner appended."""
    records = topic.partition(partition).read(manifest.log_start_offset, manifest=manifest).select(_COLUMNS)
    won = winners(records, topic.config)
    live = won.filter(pc.is_valid(won.column("value")))
    files = partition_files(table, partition)
    return _Change(partition, live, POSITION_DELETES.empty_table(), files.data + files.deletes)


def _upserted(topic: Topic, table: Any, partition: int, manifest: Manifest, since: int) -> _Change:
    """The partition's change from the records since `since` and the log start: the batch's
    live winners appended, the rows they supersede or that fell below the log start deleted
    (`iceberg.upserts`), reading where the live rows are, never their values."""
    start = min(max(since, manifest.log_start_offset), manifest.next_offset)
    batch = topic.partition(partition).read(start, manifest=manifest).select(_COLUMNS)
    columns = source_columns(topic.config.compaction_strategy)
    workers = topic.lake.config.storage.max_concurrency
    live = locate(table, partition, columns, batch.column("key"), manifest.log_start_offset, workers)
    earlier = None
    if needs_earlier(topic.config):
        read = topic.partition(partition).read(manifest.log_start_offset, columns=columns, manifest=manifest)
        earlier = read.filter(pc.less(read.column("offset"), start))
    change = upsert(live, batch, topic.config, manifest.log_start_offset, earlier)
    return _Change(partition, change.appended, change.deleted, [])


def _as_rows(records: pa.Table, partition: int, schema: pa.Schema) -> pa.Table:
    """Records as the table's rows of `partition`."""
    return pa.table(
        {"partition": pa.array([partition] * records.num_rows, pa.int32()), **{c: records.column(c) for c in _COLUMNS}}
    ).cast(schema)


def in_step(table: Any, manifests: Mapping[int, Manifest]) -> bool:
    """Whether every partition's rows reflect its committed manifest's next and log start offsets."""
    return all(
        (reflected(table, p), _reflected_start(table, p)) == (m.next_offset, m.log_start_offset)
        for p, m in manifests.items()
    )


__all__ = ["REFLECTED_PREFIX", "in_step", "latest_table", "reflected", "sync_latest"]

"""Table maintenance of the latest-values table (issue 80): the rewrites `policy.table_maintenance`
decides, each one snapshot (`iceberg.row_delta`) that removes the files it rewrites and every
delete file of the partition, adds the rewritten rows as one data file, and adds one delete file
for the rows still dead in the files it kept. The old files leave after `file.delete.delay.ms`
like any file a snapshot stops referencing (`iceberg.expiry`). A rewrite changes no row a reader
reads; it races syncs as they race each other, and is redone from the table read again.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.io.pyarrow import _dataframe_to_data_files

from lakecleaner.clock import wall_clock_ms
from lakecleaner.errors import LakeCleanerError
from lakecleaner.iceberg.entries import PartitionFiles, partition_files
from lakecleaner.iceberg.located import dead_positions, live_rows
from lakecleaner.iceberg.position_deletes import POSITION_DELETES, positions_of, write_position_deletes
from lakecleaner.iceberg.row_delta import RowDelta
from lakecleaner.iceberg.schema import LATEST_TABLE
from lakecleaner.iceberg.sync import COMMIT_ATTEMPTS, open_table
from lakecleaner.iceberg.transactions import open_transaction
from lakecleaner.policy.table_maintenance import major_reason, minor_due

if TYPE_CHECKING:
    from lakecleaner.lake import Topic

logger = logging.getLogger(__name__)

MINOR = "minor"
MAJOR = "major"


@dataclass(frozen=True)
class Rewrite:
    """One partition's rewrite: which kind and why, and what it cost."""

    partition: int
    kind: str
    reason: str
    files_removed: int
    rows_written: int
    bytes_written: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def maintain_latest(topic: Topic, now_ms: int) -> list[Rewrite]:
    """The rewrites due in the topic's latest-values table, partition by partition (gc, in each
    DAG run, and `lakecleaner iceberg compact`). Delete files are stamped by the wall clock, so
    their age is judged at the earlier of `now_ms` and the wall clock, as snapshot expiry does."""
    now_ms = min(now_ms, wall_clock_ms())
    if not topic.config.compact or not topic.lake.config.iceberg_enabled(topic.name):
        return []
    table = open_table(topic.lake, topic.name, LATEST_TABLE)
    done = []
    for partition in range(topic.partitions):
        files = partition_files(table, partition)
        reason = major_reason(files.live_rows, files.dead_rows, files.oldest_delete_ms, topic.config, now_ms)
        if reason is not None:
            done.append(_rewritten(topic, partition, MAJOR, reason))
        elif minor_due(len(files.data), len(files.deletes)):
            done.append(_rewritten(topic, partition, MINOR, _minor_reason(files)))
    return done


def fold_batches(topic: Topic, table: Any, partition: int) -> Rewrite | None:
    """A minor rewrite of the partition when due (called by the sync after its commit)."""
    files = partition_files(table, partition)
    if not minor_due(len(files.data), len(files.deletes)):
        return None
    return _rewritten(topic, partition, MINOR, _minor_reason(files))


def _minor_reason(files: PartitionFiles) -> str:
    return f"{len(files.data)} data files and {len(files.deletes)} delete files"


def _rewritten(topic: Topic, partition: int, kind: str, reason: str) -> Rewrite:
    """The rewrite committed, redone from the table read again after a lost race."""
    for attempt in range(COMMIT_ATTEMPTS):
        started = time.perf_counter()
        table = open_table(topic.lake, topic.name, LATEST_TABLE)
        try:
            rewrite = _rewrite(topic, table, partition, kind)
        except (CommitFailedException, ValidationException):
            time.sleep(0.05 * (attempt + 1))
            continue
        done = Rewrite(partition, kind, reason, *rewrite, round(time.perf_counter() - started, 3))
        logger.info("latest values of %s-%d: %s rewrite (%s): %s", topic.name, partition, kind, reason, done)
        return done
    raise LakeCleanerError(
        f"Iceberg table of topic {topic}'s latest values: the {kind} rewrite of partition {partition} lost "
        f"{COMMIT_ATTEMPTS} commit races in a row; `lakecleaner iceberg compact --topic {topic}` runs it again"
    )


def _rewrite(topic: Topic, table: Any, partition: int, kind: str) -> tuple[int, int, int]:
    """One rewrite's snapshot: (files removed, rows written, bytes written)."""
    workers = topic.lake.config.storage.max_concurrency
    files = partition_files(table, partition)
    largest = max(files.data, key=lambda f: f.record_count, default=None)
    kept = [] if kind == MAJOR or largest is None else [largest]
    rewritten = [f for f in files.data if f is not largest] if kept else files.data
    dead = dead_positions(table, files.deletes, workers)
    columns = table.schema().as_arrow().names
    rows = live_rows(table, rewritten, dead, columns, workers).select(columns)
    still_dead = [positions_of(f.file_path, dead[f.file_path]) for f in kept if f.file_path in dead]
    written = 0
    with open_transaction(table) as transaction, RowDelta(transaction) as delta:
        for file in _dataframe_to_data_files(transaction.table_metadata, rows, table.io, delta.commit_uuid):
            delta.append_data_file(file)
            written += file.file_size_in_bytes
        if still_dead:
            deletes = pa.concat_tables(still_dead).cast(POSITION_DELETES)
            file = write_position_deletes(table.io, table.location_provider(), partition, deletes, table.spec().spec_id)
            delta.add_deletes(file)
            written += file.file_size_in_bytes
        delta.remove([*rewritten, *files.deletes])
    return len(rewritten) + len(files.deletes), rows.num_rows, written


__all__ = ["MAJOR", "MINOR", "Rewrite", "fold_batches", "maintain_latest"]

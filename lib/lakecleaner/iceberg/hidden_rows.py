"""The rows of a segment file the log's readers do not read, as the log table holds them (issues
48, 79, 80): those below the log start, when a trim (Kafka's DeleteRecords) moved it inside the
file, and those the file's deletion vector removes (`log.deletion_vectors`, a clean that did not
rewrite the file).

The file stays in the log, and readers of the log skip those rows. Iceberg has no log start and
the log table is v2, so the log table registers the file in place, as any other, with an Iceberg
v2 position-delete file (`iceberg.position_deletes`) marking those rows: every v2 reader
(pyiceberg, DuckDB, Spark) then reads exactly what `consume` does, and the table holds no copy of
the file's records. The delete file holds positions only, no key, value or header.

Its key, under the log table's own `data/` folder, says which file, which log start and which
vector it is for, so every sync wants the same one (idempotent), a sync after a crash writes it
again, a later trim or vector of the same file wants another (the sync swaps them), and the
tables' expiry deletes one that no snapshot kept for readers reaches (`iceberg.expiry`). A cut
file with no record below the log start and no vector (compaction kept only higher offsets)
needs none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow.compute as pc
from pyiceberg.manifest import DataFile

from lakecleaner.iceberg.position_deletes import delete_file, encode_position_deletes, positions_of
from lakecleaner.iceberg.schema import LOG_TABLE, table_folder
from lakecleaner.log.deletion_vectors import read_vector
from lakecleaner.log.layout import partition_prefix
from lakecleaner.log.segment_files import read_segment_file

if TYPE_CHECKING:
    from lakecleaner.io import ObjectStore
    from lakecleaner.log.manifest import SegmentFile


@dataclass(frozen=True)
class HiddenRows:
    """The log table's position-delete file of one partition's segment file's rows below offset
    `log_start` or removed by the file's deletion vector."""

    topic: str
    partition: int
    file: SegmentFile
    log_start: int

    @property
    def source(self) -> str:
        """The segment file's key."""
        return partition_prefix(self.topic, self.partition) + self.file.path

    @property
    def key(self) -> str:
        """The delete file's key: the log table's `data/` folder, named after its source, the log
        start and the vector."""
        name = self.file.path.rsplit("/", 1)[-1].removesuffix(".parquet")
        folder = f"{table_folder(self.topic, LOG_TABLE)}data/partition={self.partition}/"
        vector = self.file.deletion_vector
        of_vector = "" if vector is None else "." + vector.path.rsplit(".", 2)[-2]  # .dv-<version>-<id>
        return f"{folder}{name}.below-{self.log_start}{of_vector}.deletes.parquet"


def hides_rows(file: SegmentFile, log_start: int) -> bool:
    """Whether readers of the log may skip some of the file's rows: the log start lies inside
    it, or a deletion vector removes some."""
    return file.deletion_vector is not None or file.base_offset < log_start < file.next_offset


def hidden_positions(store: ObjectStore, hidden: HiddenRows) -> np.ndarray:
    """The ascending positions of the file's rows below the log start (its `offset` column only)
    or removed by its deletion vector."""
    file = hidden.file
    below = np.zeros(0, np.int64)
    if file.base_offset < hidden.log_start:
        stored = read_segment_file(store, hidden.source, columns=["offset"], expected=file, physical=True)
        below = np.flatnonzero(pc.less(stored.column("offset"), hidden.log_start).to_numpy(zero_copy_only=False))
    if file.deletion_vector is None:
        return below
    prefix = partition_prefix(hidden.topic, hidden.partition)
    return np.union1d(below, read_vector(store, prefix, file.deletion_vector, file.record_count))


def write_hidden_rows(store: ObjectStore, hidden: HiddenRows, spec_id: int) -> DataFile | None:
    """Write the delete file of the file's hidden rows, registered at its location in the log
    table; its manifest entry's data file (None, nothing written, when no row is hidden)."""
    positions = hidden_positions(store, hidden)
    if not len(positions):
        return None
    rows, data = encode_position_deletes(positions_of(store.location(hidden.source), positions))
    store.write(hidden.key, data)
    return delete_file(store.location(hidden.key), hidden.partition, rows, len(data), spec_id)


__all__ = ["HiddenRows", "hidden_positions", "hides_rows", "write_hidden_rows"]

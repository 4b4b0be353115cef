"""A trim inside a segment file, as the log table holds it (issues 48, 80).

A trim (Kafka's DeleteRecords) moves a partition's log start offset into a segment file: the
file stays in the log, and readers of the log skip its records below the log start. Iceberg has
no log start, so the log table registers the cut file in place, as any other, with an Iceberg v2
position-delete file (`iceberg.position_deletes`) marking its records below the log start: every
v2 reader (pyiceberg, DuckDB, Spark) then reads exactly what `consume` does, and the table holds
no copy of the file's records. The delete file holds positions only, no key, value or header.

Its key, under the log table's own `data/` folder, says which file and which log start it is for,
so every sync wants the same one (idempotent), a sync after a crash writes it again, a later trim
into the same file wants another (the sync swaps them), and the tables' expiry deletes one that
no snapshot kept for readers reaches (`iceberg.expiry`). A cut file with no record below the log
start (compaction kept only higher offsets) needs none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow.compute as pc
from pyiceberg.manifest import DataFile

from lakecleaner.iceberg.position_deletes import delete_file, encode_position_deletes, positions_of
from lakecleaner.iceberg.schema import LOG_TABLE, table_folder
from lakecleaner.log.layout import partition_prefix
from lakecleaner.log.segment_files import read_segment_file

if TYPE_CHECKING:
    from lakecleaner.io import ObjectStore
    from lakecleaner.log.manifest import SegmentFile


@dataclass(frozen=True)
class TrimDeletes:
    """The log table's position-delete file of one partition's segment file's records below
    offset `log_start`."""

    topic: str
    partition: int
    file: SegmentFile
    log_start: int

    @property
    def source(self) -> str:
        """The cut segment file's key."""
        return partition_prefix(self.topic, self.partition) + self.file.path

    @property
    def key(self) -> str:
        """The delete file's key: the log table's `data/` folder, named after its source and the log start."""
        name = self.file.path.rsplit("/", 1)[-1].removesuffix(".parquet")
        folder = f"{table_folder(self.topic, LOG_TABLE)}data/partition={self.partition}/"
        return f"{folder}{name}.below-{self.log_start}.deletes.parquet"


def is_cut(file: SegmentFile, log_start: int) -> bool:
    """Whether the log start lies inside the file: it may hold offsets on both sides of it."""
    return file.base_offset < log_start < file.next_offset


def positions_below(store: ObjectStore, trim: TrimDeletes) -> np.ndarray:
    """The positions of the cut file's records below the log start (its `offset` column only)."""
    offsets = read_segment_file(store, trim.source, columns=["offset"], expected=trim.file).column("offset")
    return np.flatnonzero(pc.less(offsets, trim.log_start).to_numpy(zero_copy_only=False))


def write_trim_deletes(store: ObjectStore, trim: TrimDeletes, spec_id: int) -> DataFile | None:
    """Write the delete file of the cut file's records below the log start, registered at its
    location in the log table; its manifest entry's data file (None, nothing written, when the
    file holds no record below the log start)."""
    positions = positions_below(store, trim)
    if not len(positions):
        return None
    rows, data = encode_position_deletes(positions_of(store.location(trim.source), positions))
    store.write(trim.key, data)
    return delete_file(store.location(trim.key), trim.partition, rows, len(data), spec_id)


__all__ = ["TrimDeletes", "is_cut", "positions_below", "write_trim_deletes"]

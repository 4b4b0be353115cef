"""Where each live row of a partition of an Iceberg table is (issue 80): its data file and
position, with the columns asked for, after the position-delete files the current snapshot
holds. What a merge-on-read sync of the latest values reads instead of the rows' values
(`iceberg.upserts`: the key and order columns), and what table maintenance reads of the files it
rewrites (`iceberg.maintenance`: every column), on the lake's bounded pool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.manifest import DataFile

from lakecleaner.iceberg.entries import partition_files, unreadable_as
from lakecleaner.iceberg.position_deletes import deleted_positions, read_position_deletes
from lakecleaner.io.concurrent import map_ordered


def dead_positions(table: Any, deletes: list[DataFile], max_workers: int) -> Mapping[str, np.ndarray]:
    """The deleted positions of each data file, from the delete files `deletes`."""
    with unreadable_as(table):
        return deleted_positions(map_ordered(lambda f: read_position_deletes(table.io, f), deletes, max_workers))


def live_rows(
    table: Any, files: list[DataFile], dead: Mapping[str, np.ndarray], columns: list[str], max_workers: int
) -> pa.Table:
    """The live rows of the data files `files` (their rows but the `dead` positions), with
    `columns`, `file_path` (dictionary-encoded: one copy of the path) and `pos`."""
    arrow = table.schema().as_arrow()
    schema = pa.schema([arrow.field(c) for c in columns])

    def live_of(file: DataFile) -> pa.Table:
        with table.io.new_input(file.file_path).open() as stream:
            rows = pq.read_table(stream, columns=columns).cast(schema)
        positions = np.arange(rows.num_rows, dtype=np.int64)
        gone = dead.get(file.file_path)
        if gone is not None:
            positions = positions[~np.isin(positions, gone)]
            rows = rows.take(pa.array(positions))
        return _with_location(rows, file.file_path, positions)

    with unreadable_as(table):
        parts = map_ordered(live_of, files, max_workers)
    return pa.concat_tables(parts) if parts else _with_location(schema.empty_table(), "", np.arange(0))


def locate(table: Any, partition: int, columns: list[str], max_workers: int) -> pa.Table:
    """The live rows of `partition` in `table`'s current snapshot, with `columns` (`live_rows`)."""
    files = partition_files(table, partition)
    return live_rows(table, files.data, dead_positions(table, files.deletes, max_workers), columns, max_workers)


def _with_location(rows: pa.Table, file_path: str, positions: np.ndarray) -> pa.Table:
    paths = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows.num_rows, np.int32)), pa.array([file_path]))
    return rows.append_column("file_path", paths).append_column("pos", pa.array(positions, pa.int64()))


__all__ = ["dead_positions", "live_rows", "locate"]

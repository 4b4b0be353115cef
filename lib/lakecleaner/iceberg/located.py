"""Where each live row of a partition of an Iceberg table is (issue 80): its data file and
position, with the columns asked for, after the position-delete files the current snapshot
holds. What a merge-on-read sync of the latest values reads instead of the rows' values
(`locate`: the key and order columns of the rows a batch competes with, `iceberg.upserts`), and
what table maintenance reads of the files it rewrites (`live_rows`: every column), on the lake's
bounded pool. Delete files, like data files, are immutable: a sync reads each once per process.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.manifest import DataFile

from lakecleaner.engine.keys import key_hash
from lakecleaner.iceberg.entries import partition_files, unreadable_as
from lakecleaner.iceberg.file_keys import file_keys
from lakecleaner.iceberg.position_deletes import deleted_positions, read_position_deletes
from lakecleaner.io.concurrent import map_ordered
from lakecleaner.io.kept import Kept

#: How many bytes of delete files' positions a process keeps.
KEPT_DELETES_BYTES = 64 * 1024 * 1024

_DELETES: Kept[str, Mapping[str, np.ndarray]] = Kept(
    KEPT_DELETES_BYTES, lambda by_file: sum(p.nbytes + len(path) for path, p in by_file.items())
)


def _deleted_by(table: Any, delete_file: DataFile) -> Mapping[str, np.ndarray]:
    """The positions the delete file deletes, by data file (read from storage once per process)."""
    found = _DELETES.get(delete_file.file_path)
    if found is None:
        found = deleted_positions([read_position_deletes(table.io, delete_file)])
        _DELETES.put(delete_file.file_path, found)
    return found


def _dead_by_file(table: Any, deletes: list[DataFile], max_workers: int) -> dict[str, list[np.ndarray]]:
    """The deleted positions of each data file, an array (ascending) per delete file."""
    with unreadable_as(table):
        read = map_ordered(lambda f: _deleted_by(table, f), deletes, max_workers)
    out: dict[str, list[np.ndarray]] = {}
    for by_file in read:
        for path, positions in by_file.items():
            out.setdefault(path, []).append(positions)
    return out


def dead_positions(table: Any, deletes: list[DataFile], max_workers: int) -> Mapping[str, np.ndarray]:
    """The deleted positions of each data file (ascending, each once), from the delete files `deletes`."""
    return {
        path: arrays[0] if len(arrays) == 1 else np.unique(np.concatenate(arrays))
        for path, arrays in _dead_by_file(table, deletes, max_workers).items()
    }


def _alive(positions: np.ndarray, dead: list[np.ndarray]) -> np.ndarray:
    """Which of `positions` none of the ascending arrays `dead` holds."""
    alive = np.ones(len(positions), bool)
    for gone in dead:
        if len(gone):
            at = np.minimum(np.searchsorted(gone, positions), len(gone) - 1)
            alive &= gone[at] != positions
    return alive


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
            positions = positions[_alive(positions, [gone])]
            rows = rows.take(pa.array(positions))
        return _with_location(rows, file.file_path, positions)

    with unreadable_as(table):
        parts = map_ordered(live_of, files, max_workers)
    return pa.concat_tables(parts) if parts else _with_location(schema.empty_table(), "", np.arange(0))


def locate(
    table: Any, partition: int, columns: list[str], keys: pa.Array, log_start: int, max_workers: int
) -> pa.Table:
    """The live rows of `partition` in `table`'s current snapshot whose key is among `keys` or
    whose offset is below `log_start` (what a batch competes with, `iceberg.upserts`), with
    `columns` (the key and order columns), `file_path` and `pos`; each data file's columns read
    from storage once per process (`iceberg.file_keys`), so a sync's cost follows its batch. A
    row of another key whose hash is among `keys`' may come too."""
    files = partition_files(table, partition)
    dead = _dead_by_file(table, files.deletes, max_workers)
    arrow = table.schema().as_arrow()
    schema = pa.schema([arrow.field(c) for c in columns])
    wanted = key_hash(keys)

    def found_in(file: DataFile) -> pa.Table:
        found = file_keys(table.io, file.file_path, schema)
        positions = found.positions(wanted, log_start)
        positions = positions[_alive(positions, dead.get(file.file_path, []))]
        return _with_location(found.rows.take(pa.array(positions)), file.file_path, positions)

    with unreadable_as(table):
        parts = map_ordered(found_in, files.data, max_workers)
    return pa.concat_tables(parts) if parts else _with_location(schema.empty_table(), "", np.arange(0))


def _with_location(rows: pa.Table, file_path: str, positions: np.ndarray) -> pa.Table:
    paths = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows.num_rows, np.int32)), pa.array([file_path]))
    return rows.append_column("file_path", paths).append_column("pos", pa.array(positions, pa.int64()))


__all__ = ["dead_positions", "live_rows", "locate"]

"""Iceberg v2 position-delete files (issue 80): a Parquet file of (`file_path`, `pos`) rows, each
marking one row of a data file as deleted, which every v2 reader (pyiceberg, DuckDB's iceberg
extension, Spark) applies when it reads the data file.

Written as the spec asks (Iceberg spec, "Position Delete Files"): the two columns with their
reserved field ids (2147483546 and 2147483545), rows sorted by `file_path` then `pos`, and the
file's lower and upper bounds of both columns in its manifest entry, so that a reader matches a
delete file to the data files its path bounds cover (pyiceberg's `DeleteFileIndex`) instead of to
every file of the partition. A delete file holds paths and positions only: no key, value or
header bytes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.conversions import to_bytes
from pyiceberg.io import FileIO
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.table.locations import LocationProvider
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, StringType

from lakecleaner.errors import TableUnreadable

#: The reserved field ids of a position-delete file's columns (Iceberg spec, "Reserved Field IDs").
PATH_ID = 2147483546
POS_ID = 2147483545
#: The Arrow schema of a position-delete file, field ids in each field's metadata (`pos` a long as
#: the spec has it; pyiceberg 0.12's `POSITIONAL_DELETE_SCHEMA` says int, which DuckDB refuses).
POSITION_DELETES = pa.schema(
    [
        pa.field("file_path", pa.string(), nullable=False, metadata={b"PARQUET:field_id": str(PATH_ID).encode()}),
        pa.field("pos", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": str(POS_ID).encode()}),
    ]
)


def positions_of(file_path: str, positions: np.ndarray) -> pa.Table:
    """Rows marking `positions` of the data file at `file_path` deleted."""
    return pa.table(
        {"file_path": pa.array([file_path] * len(positions), pa.string()), "pos": pa.array(positions, pa.int64())},
        schema=POSITION_DELETES,
    )


def write_position_deletes(
    io: FileIO, locations: LocationProvider, partition: int, deletes: pa.Table, spec_id: int
) -> DataFile:
    """`deletes` (`file_path`, `pos`) of one Kafka partition written as a position-delete file
    under the table's data folder; its manifest entry's data file."""
    rows, data = encode_position_deletes(deletes)
    location = locations.new_data_location(f"{uuid.uuid4()}-deletes.parquet")
    with io.new_output(location).create(overwrite=False) as stream:
        stream.write(data)
    return delete_file(location, partition, rows, len(data), spec_id)


def encode_position_deletes(deletes: pa.Table) -> tuple[pa.Table, bytes]:
    """`deletes` sorted as the spec asks (by `file_path`, then `pos`), and as a Parquet file."""
    rows = deletes.cast(POSITION_DELETES).sort_by([("file_path", "ascending"), ("pos", "ascending")])
    sink = pa.BufferOutputStream()
    pq.write_table(rows, sink, compression="zstd")
    return rows, sink.getvalue().to_pybytes()


def delete_file(location: str, partition: int, rows: pa.Table, size_bytes: int, spec_id: int) -> DataFile:
    """The manifest entry's data file of the position-delete file at `location` holding `rows`
    (sorted), with the bounds of both columns."""
    paths, pos = rows.column("file_path"), rows.column("pos")
    file = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=location,
        file_format=FileFormat.PARQUET,
        partition=Record(partition),
        record_count=rows.num_rows,
        file_size_in_bytes=size_bytes,
        lower_bounds=_bounds(pc.min(paths).as_py(), pc.min(pos).as_py()),
        upper_bounds=_bounds(pc.max(paths).as_py(), pc.max(pos).as_py()),
    )
    file.spec_id = spec_id  # not a field `from_args` binds
    return file


def _bounds(path: str, pos: int) -> dict[int, bytes]:
    return {PATH_ID: to_bytes(StringType(), path), POS_ID: to_bytes(LongType(), pos)}


def covers(delete_file: DataFile, location: str) -> bool:
    """Whether a delete file's path bounds admit the data file at `location` (True without them)."""
    lower, upper = delete_file.lower_bounds, delete_file.upper_bounds
    low, high = (bounds.get(PATH_ID) if bounds else None for bounds in (lower, upper))
    return low is None or high is None or low <= location.encode() <= high


def read_position_deletes(io: FileIO, delete_file: DataFile) -> pa.Table:
    """The (`file_path`, `pos`) rows of a position-delete file; TableUnreadable, naming it, when
    it is missing or is not one."""
    try:
        with io.new_input(delete_file.file_path).open() as stream:
            rows = pq.read_table(stream, columns=["file_path", "pos"])
        return rows.cast(POSITION_DELETES)
    except (OSError, pa.ArrowException, KeyError) as exc:
        raise TableUnreadable(
            f"position-delete file {delete_file.file_path} cannot be read ({type(exc).__name__}: {exc}); "
            "`lakecleaner iceberg sync --rebuild` makes the table anew from the manifests"
        ) from exc


def deleted_positions(deletes: Iterable[pa.Table]) -> Mapping[str, np.ndarray]:
    """The deleted positions of each data file, from position-delete rows."""
    rows = pa.concat_tables(list(deletes) or [POSITION_DELETES.empty_table()])
    if rows.num_rows == 0:
        return {}
    rows = rows.sort_by("file_path")
    paths = rows.column("file_path").to_numpy(zero_copy_only=False)
    pos = rows.column("pos").to_numpy()
    starts = np.flatnonzero(np.r_[True, paths[1:] != paths[:-1]])
    ends = np.r_[starts[1:], len(paths)]
    return {str(paths[s]): np.unique(pos[s:e]) for s, e in zip(starts, ends, strict=True)}


__all__ = [
    "PATH_ID",
    "POSITION_DELETES",
    "POS_ID",
    "covers",
    "delete_file",
    "deleted_positions",
    "encode_position_deletes",
    "positions_of",
    "read_position_deletes",
    "write_position_deletes",
]

"""Where a key's rows are in a data file of the latest-values table, found without reading the
file again (issue 80: a commit's cost follows its batch, not the partition).

A sync competes its batch only with the live rows of the keys the batch holds and with the rows
below the log start (`iceberg.upserts`). A data file's columns that locate and order a key's
records (`engine.versions.source_columns`: never the values) are read once per process, with the
hashes of its keys sorted (`engine.keys.key_hash`); after that, the rows of a batch's keys are a
binary search per key, and the rows below the log start a comparison of the offsets. Data files
are immutable (each written at a location of its own), so what was read is kept by location (the
most recently used, up to `KEPT_BYTES`). A hash only narrows: the rows found may hold another key
of the same hash, and `iceberg.upserts` compares the keys themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from numpy.typing import NDArray
from pyiceberg.io import FileIO

from lakecleaner.engine.keys import key_hash
from lakecleaner.io.kept import Kept

#: How many bytes of data files' keys a process keeps (1M keys of 12 bytes: about 40 MB).
KEPT_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class FileKeys:
    """A data file's source columns (`rows`, every row in the file's order) with its keys' hashes
    sorted (`hashes`), the position of each (`order`), and its offsets (`offsets`)."""

    rows: pa.Table
    hashes: NDArray[np.uint64]
    order: NDArray[np.int64]
    offsets: NDArray[np.int64]

    @property
    def nbytes(self) -> int:
        return int(self.rows.nbytes + self.hashes.nbytes + self.order.nbytes + self.offsets.nbytes)

    def positions(self, hashes: NDArray[np.uint64], log_start: int) -> NDArray[np.int64]:
        """The positions, ascending and each once, of the rows whose key hashes to one of
        `hashes` or whose offset is below `log_start`."""
        left = np.searchsorted(self.hashes, hashes, side="left")
        counts = np.searchsorted(self.hashes, hashes, side="right") - left
        ends = np.cumsum(counts)
        matched = self.order[np.repeat(left - ends + counts, counts) + np.arange(int(ends[-1]) if len(ends) else 0)]
        if len(self.offsets) and self.offsets.min() < log_start:
            matched = np.concatenate([matched, np.flatnonzero(self.offsets < log_start)])
        return np.unique(matched)


def of_rows(rows: pa.Table) -> FileKeys:
    """The `FileKeys` of a data file's source columns (`key` and `offset` among them)."""
    hashes = key_hash(rows.column("key"))
    order = np.argsort(hashes, kind="stable").astype(np.int64)
    offsets = np.asarray(rows.column("offset").to_numpy(), np.int64)
    return FileKeys(rows, hashes[order], order, offsets)


_KEPT: Kept[tuple[str, tuple[str, ...]], FileKeys] = Kept(KEPT_BYTES, lambda keys: keys.nbytes)


def file_keys(io: FileIO, location: str, schema: pa.Schema) -> FileKeys:
    """The `FileKeys` of the data file at `location` with the columns of `schema` (read from
    storage once per process)."""
    key = (location, tuple(schema.names))
    found = _KEPT.get(key)
    if found is None:
        with io.new_input(location).open() as stream:
            found = of_rows(pq.read_table(stream, columns=schema.names).cast(schema))
        _KEPT.put(key, found)
    return found


__all__ = ["KEPT_BYTES", "FileKeys", "file_keys", "of_rows"]

"""A chunk of the sink's files as one table of records at their offsets (issue 75), and what in it
is not simply new: records at offsets the log already passed, and records two files hold at one
offset that differ.

Each file's records are placed by `record_offsets` (a file's own records up to the next file of
its kind; the rest, re-delivered by that file, get -1). Three sets come out:
- **after**: the records after the last offset appended (`previous`), in offset order: the append;
- **below**: the records of the files at offsets up to `previous` (a re-delivery under a new name,
  a file that arrived late): not appended, checked against the log (`adopt.late`);
- **overlaps**: where a file's re-delivered records differ from what the next file of its kind holds
  at the same offsets, in words naming both files: a conflict, never settled by which came later.
Each record carries the index of its file in the chunk (`file`), so that every finding names it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecleaner.adopt.connect_plan import Bundle
from lakecleaner.adopt.connect_read import BundleRecords
from lakecleaner.log.records import HEADER_TYPE

#: The columns of an assembled chunk: a record at its offset, and the index of its file.
CHUNK_SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64()),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("timestamp", pa.int64()),
        pa.field("headers", HEADER_TYPE),
        pa.field("file", pa.int32()),
    ]
)
#: The columns an append takes.
RECORD_COLUMNS = ["key", "value", "timestamp", "headers"]


@dataclass(frozen=True)
class Assembled:
    """A chunk's records after `previous` (in offset order), those at or below it, and the
    overlaps whose records differ."""

    after: pa.Table
    below: pa.Table
    overlaps: list[str]

    def offsets(self) -> np.ndarray:
        found: np.ndarray = self.after.column("offset").to_numpy()
        return found


def assemble(
    bundles: Sequence[Bundle], read: Sequence[BundleRecords], offsets: Sequence[np.ndarray], previous: int
) -> Assembled:
    """The chunk's records split by `previous` (the rules above)."""
    tables = [
        _table(records, file_offsets, n) for n, (records, file_offsets) in enumerate(zip(read, offsets, strict=True))
    ]
    every = pa.concat_tables(tables) if tables else CHUNK_SCHEMA.empty_table()
    offset = every.column("offset")
    after = every.filter(pc.greater(offset, previous))
    order = after.column("offset").to_numpy()
    if len(order) > 1 and not bool(np.all(order[1:] > order[:-1])):
        after = after.take(pc.sort_indices(after.column("offset")))
    below = every.filter(pc.and_(pc.greater_equal(offset, 0), pc.less_equal(offset, previous)))
    return Assembled(after.combine_chunks(), below.combine_chunks(), _overlaps(bundles, read, offsets))


def _table(records: BundleRecords, file_offsets: np.ndarray, n: int) -> pa.Table:
    return pa.table(
        {
            "offset": pa.array(file_offsets, pa.int64()),
            "key": records.keys,
            "value": records.values,
            "timestamp": records.timestamps,
            "headers": records.headers,
            "file": pa.array(np.full(len(records), n, np.int32)),
        },
        schema=CHUNK_SCHEMA,
    )


def _overlaps(bundles: Sequence[Bundle], read: Sequence[BundleRecords], offsets: Sequence[np.ndarray]) -> list[str]:
    """Where a value file's records past its own end (re-delivered by the next value file, -1 in
    `offsets`) differ from that file's records at the same offsets: each such pair, in words."""
    found = []
    for n, file_offsets in enumerate(offsets):
        redelivered = int(np.count_nonzero(file_offsets < 0))
        if not redelivered or bundles[n].main.tombstones:
            continue
        own = len(file_offsets) - redelivered
        start = bundles[n].start + own
        later = next(
            (m for m in range(n + 1, len(bundles)) if not bundles[m].main.tombstones and bundles[m].start == start),
            None,
        )
        if later is None:
            continue  # the next file of its kind is in another chunk
        width = min(redelivered, len(read[later]))
        differs = _differing(read[n], own, read[later], 0, width)
        if differs is not None:
            found.append(
                f"{bundles[n].main.key} and {bundles[later].main.key} both hold offset {start + differs} "
                f"(offsets {start}..{start + width - 1}) with other bytes"
            )
    return found


def _differing(a: BundleRecords, a_from: int, b: BundleRecords, b_from: int, width: int) -> int | None:
    """The first of `width` records (a's from `a_from`, b's from `b_from`) whose key or value
    differ, as an index into the run; None when they are the same."""
    if width <= 0:
        return None
    same = pc.and_(
        same_or_both_null(a.keys.slice(a_from, width), b.keys.slice(b_from, width)),
        same_or_both_null(a.values.slice(a_from, width), b.values.slice(b_from, width)),
    )
    if pc.all(same).as_py():
        return None
    return int(pc.index(same, False).as_py())


def same_or_both_null(a: pa.Array | pa.ChunkedArray, b: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Element-wise equality in which two nulls are equal."""
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    return pc.or_(pc.fill_null(pc.equal(a, b), False), both_null)


__all__ = ["CHUNK_SCHEMA", "RECORD_COLUMNS", "Assembled", "assemble", "same_or_both_null"]

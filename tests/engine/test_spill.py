"""Spill files written a share at a time (engine/spill.py): each bucket reads back its rows of every
share, in the order written, and a store that refuses the file fails with the file named."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lakecleaner.engine.spill import SpillWriter, read_spill, spill_path, write_spill
from lakecleaner.errors import StorageError
from lakecleaner.io import ObjectStore, open_store

PREFIX = "topic=changes/partition=0/"
SCHEMA = pa.schema([("key", pa.binary()), ("offset", pa.int64())])


def _store(tmp_path: Path) -> ObjectStore:
    """A local lake with the partition's `_staging/` folder, as the run's lease leaves it."""
    (tmp_path / PREFIX / "_staging").mkdir(parents=True)
    return open_store(f"file://{tmp_path}")


def _rows(offsets: range) -> tuple[pa.Table, np.ndarray]:
    """Rows at `offsets`, each in bucket offset % 3 (never bucket 3)."""
    at = np.array(offsets, np.int64)
    table = pa.table({"key": pa.array([b"k%d" % o for o in at]), "offset": pa.array(at)}, schema=SCHEMA)
    return table, (at % 3).astype(np.uint64)


def test_each_bucket_reads_back_its_rows_of_every_share_in_order(tmp_path: Path) -> None:
    """A task that spills share after share (the gate: a group at a time) holds one share; each
    bucket's Spill reads back that bucket's rows of every share, in the order written, and a
    bucket no share filled reads back empty, with the spill's columns."""
    store = _store(tmp_path)
    path = spill_path("run-1", "gate")
    shares = [range(0, 10), range(10, 25), range(25, 26)]
    with SpillWriter(store, PREFIX, path, SCHEMA, 4) as writer:
        for share in shares:
            writer.write(*_rows(share))
    spills = writer.spills()
    assert len(spills) == 4
    for b, spill in enumerate(spills[:3]):
        expected = [o for share in shares for o in share if o % 3 == b]
        back = read_spill(store, PREFIX, spill)
        assert back.column("offset").to_pylist() == expected
        assert back.column("key").to_pylist() == [b"k%d" % o for o in expected]
        assert spill.rows == len(expected)
        assert len(spill.ranges) == sum(1 for share in shares if any(o % 3 == b for o in share))
    empty = read_spill(store, PREFIX, spills[3])
    assert (empty.num_rows, empty.schema, spills[3].rows) == (0, SCHEMA, 0)


def test_one_share_is_the_same_spill_as_write_spill(tmp_path: Path) -> None:
    """`write_spill` (pass 1's scatter step) is a SpillWriter of one share."""
    store = _store(tmp_path)
    rows, buckets = _rows(range(0, 12))
    spills = write_spill(store, PREFIX, spill_path("run-1", "map"), rows, buckets, 3)
    assert [read_spill(store, PREFIX, s).column("offset").to_pylist() for s in spills] == [
        list(range(b, 12, 3)) for b in range(3)
    ]
    assert [len(s.ranges) for s in spills] == [1, 1, 1]


def test_a_spill_the_store_cannot_hold_fails_naming_the_file(tmp_path: Path) -> None:
    """A spill the store refuses (here: a local lake without the folder the run's lease makes)
    raises StorageError that names the file, not an OSError from inside Arrow."""
    store = open_store(f"file://{tmp_path}")
    path = spill_path("run-1", "gate")
    with pytest.raises(StorageError, match=path.replace(".", r"\.")), SpillWriter(store, PREFIX, path, SCHEMA, 2) as w:
        w.write(*_rows(range(4)))

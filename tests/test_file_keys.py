"""Issue 80: a data file's keys and a delete file's positions are read from storage once per
process (both are immutable), and a row is dead when any delete file holds its position."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.io.pyarrow import PyArrowFileIO

from lakecleaner.engine.keys import key_hash
from lakecleaner.iceberg.file_keys import file_keys
from lakecleaner.iceberg.located import _alive

SCHEMA = pa.schema([("key", pa.binary()), ("offset", pa.int64())])


def test_a_data_files_keys_are_read_from_storage_once(tmp_path: Path) -> None:
    path = tmp_path / "data.parquet"
    pq.write_table(pa.table({"key": [b"a", b"b", b"a"], "offset": [5, 6, 7], "value": [b"x"] * 3}), path)
    read = file_keys(PyArrowFileIO(), f"file://{path}", SCHEMA)
    os.remove(path)
    again = file_keys(PyArrowFileIO(), f"file://{path}", SCHEMA)
    assert again is read and read.rows.column_names == ["key", "offset"]  # never the values
    assert read.positions(key_hash(pa.array([b"a"])), 0).tolist() == [0, 2]
    assert read.positions(key_hash(pa.array([b"b"])), 6).tolist() == [0, 1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 30), max_size=20), st.lists(st.lists(st.integers(0, 30), max_size=15), max_size=4))
def test_a_position_is_dead_when_any_delete_file_holds_it(positions: list[int], deletes: list[list[int]]) -> None:
    asked = np.array(sorted(set(positions)), np.int64)
    dead = [np.array(sorted(set(d)), np.int64) for d in deletes]
    expected = [p not in {q for d in deletes for q in d} for p in asked.tolist()]
    assert _alive(asked, dead).tolist() == expected

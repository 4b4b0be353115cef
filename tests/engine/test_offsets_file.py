"""Offset sets written to the store by one step of a partition in key buckets and read back by the
next (engine/offsets_file.py): the same set, and bytes changed on the store are refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lakecleaner.engine.offset_set import OffsetSet
from lakecleaner.engine.offsets_file import (
    EXPECTED,
    KEPT,
    WINNERS,
    StoredOffsets,
    is_offsets_path,
    load_offsets,
    offsets_path,
    store_offsets,
)
from lakecleaner.engine.recopy import ERROR, REWRITTEN, RecopyTask, _run, offsets_files, stored_group_tasks
from lakecleaner.engine.storage import StoreSpec
from lakecleaner.engine.writer import OutputTarget
from lakecleaner.errors import ObjectNotFound, StorageError
from lakecleaner.io import open_store
from lakecleaner.lake import Lake
from lakecleaner.log.records import Record
from lakecleaner.log.segment_files import new_segment_path

PREFIX = "topic=changes/partition=0/"
NOW = 1_700_000_000_000
PATH = "_staging/run-1.winners-0-3.bin"


def _sets() -> list[OffsetSet]:
    rng = np.random.default_rng(7)
    sparse = np.unique(rng.integers(1_000, 1_000_000, 5_000))  # stored as gaps
    dense = np.unique(rng.integers(0, 2_000, 1_500))  # stored as a bitmap
    return [OffsetSet.of(sparse, 1_000, 1_000_000), OffsetSet.of(dense, 0, 2_000)]


@pytest.mark.parametrize("winners", _sets(), ids=["gaps", "bitmap"])
def test_offsets_written_by_one_step_read_back_the_same(tmp_path: Path, winners: OffsetSet) -> None:
    store = open_store(f"file://{tmp_path}")
    stored = store_offsets(store, PREFIX, PATH, winners)
    assert stored.empty.packed == b"" and stored.size == len(winners.packed)  # no offsets travel back
    read = load_offsets(store, PREFIX, stored)
    assert read == winners
    assert np.array_equal(read.offsets(), winners.offsets())


def test_offsets_changed_on_the_store_are_refused_not_used(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    winners = _sets()[0]
    stored = store_offsets(store, PREFIX, PATH, winners)
    damaged = bytearray(winners.packed)
    damaged[len(damaged) // 2] ^= 0xFF
    store.write(PREFIX + PATH, bytes(damaged))
    with pytest.raises(StorageError, match="offsets changed after they were written"):
        load_offsets(store, PREFIX, stored)
    store.write(PREFIX + PATH, winners.packed[:-1])
    with pytest.raises(StorageError, match=r"\d+ bytes read, \d+ written"):
        load_offsets(store, PREFIX, stored)
    store.delete(PREFIX + PATH)
    with pytest.raises(ObjectNotFound):
        load_offsets(store, PREFIX, stored)


def test_only_offsets_files_are_named_as_offsets_files() -> None:
    for kind in (WINNERS, KEPT, EXPECTED):
        assert is_offsets_path(offsets_path("20261129T0010-ab12", kind, 7, 33))
    others = ("_staging/r.map-0a1b2c3d4e5f.arrow", "_staging/r.lease", "manifest.json", "x.winners-1-2.bin")
    for other in (*others, "_staging/r.values-1-2.bin"):
        assert not is_offsets_path(other), other


def test_a_group_task_reads_its_share_from_the_store_and_refuses_a_changed_one(tmp_path: Path) -> None:
    """A partition in key buckets: the driver writes each group's share of the winners, the
    group's pass-2 task reads it, cleans the group by it and writes its expected offsets beside it
    for the gate; a share changed on the store fails the group, and cleans nothing by it."""
    lake = Lake.open(f"file://{tmp_path}")
    log = lake.create_topic("t").partition(0)
    log.append([Record(f"k{i % 4}".encode(), b"v", NOW) for i in range(10)], now_ms=NOW)
    (entry,) = log.manifest().segments[0].files
    target = OutputTarget("t", 0, log.prefix, new_segment_path(0), 0, 10, NOW, 1, NOW, NOW, NOW)
    winners = OffsetSet.of(np.arange(6, 10, dtype=np.int64), 0, 10)
    (task,) = stored_group_tasks(lake.store, "run-1", [RecopyTask(0, 0, 0, (entry,), 10, 0, target)], winners, 4)
    assert isinstance(task.kept, StoredOffsets) and task.kept.empty.packed == b""  # a path, not the offsets
    assert sorted(offsets_files("run-1", [task])) == sorted(
        log.prefix + p for p in (task.kept.path, task.expected_path)
    )
    result = _run(StoreSpec.of(lake), NOW, 0, task)
    assert result.status == REWRITTEN and result.file is not None and result.file.record_count == 4
    expected = result.expected.offsets
    assert isinstance(expected, StoredOffsets) and expected.path == task.expected_path
    assert load_offsets(lake.store, log.prefix, expected).offsets().tolist() == [6, 7, 8, 9]
    lake.store.write(log.prefix + task.kept.path, OffsetSet.of(np.arange(10, dtype=np.int64), 0, 10).packed)
    failed = _run(StoreSpec.of(lake), NOW, 0, task)
    assert failed.status == ERROR and failed.file is None
    assert "offsets changed after they were written" in str(failed.error)

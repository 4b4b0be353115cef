"""Pass 1's winners of a bucket of several, written to the store by its task and read back by the
driver (engine/winners_file.py): the same set, and bytes changed on the store are refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lakecleaner.engine.offset_set import OffsetSet
from lakecleaner.engine.winners_file import is_winners_path, load_winners, store_winners, winners_path
from lakecleaner.errors import ObjectNotFound, StorageError
from lakecleaner.io import open_store

PREFIX = "topic=changes/partition=0/"
PATH = "_staging/run-1.winners-0-3.bin"


def _sets() -> list[OffsetSet]:
    rng = np.random.default_rng(7)
    sparse = np.unique(rng.integers(1_000, 1_000_000, 5_000))  # stored as gaps
    dense = np.unique(rng.integers(0, 2_000, 1_500))  # stored as a bitmap
    return [OffsetSet.of(sparse, 1_000, 1_000_000), OffsetSet.of(dense, 0, 2_000)]


@pytest.mark.parametrize("winners", _sets(), ids=["gaps", "bitmap"])
def test_winners_written_by_a_task_read_back_the_same(tmp_path: Path, winners: OffsetSet) -> None:
    store = open_store(f"file://{tmp_path}")
    stored = store_winners(store, PREFIX, PATH, winners)
    assert stored.empty.packed == b"" and stored.size == len(winners.packed)  # no offsets travel back
    read = load_winners(store, PREFIX, stored)
    assert read == winners
    assert np.array_equal(read.offsets(), winners.offsets())


def test_winners_changed_on_the_store_are_refused_not_used(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    winners = _sets()[0]
    stored = store_winners(store, PREFIX, PATH, winners)
    damaged = bytearray(winners.packed)
    damaged[len(damaged) // 2] ^= 0xFF
    store.write(PREFIX + PATH, bytes(damaged))
    with pytest.raises(StorageError, match="winners changed after they were written"):
        load_winners(store, PREFIX, stored)
    store.write(PREFIX + PATH, winners.packed[:-1])
    with pytest.raises(StorageError, match=r"\d+ bytes read, \d+ written"):
        load_winners(store, PREFIX, stored)
    store.delete(PREFIX + PATH)
    with pytest.raises(ObjectNotFound):
        load_winners(store, PREFIX, stored)


def test_only_winners_files_are_named_as_winners_files() -> None:
    assert is_winners_path(winners_path("20261129T0010-ab12", 7, 33))
    for other in ("_staging/r.map-0a1b2c3d4e5f.arrow", "_staging/r.lease", "manifest.json", "x.winners-1-2.bin"):
        assert not is_winners_path(other), other

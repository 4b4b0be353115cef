"""Spill files: rows split into key buckets by one task and read a bucket at a time by others, so
that a partition too large for one task's memory is read and its keys hashed once, not once per
bucket. Pass 1's scatter step spills the input's keyed rows (`offset_map.scatter`); the quality
gate's record tasks spill the output's keys (`gate_rows`).

A spill file is an Arrow IPC file under the partition's `_staging/` (covered by the run's lease,
deleted when the step ends), holding the buckets one after another: a task's bucket is a range
of its record batches (`Spill`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from lakecleaner.io import ObjectStore
from lakecleaner.log.leases import STAGING


@dataclass(frozen=True)
class Spill:
    """One bucket's rows in a spill file: record batches [first, first + count) of an Arrow IPC
    file, relative to the partition."""

    path: str
    first: int
    count: int
    rows: int


def spill_path(run_id: str, step: str) -> str:
    """A new spill file's path, relative to the partition: `_staging/<run id>.<step>-<id>.arrow`."""
    return f"{STAGING}{run_id}.{step}-{uuid.uuid4().hex[:12]}.arrow"


def write_spill(
    store: ObjectStore, prefix: str, path: str, rows: pa.Table, buckets: NDArray[np.uint64], n: int
) -> tuple[Spill, ...]:
    """Write `rows` to the spill file `prefix + path`, bucket after bucket (`buckets`: each row's
    bucket, of `n`), each bucket's rows in their order; returns each bucket's Spill. Raises
    StorageError when the store fails."""
    # a stable sort keeps the rows' order within each bucket; numpy radix-sorts 16-bit numbers
    order = np.argsort(buckets.astype(np.uint16 if n <= 1 << 16 else np.uint64), kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(buckets.astype(np.int64), minlength=n))])
    rows = rows.take(pa.array(order))
    spills, written = [], 0
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, rows.schema) as writer:
        for b in range(n):
            size = int(bounds[b + 1] - bounds[b])
            batches = rows.slice(bounds[b], size).to_batches() or [pa.RecordBatch.from_pylist([], rows.schema)]
            for batch in batches:
                writer.write_batch(batch)
            spills.append(Spill(path, written, len(batches), size))
            written += len(batches)
    store.write(prefix + path, sink.getvalue().to_pybytes())
    return tuple(spills)


def read_spill(store: ObjectStore, prefix: str, spill: Spill) -> pa.Table:
    """One bucket's rows from a spill file (its batches only)."""
    with store.arrow_fs.open_input_file(store.arrow_path(prefix + spill.path)) as source:
        reader = pa.ipc.open_file(source)
        batches = [reader.get_batch(i) for i in range(spill.first, spill.first + spill.count)]
        return pa.Table.from_batches(batches, reader.schema)

"""When the engine gives back to the operating system the memory its allocators keep freed.

A process's two allocators keep what it frees for reuse: Arrow's (mimalloc, pyarrow's default on
Linux) and the C library's malloc, which numpy's arrays and Python's large objects come from.
glibc's keeps the freed arrays of a few MB (once a freed mmap'd block has raised its mmap
threshold, up to 32 MB) in its heaps and arenas, where the holes left between them only grow.

A Python worker runs a task's items one after another, each bounded by the engine
(log.cleaner.dedupe.buffer.size, a row group of a file): what the allocators keep in between is
not. Measured on a partition of 100M records in 34 key buckets (bench/compaction.py
`--case huge-partition`, 17 buckets a worker), giving back after each bucket: Arrow kept about
375 MB after each (its working set, which the next bucket reused), and with Arrow's alone given
back the floor the worker fell back to rose from 227 to 280 MB over the buckets (with glibc's
too: 176-178 MB from the first to the last), so that without giving back a worker's memory grew
with the buckets it ran, that is with the partition. So a worker gives back both
after each item of a task whose items run one after another (`sparkio.run_tasks`): it then holds
at most what one item used, and faults it in again once an item, not once an allocation
(mimalloc's `purge_delay` 0 did the latter: 19-30% slower on that partition). That cost nothing
measurable: the partition of 100M records 85.8-91.1 s against 84.1-94.9 s before, the
incremental case's (a) a median of 2.4 s either way; the peak memory of the high-cardinality
case 2.36-2.44 GB against 2.64-2.87 GB. Items that run at once in a task (pass 2's groups, the
gate's read-back: `sparkio.Overlap`) are not followed by a giving back: one would take the
memory the others are using and still need, and doing so made those cases 16-30% slower.
Arrow's allocator gives back only when asked (`workers.WORKER_ENV`).

The driver gives back the same way once it has joined a partition's key buckets' winners
(`offset_map`): the files are read on the I/O pool's threads, each buffer in its thread's malloc
arena, where it otherwise stays.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable
from functools import cache

import pyarrow as pa


def give_back() -> None:
    """Return to the operating system what Arrow's default pool and the C library's malloc keep
    freed in this process (`malloc_trim(0)`, where the C library is glibc)."""
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, or None on a C library without it (musl, macOS)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim

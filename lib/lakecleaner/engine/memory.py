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
with the buckets it ran, that is with the partition. A worker gave back after every item at first
(a task's items in order, `sparkio.run_tasks`), which held it to what one item used but made every
item fault its memory in again, and the kernel's share of a run followed the faults' cost, which
varies on a virtual machine with what the host took back meanwhile: 4 partitions of 2.5M
records (2 items a worker) 1.9-2.9 s with 70-80k page faults a run, 1.7-1.8 s without them. So a
worker now gives back only once its memory has grown by a bound past what it held after its
task's first item (`Growth`, `GROWTH_SLACK_BYTES`), whether the items run in order or at once:
what the allocators keep after an item is the next item's, or the next task's and run's, to
reuse (a Python worker serves the Spark application's tasks until it has been idle a minute,
`PythonWorkerFactory`), and what grows past the bound is given back: a pass-2 task of 100
groups (100M records) otherwise climbed 120-190 MB over them, and the gate's read-back of a
share of 100M records began each item after a task's first 50-70 MB higher. Items that ran at
once on the I/O pool's threads leave their memory in those threads' heaps, which the next step's
items in the task's thread do not reuse, so such a task gives back once they all have
(`sparkio.run_tasks`); on a local lake items never run at once (`sparkio.Overlap.of`).
Arrow's allocator gives back only when asked (`workers.WORKER_ENV`).

The driver gives back the same way once it has joined a partition's key buckets' winners
(`offset_map`), and again once each group's share of them is stored (`engine.run`), before
pass 2 begins: what it freed would otherwise stay resident through pass 2 and the gate, where the
workers peak. The winners files are read on the I/O pool's threads, each buffer in its thread's
malloc arena, and freed by the joining thread into that arena's free top, which glibc keeps up to
its trim threshold — by default twice the largest mmap'd block freed so far — and which
`malloc_trim` leaves alone in every arena but the main one: so the driver first fixes the
threshold (`trim_heap_tops`). Measured on a partition of 100M records in 34 key buckets: the
driver's memory through pass 2 and the gate 345-348 MB before, 228-230 MB after, the 226 MB it
began at (bench/README.md).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import cast

import pyarrow as pa

#: glibc's mallopt parameter M_TRIM_THRESHOLD.
_M_TRIM_THRESHOLD = -1
#: The free memory at the top of a malloc heap the driver keeps (`trim_heap_tops`).
HEAP_TOP_BYTES = 1 << 20
#: How far a worker's resident memory may grow between the items of a task before it
#: gives back (`Growth`): with 64 MiB a pass-2 task of 100 groups (100M records) ended 20-50 MB a
#: worker above one of 20 groups (20M records); with 16 MiB they end alike, in the same time
#: (bench/README.md, "Every step sampled, and two more things mended").
GROWTH_SLACK_BYTES = 16 << 20


def give_back() -> None:
    """Return to the operating system what Arrow's default pool and the C library's malloc keep
    freed in this process (`malloc_trim(0)`, where the C library is glibc)."""
    pa.default_memory_pool().release_unused()
    trim = _glibc("malloc_trim", (ctypes.c_size_t,))
    if trim is not None:
        trim(0)


def resident_bytes() -> int | None:
    """This process's resident memory, or None where /proc/self/statm is not to be read."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


class Growth:
    """Gives back between the items of a task once the worker's resident memory has grown by more
    than `slack` bytes over what it held after the first item since the last give-back: what the
    allocators keep between items grows with them (a pass-2 task of 100 groups at 100M records
    climbed from 477 to 595 MB, with none of it in use between items), so without a bound a
    worker's memory grows with the partition; a give-back after every item costs the next item
    its memory faulted in again (16-30% measured, and 70-80k page faults a run of 4 partitions of
    2.5M records). Nothing where /proc/self/statm is not to be read."""

    def __init__(
        self,
        slack: int = GROWTH_SLACK_BYTES,
        resident: Callable[[], int | None] = resident_bytes,
        release: Callable[[], None] = give_back,
    ) -> None:
        self.slack, self.resident, self.release = slack, resident, release
        self.floor: int | None = None

    def item_done(self) -> None:
        """Called as each item finishes."""
        now = self.resident()
        if now is None:
            return
        if self.floor is None:
            self.floor = now
        elif now > self.floor + self.slack:
            self.release()
            self.floor = None


@cache
def trim_heap_tops() -> None:
    """From now on in this process, glibc gives back the free memory at the top of any malloc heap,
    the I/O threads' arenas' included, beyond `HEAP_TOP_BYTES` as soon as a block is freed
    (mallopt M_TRIM_THRESHOLD, which also stops glibc from raising its thresholds as it goes).
    Nothing on a C library without mallopt."""
    mallopt = _glibc("mallopt", (ctypes.c_int, ctypes.c_int))
    if mallopt is not None:
        mallopt(_M_TRIM_THRESHOLD, HEAP_TOP_BYTES)


@cache
def _glibc(name: str, argtypes: tuple[type[ctypes._SimpleCData[int]], ...]) -> Callable[..., int] | None:
    """The C library's function `name` taking `argtypes` and returning an int, or None where the C
    library lacks it (`malloc_trim` and `mallopt` are glibc's: not on musl or macOS)."""
    library = ctypes.util.find_library("c")
    if library is None:
        return None
    try:
        function = getattr(ctypes.CDLL(library), name)
    except (OSError, AttributeError):
        return None
    function.argtypes, function.restype = argtypes, ctypes.c_int
    return cast(Callable[..., int], function)

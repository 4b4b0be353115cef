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
gate's read-back: `sparkio.Overlap`) are not each followed by a giving back: one would take the
memory the others are using and still need, and doing so made those cases 16-30% slower. Such a
task gives back only once the worker's memory has grown past its first item's by a bound
(`Growth`, `GROWTH_SLACK_BYTES`): a pass-2 task of 100 groups (100M records) otherwise climbed
120-190 MB over them. An item of such a task too heavy to overlap (`sparkio.OVERLAP_BYTES`) runs
alone, and is followed by a giving back as in a task of items in order: the gate's read-back of
a share of 100M records otherwise began each item after a task's first 50-70 MB higher.
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
#: How far a worker's resident memory may grow between the overlapping items of a task before it
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
    """Gives back between the items of a task that overlap them once the worker's resident memory
    has grown by more than `slack` bytes over what it held after the first item since the last
    give-back: such a task runs as many items as its partition has groups, and what the
    allocators keep between items grows with them (a pass-2 task of 100 groups at 100M records
    climbed from 477 to 595 MB, with none of it in use between items), so without a bound a
    worker's memory grows with the partition; a give-back after every item costs the next item
    its memory faulted in again (16-30% measured). Nothing where /proc/self/statm is not to be
    read."""

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

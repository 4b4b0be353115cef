"""Offset sets through the store, so that what travels through Spark between the steps of a
partition in key buckets is a path and a checksum, not the offsets:

- `WINNERS`: a key bucket's winners, written by its pass-1 task and read back by the driver;
- `KEPT`: a group's share of them, written by the driver and read by the group's pass-2 task;
- `EXPECTED`: the offsets the group's output must hold, written by that pass-2 task and read by
  the quality gate's task that checks the group.

A partition in key buckets is a large one (its map outgrew `log.cleaner.dedupe.buffer.size`), and
its winners hold a bit per offset of the partition. Returned through Spark, every one of them was
copied through the JVM at once (`sparkio.run_tasks` collects a step's results), whose heap G1 grows
to hold such arrays (100M records in 34 buckets: 1.2 GB of JVM against 0.6 GB at 20M, with under
240 MB of it live; bench/README.md); sent to the tasks, every group's share travelled in the
closure Spark broadcasts and every Python worker unpickles. Written to the store, what Spark
carries stays the same size whatever the partition's.

The files are under the partition's `_staging/` (`offsets_path`) and live for one run (the
winners for one round of pass 1, deleted with its spills; the others until the run ends).
Storage is untrusted: the reader checks the bytes against the length and CRC-32 the writer
returned, and a mismatch fails the partition, never the offsets it keeps.
"""

from __future__ import annotations

import dataclasses
import re
import zlib
from dataclasses import dataclass

from lakecleaner.engine.offset_set import OffsetSet
from lakecleaner.errors import StorageError
from lakecleaner.io import ObjectStore
from lakecleaner.log.leases import STAGING

WINNERS, KEPT, EXPECTED = "winners", "kept", "expected"

_NAME = re.compile(re.escape(STAGING) + rf"[^/]+\.(?:{WINNERS}|{KEPT}|{EXPECTED})-\d+-\d+\.bin")


def offsets_path(run_id: str, kind: str, partition: int, index: int) -> str:
    """Where an offsets file of `kind` goes, relative to the partition: named by the run, the
    partition and the bucket or group it belongs to (a name is written once in a run: a round of
    pass 1's winners are deleted before the next round names them again)."""
    return f"{STAGING}{run_id}.{kind}-{partition}-{index}.bin"


def is_offsets_path(path: str) -> bool:
    """Whether `path` (relative to a partition) is an offsets file: offsets only, never a key or a
    value (the erasure audit need not search one left behind by a crash)."""
    return _NAME.fullmatch(path) is not None


@dataclass(frozen=True)
class StoredOffsets:
    """Where a set of offsets was written (relative to the partition) and what it is: the set
    without its packed bytes, and the bytes' length and CRC-32."""

    path: str
    empty: OffsetSet
    size: int
    crc: int


def store_offsets(store: ObjectStore, prefix: str, path: str, offsets: OffsetSet) -> StoredOffsets:
    """Write `offsets`' packed bytes to `prefix + path` (a new name: one unconditional PUT).
    Raises StorageError when the store fails. A run's scratch, never committed: left unsynced."""
    store.write(prefix + path, offsets.packed, synced=False)
    empty = dataclasses.replace(offsets, packed=b"")
    return StoredOffsets(path, empty, len(offsets.packed), zlib.crc32(offsets.packed))


def load_offsets(store: ObjectStore, prefix: str, stored: StoredOffsets) -> OffsetSet:
    """The offsets `stored` names, read back. Raises StorageError when the store fails, the object
    is gone, or its bytes are not the ones written (length or CRC-32)."""
    key = prefix + stored.path
    data = store.read(key)
    if len(data) != stored.size or zlib.crc32(data) != stored.crc:
        reason = f"this run's offsets changed after they were written ({len(data)} bytes read, {stored.size} written)"
        raise StorageError("read", store.location(key), reason)
    return dataclasses.replace(stored.empty, packed=data)

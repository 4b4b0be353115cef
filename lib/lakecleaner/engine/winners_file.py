"""A key bucket's winners, written by its pass-1 task beside the run's spills and read by the
driver, so that what travels back through Spark is a path and a checksum, not the offsets.

A partition in key buckets is a large one (its map outgrew `log.cleaner.dedupe.buffer.size`), and
its buckets' winners together hold a few bits to bytes per offset of the partition: returned
through Spark, every one of them was copied through the JVM at once (`sparkio.run_tasks` collects
a step's results), whose heap G1 grows to hold such large arrays (100M records in 34 buckets:
1.2 GB of JVM against 0.6 GB at 20M, with under 240 MB of it live; bench/README.md). Written to the
store, what the JVM carries stays the same size whatever the partition's.

The file is under the partition's `_staging/` (`winners_path`), lives for one round of pass 1
and is deleted with the round's spills. Storage is untrusted: the driver checks the bytes it reads
against the length and CRC-32 the task returned, and a mismatch fails the partition, never the
offsets it keeps.
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

_NAME = re.compile(re.escape(STAGING) + r"[^/]+\.winners-\d+-\d+\.bin")


def winners_path(run_id: str, partition: int, bucket: int) -> str:
    """Where a bucket's task writes its winners, relative to the partition: named by the run, the
    partition and the bucket (a bucket is one task of its round, and a round's files are deleted
    before the next round names them again)."""
    return f"{STAGING}{run_id}.winners-{partition}-{bucket}.bin"


def is_winners_path(path: str) -> bool:
    """Whether `path` (relative to a partition) is a winners file: offsets only, never a key or a
    value (the erasure audit need not search one left behind by a crash)."""
    return _NAME.fullmatch(path) is not None


@dataclass(frozen=True)
class StoredWinners:
    """Where a bucket's winners were written (relative to the partition) and what they are: the
    set without its packed bytes, and the bytes' length and CRC-32."""

    path: str
    empty: OffsetSet
    size: int
    crc: int


def store_winners(store: ObjectStore, prefix: str, path: str, winners: OffsetSet) -> StoredWinners:
    """Write `winners`' packed bytes to `prefix + path` (a new name: one unconditional PUT).
    Raises StorageError when the store fails."""
    store.write(prefix + path, winners.packed)
    empty = dataclasses.replace(winners, packed=b"")
    return StoredWinners(path, empty, len(winners.packed), zlib.crc32(winners.packed))


def load_winners(store: ObjectStore, prefix: str, stored: StoredWinners) -> OffsetSet:
    """The winners `stored` names, read back. Raises StorageError when the store fails, the object
    is gone, or its bytes are not the ones written (length or CRC-32)."""
    key = prefix + stored.path
    data = store.read(key)
    if len(data) != stored.size or zlib.crc32(data) != stored.crc:
        reason = f"pass 1's winners changed after they were written ({len(data)} bytes read, {stored.size} written)"
        raise StorageError("read", store.location(key), reason)
    return dataclasses.replace(stored.empty, packed=data)

"""Objects a segment file's manifest entry references beside the file (its deletion vector, its key
index), read only through that entry and checked against it."""

from __future__ import annotations

from collections.abc import Callable

from lakecleaner.errors import CorruptSegment, ObjectNotFound
from lakecleaner.io import ObjectStore


def read_entry_object(
    store: ObjectStore, key: str, what: str, size_bytes: int, crc: int, crc_of: Callable[[bytes], int]
) -> bytes:
    """The bytes of the `what` ("deletion vector", "key index") at `key`, which its entry says are
    `size_bytes` long with the CRC `crc` (as `crc_of` finds it): CorruptSegment naming the object
    and the fix when it is missing or is another object."""
    location = store.location(key)
    try:
        blob = store.read(key)
    except (FileNotFoundError, ObjectNotFound):
        raise CorruptSegment(
            f"{what} {location} is missing; the manifest references it (restore it, or run "
            "`lakecleaner repair` to rebuild the manifest from the files present)"
        ) from None
    if len(blob) != size_bytes or (len(blob) >= 4 and crc_of(blob) != crc):
        raise CorruptSegment(
            f"{what} {location} is not the one its manifest entry describes ({len(blob)} bytes, "
            f"{size_bytes} expected, or another CRC); restore it or run `lakecleaner repair`"
        )
    return blob

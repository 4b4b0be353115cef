"""Key indexes of segment files (issue 79): beside a file the compaction wrote, its rows' offsets,
keys and key hashes in a form read without parsing, so that a later clean finds the rows of a
cleaned file whose key its dirty section holds without decoding the file's Parquet and hashing
its keys again (pass 1's probe, `engine.offset_map`), and the quality gate checks a kept file's
keys without them (`engine.gate_rows`).

The object is an Arrow IPC file (LZ4-compressed buffers) of one row per row of the segment file,
in the file's order: `offset` (int64), `key` (binary), `hash` (uint64, `engine.keys.key_hash` of
the key). Hashes only narrow the search; keys are compared exactly wherever they decide. It is
written once, by the quality gate of the run that wrote the file, from the file as read back (so
it is the file's, not what the writer meant to write), and is immutable: a deletion vector masks
its rows as it masks the file's, and it leaves with its file.

Storage is untrusted: an index is read only through its manifest entry (`KeyIndex`: path, size,
CRC-32 of the object and rows) and checked: size and CRC, then the IPC file, its schema, its row
count, keys present and offsets strictly increasing inside the file's range; anything else is
CorruptSegment naming the object and the fix. A file without an index is read as before.
"""

from __future__ import annotations

import re
import uuid
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from lakecleaner.errors import CorruptSegment
from lakecleaner.io import ObjectStore
from lakecleaner.io.strict_json import Fields
from lakecleaner.log.entry_objects import read_entry_object

SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("key", pa.binary(), nullable=False),
        pa.field("hash", pa.uint64(), nullable=False),
    ]
)
#: An index's path relative to its partition: beside its segment file, named for it, uniquely.
KEY_INDEX_PATH = re.compile(r"^(segments/[A-Za-z0-9_.=-]+\.parquet)\.keys-[0-9a-f]{12}\.arrow$")
_WRITE_OPTIONS = ipc.IpcWriteOptions(compression="lz4")
#: The most rows a file gets an index for: an index is read and written whole (about 30 bytes a
#: row of 15-byte keys), so a file past this (a segment of over 4Mi records) is read as one without.
MAX_ROWS = 1 << 22


@dataclass(frozen=True)
class KeyIndex:
    """A segment file's key index as its manifest entry references it: the object's path
    (relative to the partition), size, CRC-32 and rows (the file's)."""

    path: str
    size_bytes: int
    crc: int
    rows: int

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "size_bytes": self.size_bytes, "crc": self.crc, "rows": self.rows}

    @staticmethod
    def from_fields(f: Fields) -> KeyIndex:
        return KeyIndex(
            f.text("path", max_chars=1024),
            f.integer("size_bytes"),
            f.integer("crc", hi=(1 << 32) - 1),
            f.integer("rows"),
        )

    def problems(self, file_path: str, record_count: int) -> list[str]:
        """What is wrong with the entry for the segment file `file_path` of `record_count` rows."""
        found = KEY_INDEX_PATH.match(self.path)
        out = []
        if found is None or found.group(1) != file_path or ".." in self.path:
            out.append(f"the key index {self.path!r} of {file_path} is not an index of that file in segments/")
        if self.rows != record_count:
            out.append(f"the key index of {file_path} has {self.rows} rows, the file {record_count}")
        return out


def key_index_path(file_path: str) -> str:
    """A new path for a key index of the segment file `file_path`."""
    return f"{file_path}.keys-{uuid.uuid4().hex[:12]}.arrow"


def encode_key_index(rows: pa.Table) -> bytes:
    """The index object of a file whose rows are `rows` (offset, key, hash), in order."""
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, SCHEMA, options=_WRITE_OPTIONS) as writer:
        writer.write_table(rows.select(SCHEMA.names).cast(SCHEMA), max_chunksize=max(rows.num_rows, 1))
    return bytes(sink.getvalue())


def decode_key_index(blob: bytes, rows: int, offsets: tuple[int, int], location: str) -> pa.Table:
    """The rows of an index object of a file of `rows` rows over `offsets` [base, next);
    CorruptSegment naming `location` when it is not one."""

    def corrupt(reason: str) -> CorruptSegment:
        return CorruptSegment(
            f"key index {location} is corrupt ({reason}); run `lakecleaner repair` to rebuild the partition's "
            "manifest from its files (a file without its index is read as before)"
        )

    try:
        table = ipc.open_file(pa.py_buffer(blob)).read_all()
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as exc:
        raise corrupt(f"not an Arrow IPC file: {exc}") from None
    if not table.schema.equals(SCHEMA):
        raise corrupt(f"its columns are {table.schema.names}, not {SCHEMA.names}")
    if table.num_rows != rows:
        raise corrupt(f"{table.num_rows} rows, the file {rows}")
    if any(table.column(c).null_count for c in SCHEMA.names):
        raise corrupt("a row without its offset, key or hash")
    at = table.column("offset").to_numpy()
    if at.size and (at[0] < offsets[0] or at[-1] >= offsets[1] or not bool(np.all(at[1:] > at[:-1]))):
        raise corrupt(f"its offsets are not increasing inside the file's [{offsets[0]}, {offsets[1]})")
    return table


def write_key_index(store: ObjectStore, prefix: str, file_path: str, rows: pa.Table) -> KeyIndex:
    """Store the index of the segment file `file_path` (relative to the partition's `prefix`)
    whose rows are `rows` (offset, key, hash), and return its entry. Written unsynced, as a run's
    staged output: the run syncs it before the commit that names it (`ObjectStore.sync`)."""
    blob = encode_key_index(rows)
    path = key_index_path(file_path)
    store.write(prefix + path, blob, synced=False)
    return KeyIndex(path, len(blob), zlib.crc32(blob), rows.num_rows)


def read_key_index(store: ObjectStore, prefix: str, index: KeyIndex, offsets: tuple[int, int]) -> pa.Table:
    """The rows of the index its manifest entry describes, of a file over `offsets`, checked:
    CorruptSegment naming the object and the fix when it is missing or is not that index."""
    location = store.location(prefix + index.path)
    blob = read_entry_object(store, prefix + index.path, "key index", index.size_bytes, index.crc, zlib.crc32)
    return decode_key_index(blob, index.rows, offsets, location)


__all__ = [
    "KEY_INDEX_PATH",
    "MAX_ROWS",
    "SCHEMA",
    "KeyIndex",
    "decode_key_index",
    "encode_key_index",
    "key_index_path",
    "read_key_index",
    "write_key_index",
]

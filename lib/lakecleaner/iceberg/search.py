"""Whether a file of an Iceberg table's own folders holds a key's bytes, for the erasure audit.

Those files are full of ids, sizes, paths and random bytes (Avro sync markers, snapshot ids as
varints), so a short key such as `5` occurs in their bytes by chance. A file holds a key only
where a writer can put a record's bytes:
- Parquet data files another writer added: in their `key` column.
- Avro manifests and manifest lists (Iceberg's, read as records): a binary or text value equal to
  the key — a column's lower or upper bound (another writer's statistics), a partition value.
  Iceberg truncates a binary column's bounds to 16 bytes, so a longer key is also looked for by
  its first 16 bytes (a hit may then be another key of that prefix: the audit says "may hold").
  An Avro file that is not Iceberg's (no field ids) is searched block by block, decompressed.
- Table metadata JSON: Iceberg's own fields hold ids, times, paths and schemas, never a record;
  the entries a writer names itself — table properties, snapshot summaries, statistics blobs'
  properties, other than Iceberg's and lakecleaner's own — are searched by the token rule of the
  lake's own files (`policy.key_mentions`).
- Any other file (Puffin statistics, a foreign object): byte for byte.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.avro.codecs import KNOWN_CODECS
from pyiceberg.avro.file import AvroFile
from pyiceberg.io import InputFile, InputStream
from pyiceberg.table import snapshots
from pyiceberg.typedef import Record

from lakecleaner.policy.key_mentions import mentioned_in

#: How many leading bytes of a binary value Iceberg keeps in a column's bounds.
BOUND_BYTES = 16
_AVRO_MAGIC = b"Obj\x01"
_GZIP_MAGIC = b"\x1f\x8b"
#: Names of table properties and snapshot summary entries that Iceberg or lakecleaner write: counts,
#: sizes, ids, settings, never a record.
_OWN_PREFIXES = (
    "write.",
    "commit.",
    "read.",
    "schema.",
    "history.",
    "gc.",
    "snapshot.",
    "format-version",
    "partitions.",
    "lakecleaner.",
)
_SUMMARY_NAMES = frozenset(
    {
        snapshots.OPERATION,
        snapshots.ADDED_DATA_FILES,
        snapshots.ADDED_DELETE_FILES,
        snapshots.ADDED_EQUALITY_DELETES,
        snapshots.ADDED_EQUALITY_DELETE_FILES,
        snapshots.ADDED_FILE_SIZE,
        snapshots.ADDED_POSITION_DELETES,
        snapshots.ADDED_POSITION_DELETE_FILES,
        snapshots.ADDED_RECORDS,
        snapshots.CHANGED_PARTITION_COUNT_PROP,
        snapshots.DELETED_DATA_FILES,
        snapshots.DELETED_RECORDS,
        snapshots.PARTITION_SUMMARY_PROP,
        snapshots.REMOVED_DELETE_FILES,
        snapshots.REMOVED_EQUALITY_DELETES,
        snapshots.REMOVED_EQUALITY_DELETE_FILES,
        snapshots.REMOVED_FILE_SIZE,
        snapshots.REMOVED_POSITION_DELETES,
        snapshots.REMOVED_POSITION_DELETE_FILES,
        snapshots.TOTAL_DATA_FILES,
        snapshots.TOTAL_DELETE_FILES,
        snapshots.TOTAL_EQUALITY_DELETES,
        snapshots.TOTAL_FILE_SIZE,
        snapshots.TOTAL_POSITION_DELETES,
        snapshots.TOTAL_RECORDS,
    }
)


def probes(key: bytes) -> tuple[bytes, ...]:
    """The byte strings whose presence means a file may hold the key."""
    return (key,) if len(key) <= BOUND_BYTES else (key, key[:BOUND_BYTES])


def holds_key(name: str, data: bytes, key: bytes) -> bool:
    """Whether the file (its name, for the format; its bytes) holds the key or its bound prefix,
    by the rules above. Raises ValueError (or Arrow's errors) for a damaged file."""
    if name.endswith(".parquet"):
        parquet = pq.ParquetFile(io.BytesIO(data))
        if "key" not in parquet.schema_arrow.names:
            return False
        column = parquet.read(columns=["key"]).column("key")
        return bool(pc.any(pc.equal(column, pa.scalar(key, pa.binary()))).as_py())
    if data.startswith(_AVRO_MAGIC):
        return _avro_holds(data, key)
    if name.endswith(".metadata.json"):
        return _metadata_holds(data, key)
    return _bytes_hold(data, key)


def _bytes_hold(data: bytes, key: bytes) -> bool:
    """Whether the bytes hold the key or its bound prefix anywhere (a file read byte for byte)."""
    return any(probe in data for probe in probes(key))


def _avro_holds(data: bytes, key: bytes) -> bool:
    """Whether an Avro file holds a binary or text value equal to the key or its bound prefix
    (read as Iceberg's records), or, when it is not Iceberg's, the bytes in a block."""
    wanted = probes(key)
    with contextlib.ExitStack() as stack:
        try:
            avro = stack.enter_context(AvroFile[Record](_InMemory(data)))  # the header, the schema's field ids
        except ValueError:  # no Iceberg schema: any Avro file, searched block by block
            return any(_bytes_hold(block, key) for block in avro_blocks(data))
        return any(
            (value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")) in wanted
            for record in avro
            for value in _byte_and_text_values(record)
        )


def _byte_and_text_values(value: Any) -> Iterator[bytes | str]:
    """Every binary and text value inside a decoded Avro record, depth first."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, bytes | str):
            yield item
        elif isinstance(item, Record):
            stack.extend(item[i] for i in range(len(item)))
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)


def _metadata_holds(data: bytes, key: bytes) -> bool:
    """Whether table metadata JSON (gzip-compressed or not) mentions the key in an entry a writer
    names itself; one that is no JSON is searched byte for byte."""
    try:
        document = json.loads(gzip.decompress(data) if data.startswith(_GZIP_MAGIC) else data)
    except (ValueError, OSError, EOFError, RecursionError):
        return _bytes_hold(data, key)
    if not isinstance(document, dict):
        return _bytes_hold(data, key)
    return mentioned_in(_writers_entries(document), key)


def _writers_entries(document: dict[str, Any]) -> Iterator[str]:
    """The names and values of the metadata's free-form entries other than Iceberg's and
    lakecleaner's own: table properties, snapshot summaries, statistics blobs' properties."""
    entries: list[Any] = [document.get("properties")]
    entries += [s.get("summary") for s in _dicts(document.get("snapshots"))]
    for statistics in _dicts(document.get("statistics")):
        entries += [blob.get("properties") for blob in _dicts(statistics.get("blob-metadata"))]
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        for name, value in entry.items():
            if name not in _SUMMARY_NAMES and not str(name).startswith(_OWN_PREFIXES):
                yield str(name)
                yield str(value)


def _dicts(items: Any) -> list[dict[str, Any]]:
    """The objects of a JSON list (none when it is not a list)."""
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


class _InMemory(InputFile):
    """A file's bytes already read, as pyiceberg's Avro reader reads a file."""

    def __init__(self, data: bytes) -> None:
        super().__init__("memory")
        self._data = data

    def __len__(self) -> int:
        return len(self._data)

    def exists(self) -> bool:
        return True

    def open(self, seekable: bool = True) -> InputStream:
        return io.BytesIO(self._data)


def key_positions(data: bytes, key: bytes) -> np.ndarray:
    """The positions of a Parquet data file's rows (its bytes) whose `key` is the key."""
    column = pq.ParquetFile(io.BytesIO(data)).read(columns=["key"]).column("key")
    return np.flatnonzero(pc.equal(column, pa.scalar(key, pa.binary())).to_numpy(zero_copy_only=False))


def avro_blocks(data: bytes) -> list[bytes]:
    """The decompressed data blocks of an Avro object container file, and its header without the
    sync marker."""
    reader = io.BytesIO(data)
    reader.read(len(_AVRO_MAGIC))
    meta: dict[str, bytes] = {}
    while count := _long(reader):
        if count < 0:
            _long(reader)  # the block's size in bytes
            count = -count
        for _ in range(count):
            name = reader.read(_long(reader)).decode()
            meta[name] = reader.read(_long(reader))
    header = data[: reader.tell()]  # without the sync marker: 16 random bytes, no writer's text
    sync = reader.read(16)
    codec = KNOWN_CODECS.get(meta.get("avro.codec", b"null").decode())  # type: ignore[call-overload]
    blocks = [header]
    while reader.tell() < len(data):
        _long(reader)  # records in the block
        block = reader.read(_long(reader))
        blocks.append(block if codec is None else codec.decompress(block))
        if reader.read(16) != sync:
            raise ValueError("not an Avro object container file: a block does not end with the file's sync marker")
    return blocks


def _long(reader: io.BytesIO) -> int:
    """An Avro long (zig-zag varint)."""
    shift = result = 0
    while True:
        byte = reader.read(1)
        if not byte:
            raise ValueError("an Avro file ends inside a number")
        result |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return (result >> 1) ^ -(result & 1)
        shift += 7


__all__ = ["BOUND_BYTES", "avro_blocks", "holds_key", "key_positions", "probes"]

"""Whether a file of an Iceberg table's own folders holds a key's bytes, for the erasure audit.

Metadata JSON is searched as it is. Avro files (manifest lists, manifests: another writer's
column statistics hold keys) are compressed block by block, so each block is decompressed with
its codec and searched. Parquet data files another writer added are read by their `key` column.
Iceberg truncates a binary column's bounds to 16 bytes, so a longer key is also looked for by its
first 16 bytes (a hit may then be another key of that prefix: the audit says "may hold").
"""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.avro.codecs import KNOWN_CODECS

#: How many leading bytes of a binary value Iceberg keeps in a column's bounds.
BOUND_BYTES = 16
_AVRO_MAGIC = b"Obj\x01"


def probes(key: bytes) -> tuple[bytes, ...]:
    """The byte strings whose presence means a file may hold the key."""
    return (key,) if len(key) <= BOUND_BYTES else (key, key[:BOUND_BYTES])


def holds_key(name: str, data: bytes, key: bytes) -> bool:
    """Whether the file (its name, for the format; its bytes) holds the key or its bound prefix."""
    wanted = probes(key)
    if name.endswith(".parquet"):
        parquet = pq.ParquetFile(io.BytesIO(data))
        if "key" not in parquet.schema_arrow.names:
            return False
        column = parquet.read(columns=["key"]).column("key")
        return bool(pc.any(pc.equal(column, pa.scalar(key, pa.binary()))).as_py())
    if data.startswith(_AVRO_MAGIC):
        return any(probe in block for block in avro_blocks(data) for probe in wanted)
    return any(probe in data for probe in wanted)


def key_positions(data: bytes, key: bytes) -> np.ndarray:
    """The positions of a Parquet data file's rows (its bytes) whose `key` is the key."""
    column = pq.ParquetFile(io.BytesIO(data)).read(columns=["key"]).column("key")
    return np.flatnonzero(pc.equal(column, pa.scalar(key, pa.binary())).to_numpy(zero_copy_only=False))


def avro_blocks(data: bytes) -> list[bytes]:
    """The decompressed data blocks of an Avro object container file (the header too)."""
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
    sync = reader.read(16)
    codec = KNOWN_CODECS.get(meta.get("avro.codec", b"null").decode())  # type: ignore[call-overload]
    blocks = [data[: reader.tell()]]
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

"""Deletion vectors of segment files (issue 79): the rows of a file a clean removed without
rewriting the file, as a small object beside it that the manifest's file entry references.

A vector is stored as Iceberg v3's deletion-vector blob (Puffin spec, `deletion-vector-v1`): the
length of the magic and the vector as 4 bytes big-endian, the magic `D1 D3 39 64`, the positions
as a 64-bit Roaring bitmap in its portable form (the number of 32-bit bitmaps as 8 bytes
little-endian, then each bitmap's high 32 bits as 4 bytes little-endian and the bitmap in
CRoaring's portable format), and a CRC-32 of the magic and the vector as 4 bytes big-endian. So
the bytes are the ones an Iceberg v3 table would reference for the same file and rows, and the
object checks itself. Positions are the file's row positions (0 for its first row), each below
the file's record count.

Storage is untrusted: a vector is read only through its manifest entry (`DeletionVector`: its
key, size, CRC and cardinality) and every one of them is checked, with the blob's own length,
magic and CRC and its positions against the file's record count; anything else is
CorruptSegment naming the object and the fix. A vector object is immutable: a clean that removes
more rows of the file writes a new one (its name carries the manifest version that commits it),
and the old one leaves like a file that left the log (`file.delete.delay.ms`). A file's vectors
only grow (a row once removed stays removed), so `repair` adopts the largest readable one.
"""

from __future__ import annotations

import re
import struct
import uuid
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pyroaring import BitMap

from lakecleaner.errors import CorruptSegment
from lakecleaner.io import ObjectStore
from lakecleaner.io.strict_json import Fields
from lakecleaner.log.entry_objects import read_entry_object

MAGIC = bytes([0xD1, 0xD3, 0x39, 0x64])
#: A vector's path relative to its partition: beside its segment file, named for it, for the
#: manifest version it was written to commit into, and uniquely (two runs never share a name).
VECTOR_PATH = re.compile(r"^(segments/[A-Za-z0-9_.=-]+\.parquet)\.dv-(\d{1,19})-[0-9a-f]{12}\.bin$")
#: Positions below 2^31: a Java reader's limit, and far above a segment file's rows.
MAX_POSITION = (1 << 31) - 1


@dataclass(frozen=True)
class DeletionVector:
    """A segment file's vector as its manifest entry references it: the object's path (relative
    to the partition), size, the CRC-32 its blob ends with, how many rows it removes and, on a
    topic with `max.compaction.lag.ms`, `erase_by_ms`: when the rows it removes must be physically
    gone (KIP-354), the first clean after which rewrites the file (None: no deadline)."""

    path: str
    size_bytes: int
    crc: int
    cardinality: int
    erase_by_ms: int | None = None

    @staticmethod
    def of_blob(path: str, blob: bytes, cardinality: int, erase_by_ms: int | None = None) -> DeletionVector:
        """The entry of the vector `blob` stored at `path`, removing `cardinality` rows."""
        return DeletionVector(path, len(blob), blob_crc(blob), cardinality, erase_by_ms)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "size_bytes": self.size_bytes,
            "crc": self.crc,
            "cardinality": self.cardinality,
        }
        if self.erase_by_ms is not None:
            out["erase_by_ms"] = self.erase_by_ms
        return out

    @staticmethod
    def from_fields(f: Fields) -> DeletionVector:
        return DeletionVector(
            f.text("path", max_chars=1024),
            f.integer("size_bytes"),
            f.integer("crc", hi=(1 << 32) - 1),
            f.integer("cardinality"),
            f.optional_int("erase_by_ms"),
        )

    def problems(self, file_path: str, record_count: int) -> list[str]:
        """What is wrong with the entry for the segment file `file_path` of `record_count` rows."""
        found = VECTOR_PATH.match(self.path)
        out = []
        if found is None or found.group(1) != file_path or ".." in self.path:
            out.append(f"the deletion vector {self.path!r} of {file_path} is not a vector of that file in segments/")
        if not 0 < self.cardinality <= record_count:
            out.append(f"the deletion vector of {file_path} removes {self.cardinality} rows of its {record_count}")
        return out


def vector_path(file_path: str, version: int) -> str:
    """A new path for a vector of the segment file `file_path` meant for manifest `version`."""
    return f"{file_path}.dv-{version}-{uuid.uuid4().hex[:12]}.bin"


def distinct_positions(positions: NDArray[np.integer]) -> NDArray[np.int64]:
    """`positions` ascending, each once (as they are already when they come from `np.flatnonzero`:
    then without sorting them again)."""
    values = np.asarray(positions, np.int64)
    return values if bool(np.all(values[1:] > values[:-1])) else np.unique(values)


def encode_vector(positions: NDArray[np.integer]) -> bytes:
    """The deletion-vector blob of row positions (ascending or not; each kept once)."""
    values = distinct_positions(positions)
    if len(values) and (values[0] < 0 or values[-1] > MAX_POSITION):
        raise ValueError(f"deletion vector positions must be in [0, {MAX_POSITION}]")
    bitmap = BitMap(values.astype(np.uint32)) if len(values) else BitMap()
    vector = struct.pack("<Q", 1) + struct.pack("<I", 0) + bitmap.serialize() if len(values) else struct.pack("<Q", 0)
    body = MAGIC + vector
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


def blob_crc(blob: bytes) -> int:
    """The CRC-32 a blob ends with."""
    return int(struct.unpack(">I", blob[-4:])[0])


def decode_vector(blob: bytes, location: str) -> NDArray[np.int64]:
    """The ascending row positions of a deletion-vector blob; CorruptSegment naming `location`
    when it is not one."""

    def corrupt(reason: str) -> CorruptSegment:
        return CorruptSegment(
            f"deletion vector {location} is corrupt ({reason}); run `lakecleaner repair` to rebuild the "
            "partition's manifest from its files"
        )

    if len(blob) < 16:
        raise corrupt(f"{len(blob)} bytes")
    (length,) = struct.unpack(">I", blob[:4])
    body = blob[4:-4]
    if length != len(body) or body[:4] != MAGIC:
        raise corrupt("not a deletion-vector blob: wrong length or magic")
    if zlib.crc32(body) != blob_crc(blob):
        raise corrupt("its CRC does not match")
    return _positions(body[4:], corrupt)


def _positions(vector: bytes, corrupt: Any) -> NDArray[np.int64]:
    """The positions of a portable 64-bit Roaring bitmap (positions below 2^31 only)."""
    (count,) = struct.unpack("<Q", vector[:8])
    if count == 0 and len(vector) == 8:
        return np.zeros(0, np.int64)
    if count != 1 or len(vector) < 12 or struct.unpack("<I", vector[8:12])[0] != 0:
        raise corrupt("positions at or above 2^32")
    try:
        bitmap = BitMap.deserialize(vector[12:])
    except (ValueError, OverflowError) as exc:
        raise corrupt(f"its bitmap cannot be read: {exc}") from None
    if len(bitmap.serialize()) != len(vector) - 12:
        raise corrupt("bytes after its bitmap")
    positions = np.asarray(bitmap.to_array(), np.int64)
    if len(positions) and positions[-1] > MAX_POSITION:
        raise corrupt(f"a position above {MAX_POSITION}")
    return positions


def write_vector(
    store: ObjectStore,
    prefix: str,
    file_path: str,
    version: int,
    positions: NDArray[np.integer],
    erase_by_ms: int | None = None,
) -> DeletionVector:
    """Store the vector of `positions` of the segment file `file_path` (relative to the
    partition's `prefix`) for manifest `version`, and return its entry (with `erase_by_ms`).
    Written unsynced, as a run's staged output: the run syncs it before the commit that names it
    (`ObjectStore.sync`)."""
    values = distinct_positions(positions)
    blob = encode_vector(values)
    path = vector_path(file_path, version)
    store.write(prefix + path, blob, synced=False)
    return DeletionVector.of_blob(path, blob, len(values), erase_by_ms)


def read_vector(store: ObjectStore, prefix: str, vector: DeletionVector, record_count: int) -> NDArray[np.int64]:
    """The ascending positions of the vector its manifest entry describes, each checked:
    CorruptSegment naming the object and the fix when it is missing or is not that vector."""
    location = store.location(prefix + vector.path)
    blob = read_entry_object(store, prefix + vector.path, "deletion vector", vector.size_bytes, vector.crc, blob_crc)
    positions = decode_vector(blob, location)
    if len(positions) != vector.cardinality or (len(positions) and positions[-1] >= record_count):
        raise CorruptSegment(
            f"deletion vector {location} removes {len(positions)} rows up to position "
            f"{positions[-1] if len(positions) else -1}, its manifest entry says {vector.cardinality} of "
            f"{record_count}; restore it or run `lakecleaner repair`"
        )
    return positions


__all__ = [
    "MAGIC",
    "VECTOR_PATH",
    "DeletionVector",
    "blob_crc",
    "decode_vector",
    "encode_vector",
    "read_vector",
    "vector_path",
    "write_vector",
]

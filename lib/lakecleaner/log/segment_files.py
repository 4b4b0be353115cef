"""Reading and writing segment files: immutable Parquet (zstd, `column_compression`; offsets and
timestamps delta-encoded, `column_encodings`), rows sorted by offset.

Each file's key-value metadata carries the topic, partition, offsets, the segment it was
written for and its statistics, so that `lakecleaner repair` can rebuild a lost manifest
from the files alone (DESIGN section 2).
"""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from numpy.typing import NDArray

from lakecleaner.errors import CorruptSegment, LakeCleanerError, ObjectNotFound, StorageError
from lakecleaner.io import ObjectStore
from lakecleaner.io.concurrent import map_bounded
from lakecleaner.log.deletion_vectors import read_vector
from lakecleaner.log.key_index import SCHEMA as KEY_INDEX_SCHEMA
from lakecleaner.log.key_index import read_key_index
from lakecleaner.log.manifest import SegmentFile
from lakecleaner.log.records import SEGMENT_SCHEMA

#: The format of a segment file's own metadata (its footer's `format_version`).
FILE_FORMAT_VERSION = 1

META_PREFIX = "lakecleaner."
KIND_APPEND = "append"
KIND_COMPACTED = "compacted"
#: Parquet settings every segment writer uses (zstd, see `column_compression`; statistics on the
#: sorted columns).
COMPRESSION = "zstd"
#: The share of its size zstd must save on a sample of a column's bytes for the column to be
#: compressed, and the sample's size (`column_compression`).
COMPRESSED_SHARE = 0.97
COMPRESSION_SAMPLE_BYTES = 256 * 1024
ROW_GROUP_SIZE = 256 * 1024
STATISTICS_COLUMNS = ("offset", "timestamp")
#: The columns written with Parquet's DELTA_BINARY_PACKED encoding (`column_encodings`).
DELTA_COLUMNS = ("offset", "timestamp")


def column_encodings() -> dict[str, str]:
    """The columns written neither PLAIN nor with a dictionary: the offsets ascend through a file
    by steps of one (or a few, after compaction) and the timestamps mostly do (a producer's or a
    broker's clock), so DELTA_BINARY_PACKED stores each value as a bit-packed difference from the
    one before; PLAIN stored 8 bytes each, for zstd to squeeze. Measured on 434k records of
    100-byte values: the offsets 269 -> 6 KB, the timestamps 238 -> 93 KB; a write 71 -> 55 ms, a
    read of every column 45 -> 28 ms, of the offsets and keys 16 -> 11 ms. A standard encoding
    since Parquet 2.0, read by pyarrow, DuckDB, Trino and Spark (vectorised since 3.3)."""
    return dict.fromkeys(DELTA_COLUMNS, "DELTA_BINARY_PACKED")


def dictionary_columns(list_item: str) -> list[str]:
    """The columns written with dictionary encoding, for lists whose item is named `list_item`
    ("element", Parquet's compliant name, or the legacy "item"): the value and the header fields,
    which repeat in many topics. Offsets never repeat, keys do not after compaction and seldom
    within a file before it, timestamps seldom do: for them Parquet builds a dictionary and drops
    it at each row group once it passes 1 MB, which cost 10% of a write and made the file twice
    as slow to read (500k records of 100-byte values, measured)."""
    return ["value", f"headers.list.{list_item}.key", f"headers.list.{list_item}.value"]


def column_compression(table: pa.Table, list_item: str) -> dict[str, str]:
    """Each column's Parquet codec (by leaf path; lists' items named `list_item`, as in
    `dictionary_columns`) for a file that starts with `table`'s rows: zstd, except the value
    column when zstd does not shrink a sample of its first bytes (up to COMPRESSION_SAMPLE_BYTES)
    below COMPRESSED_SHARE of its size — encrypted payloads (crypto-shredding), producer-
    compressed or random bytes — which is stored uncompressed: as large as zstd would make it,
    without the compression's CPU on write (about 45% of writing a file of 100-byte random values,
    measured) nor the decompression on every read. A sample under 4 KiB says too little, so the
    column stays zstd."""
    codecs = dict.fromkeys(_leaf_paths(table.schema, list_item), COMPRESSION)
    sample = _leading_bytes(table.column("value"), COMPRESSION_SAMPLE_BYTES)
    if sample.size >= 4096 and pa.compress(sample, codec=COMPRESSION).size >= COMPRESSED_SHARE * sample.size:
        codecs["value"] = "none"
    return codecs


def _leaf_paths(schema: pa.Schema, list_item: str) -> list[str]:
    """The Parquet leaf column paths of a schema whose nested columns are lists of structs."""
    paths = []
    for f in schema:
        if pa.types.is_list(f.type):
            paths += [f"{f.name}.list.{list_item}.{child.name}" for child in f.type.value_type]
        else:
            paths.append(f.name)
    return paths


def _leading_bytes(column: pa.ChunkedArray, limit: int) -> pa.Buffer:
    """The bytes of a binary column's first values, at most `limit` of them (nulls hold none)."""
    for chunk in column.chunks:
        ends = np.frombuffer(chunk.buffers()[1], dtype=np.int32)[chunk.offset : chunk.offset + len(chunk) + 1]
        if len(ends) and ends[-1] > ends[0]:
            begin = int(ends[0])
            return chunk.buffers()[2].slice(begin, min(int(ends[-1]) - begin, limit))
    return pa.py_buffer(b"")


@dataclass(frozen=True)
class FileStats:
    """Statistics of one file's rows, as the manifest needs them."""

    record_count: int
    base_offset: int
    next_offset: int
    max_timestamp: int
    tombstone_count: int
    earliest_delete_horizon_ms: int | None


@dataclass(frozen=True)
class FileMeta:
    """What a segment file says about itself (its Parquet key-value metadata)."""

    topic: str
    partition: int
    segment_base_offset: int
    kind: str
    written_ms: int
    manifest_version: int
    first_batch_max_timestamp: int
    stats: FileStats
    format_version: int = FILE_FORMAT_VERSION
    #: A compacted file's segment times, which are its inputs' rather than its records' or its
    #: writing's: the inputs' largest timestamp and the last input's lastModified (None in an
    #: appended file, and in compacted files of earlier versions), so `repair` rebuilds the segment
    #: the commit wrote.
    segment_max_timestamp: int | None = None
    last_modified_ms: int | None = None
    #: The compaction run that wrote the file (None in an appended file, and in compacted files of
    #: earlier versions): while that run holds its lease, `repair` leaves the file out.
    run_id: str | None = None

    def to_metadata(self) -> dict[str, str]:
        values: Mapping[str, object] = {
            "format_version": self.format_version,
            "topic": self.topic,
            "partition": self.partition,
            "segment_base_offset": self.segment_base_offset,
            "kind": self.kind,
            "written_ms": self.written_ms,
            "manifest_version": self.manifest_version,
            "first_batch_max_timestamp": self.first_batch_max_timestamp,
            "base_offset": self.stats.base_offset,
            "next_offset": self.stats.next_offset,
            "record_count": self.stats.record_count,
            "max_timestamp": self.stats.max_timestamp,
            "tombstone_count": self.stats.tombstone_count,
            "earliest_delete_horizon_ms": (
                "" if self.stats.earliest_delete_horizon_ms is None else self.stats.earliest_delete_horizon_ms
            ),
            "segment_max_timestamp": self.segment_max_timestamp,
            "last_modified_ms": self.last_modified_ms,
            "run_id": self.run_id,
        }
        return {META_PREFIX + k: str(v) for k, v in values.items() if v is not None}

    @staticmethod
    def from_metadata(meta: Mapping[bytes, bytes], location: str) -> FileMeta:
        try:
            m = {k.decode()[len(META_PREFIX) :]: v.decode() for k, v in meta.items() if k.startswith(b"lakecleaner.")}
            horizon = m["earliest_delete_horizon_ms"]
            return FileMeta(
                topic=m["topic"],
                partition=int(m["partition"]),
                segment_base_offset=int(m["segment_base_offset"]),
                kind=m["kind"],
                written_ms=int(m["written_ms"]),
                manifest_version=int(m["manifest_version"]),
                first_batch_max_timestamp=int(m["first_batch_max_timestamp"]),
                stats=FileStats(
                    record_count=int(m["record_count"]),
                    base_offset=int(m["base_offset"]),
                    next_offset=int(m["next_offset"]),
                    max_timestamp=int(m["max_timestamp"]),
                    tombstone_count=int(m["tombstone_count"]),
                    earliest_delete_horizon_ms=int(horizon) if horizon else None,
                ),
                format_version=int(m["format_version"]),
                segment_max_timestamp=_optional_int(m.get("segment_max_timestamp")),
                last_modified_ms=_optional_int(m.get("last_modified_ms")),
                run_id=m.get("run_id"),
            )
        except (KeyError, ValueError) as exc:
            raise CorruptSegment(f"segment file {location} has no lakecleaner metadata ({exc})") from exc


def _optional_int(text: str | None) -> int | None:
    return None if text is None else int(text)


def table_stats(table: pa.Table, base_offset: int, next_offset: int) -> FileStats:
    """Statistics of a SEGMENT_SCHEMA table covering offsets [base_offset, next_offset)."""
    n = table.num_rows
    max_ts = pc.max(table.column("timestamp")).as_py() if n else None
    horizon = pc.min(table.column("delete_horizon_ms")).as_py() if n else None
    return FileStats(
        record_count=n,
        base_offset=base_offset,
        next_offset=next_offset,
        max_timestamp=-1 if max_ts is None else int(max_ts),
        tombstone_count=int(table.column("value").null_count) if n else 0,
        earliest_delete_horizon_ms=None if horizon is None else int(horizon),
    )


def new_segment_path(base_offset: int, directory: str = "segments") -> str:
    """A new, never-reused file name relative to the partition: <directory>/<base:020d>-<id>.parquet."""
    return f"{directory}/{base_offset:020d}-{uuid.uuid4().hex[:16]}.parquet"


def encode_segment_file(table: pa.Table, meta: FileMeta, *, row_group_size: int = ROW_GROUP_SIZE) -> bytes:
    """The Parquet bytes of a SEGMENT_SCHEMA table, with `meta` in the key-value metadata, in row
    groups of at most `row_group_size` records."""
    schema = SEGMENT_SCHEMA.with_metadata(meta.to_metadata())
    rows = table.cast(SEGMENT_SCHEMA)
    sink = pa.BufferOutputStream()
    pq.write_table(
        rows.replace_schema_metadata(schema.metadata),
        sink,
        compression=column_compression(rows, "element"),
        row_group_size=row_group_size,
        write_statistics=list(STATISTICS_COLUMNS),
        use_dictionary=dictionary_columns("element"),
        column_encoding=column_encodings(),
    )
    return bytes(sink.getvalue().to_pybytes())


#: Segment files the manifest says are at most this large are read with one GET of the whole
#: object and parsed in memory: a ranged read costs a HEAD, a GET of the footer and a GET per
#: column chunk, which on a store 20 ms away is most of the time a small partition takes.
WHOLE_OBJECT_BYTES = 4 * 1024 * 1024


#: Segment files one partition's task fetches at once (`FetchedFiles.prefetch`): with a
#: task per core, a few times the cores' worth of requests in flight, well under the pool's
#: lake.storage.max_concurrency.
PREFETCH_CONCURRENCY = 8


def _fetched_or_none(store: ObjectStore, key: str) -> bytes | None:
    """The object's bytes, or None when it is missing (its reader reports that, naming the file)."""
    try:
        return store.read(key)
    except (ObjectNotFound, FileNotFoundError):
        return None


class FetchedFiles:
    """What one task read of segment files, kept for its next read of them: the files it fetched
    whole (small ones, `WHOLE_OBJECT_BYTES`, or any it `prefetch`ed), up to `limit_bytes` in
    all, and the columns it parsed of a file read in part, up to `columns_limit_bytes`. Pass 1 of
    a partition fetches its files and parses the keys and offsets of every file; pass 2 then
    parses the same bytes rather than fetching them again (on a store 20 ms away, a GET per file
    saved; and both passes read the very same object), and parses only the columns pass 1 did not
    (the keys and offsets are a third of the time it takes to parse a file of 100-byte values).
    Lives as long as the one task that made it."""

    def __init__(self, limit_bytes: int, columns_limit_bytes: int) -> None:
        self.limit_bytes, self.columns_limit_bytes = limit_bytes, columns_limit_bytes
        self._kept: dict[str, bytes] = {}
        self._bytes = 0
        self._columns: dict[str, pa.Table] = {}
        self._columns_bytes = 0

    def prefetch(self, store: ObjectStore, files: Sequence[tuple[str, int]], max_workers: int) -> None:
        """Fetch whole, at once, `files` (key, size) in order while the limit allows, at most
        `PREFETCH_CONCURRENCY` at a time on the I/O pool, for a task whose two passes read every
        column of them between them. A file past `WHOLE_OBJECT_BYTES` is otherwise read by
        ranges, a GET per column chunk and pass, one after another: a partition of one 16 MB
        file took 23 requests to clean on a store 20 ms away, 0.46 s of waiting, where one GET
        of the whole file serves both passes. A file that cannot be fetched is left to the
        reader, whose error names it."""
        chosen, total = [], self._bytes
        for key, size in files:
            if key in self._kept:
                continue
            if total + size > self.limit_bytes:
                break
            chosen.append(key)
            total += size
        sizes = [1] * len(chosen)
        for index, data in map_bounded(
            partial(_fetched_or_none, store), chosen, sizes, len(chosen), PREFETCH_CONCURRENCY, max_workers
        ):
            if data is not None and self._bytes + len(data) <= self.limit_bytes:
                self._kept[chosen[index]] = data
                self._bytes += len(data)

    def holds(self, key: str) -> bool:
        """Whether the object's bytes are kept."""
        return key in self._kept

    def read(self, store: ObjectStore, key: str) -> bytes:
        """The object's bytes: kept ones, else fetched (and kept while the limit allows)."""
        data = self._kept.get(key)
        if data is None:
            data = store.read(key)
            if self._bytes + len(data) <= self.limit_bytes:
                self._kept[key] = data
                self._bytes += len(data)
        return data

    def keep_columns(self, key: str, table: pa.Table) -> None:
        """Keep the columns of the object's records parsed, beside those of it kept before (all of
        the object's rows: a partition's task reads a file its deletion vectors keep through its
        key index and its delete_horizon_ms, up to three times), while the limit allows."""
        kept = self._columns.get(key)
        new = table if kept is None else table.select([n for n in table.column_names if n not in kept.column_names])
        if kept is not None and (kept.num_rows != table.num_rows or new.num_columns == 0):
            return
        if self._columns_bytes + new.nbytes > self.columns_limit_bytes:
            return
        if kept is not None:
            for field in new.schema:
                kept = kept.append_column(field, new.column(field.name))
        self._columns[key] = table if kept is None else kept
        self._columns_bytes += new.nbytes

    def columns(self, key: str, names: Sequence[str]) -> pa.Table | None:
        """The kept columns `names` of the object (still kept), None unless all are kept."""
        table = self._columns.get(key)
        if table is None or not set(names) <= set(table.column_names):
            return None
        return table.select(list(names))

    def take_columns(self, key: str) -> pa.Table | None:
        """The columns kept of the object, no longer kept (its next read is its last)."""
        table = self._columns.pop(key, None)
        if table is not None:
            self._columns_bytes -= table.nbytes
        return table


def read_segment_file(
    store: ObjectStore,
    key: str,
    *,
    columns: list[str] | None = None,
    expected: SegmentFile | None = None,
    size_bytes: int | None = None,
    fetched: FetchedFiles | None = None,
    physical: bool = False,
) -> pa.Table:
    """Read a segment file whole (optionally only some columns), as `read_segment_row_groups`
    reads it a row group at a time, with the same checks: the rows its entry's deletion vector
    removes are left out unless `physical` (every row stored, at its position). Some columns read
    through `fetched` are kept there for the task's next read of the file
    (`FetchedFiles.keep_columns`)."""
    dead = None if physical else _removed(store, key, expected)
    table = fetched.columns(key, columns) if fetched is not None and columns is not None else None
    if table is None:
        with _segment_file(store, key, expected, size_bytes, fetched) as parquet:
            table = parquet.read(columns=columns)
    if fetched is not None and columns is not None:
        fetched.keep_columns(key, table)
    return _without(table, dead, 0)


def read_segment_row_groups(
    store: ObjectStore,
    key: str,
    *,
    columns: list[str] | None = None,
    expected: SegmentFile | None = None,
    size_bytes: int | None = None,
    fetched: FetchedFiles | None = None,
) -> Iterator[pa.Table]:
    """A segment file's rows a row group at a time (at most `ROW_GROUP_SIZE` rows in the files
    lakecleaner writes), so that a task holds one row group of a file however large the file is;
    with the checks of `_segment_file`, all made before the first row group is yielded, and
    without the rows its entry's deletion vector removes. Columns the task parsed before
    (`FetchedFiles.keep_columns`) are not parsed again."""
    dead = _removed(store, key, expected)
    with _segment_file(store, key, expected, size_bytes, fetched) as parquet:
        kept = fetched.take_columns(key) if fetched is not None else None
        if kept is not None and kept.num_rows == parquet.metadata.num_rows:
            groups = _joined_row_groups(parquet, kept, columns)
        else:
            groups = (parquet.read_row_group(index, columns=columns) for index in range(parquet.num_row_groups))
        start = 0
        for rows in groups:
            yield _without(rows, dead, start)
            start += rows.num_rows


def read_file_key_index(store: ObjectStore, prefix: str, file: SegmentFile, fetched: FetchedFiles | None) -> pa.Table:
    """The rows of the file's key index (`log.key_index`; the file has one), as the task read them
    before while `fetched` still holds them: a partition's pass 1 and its gate read each index
    once."""
    assert file.key_index is not None
    key = prefix + file.key_index.path
    table = fetched.columns(key, KEY_INDEX_SCHEMA.names) if fetched is not None else None
    if table is None:
        table = read_key_index(store, prefix, file.key_index, (file.base_offset, file.next_offset))
        if fetched is not None:
            fetched.keep_columns(key, table)
    return table


def live_rows(store: ObjectStore, prefix: str, file: SegmentFile) -> NDArray[np.bool_]:
    """Which of the file's rows (as stored) readers read: all but those its deletion vector removes."""
    live = np.ones(file.record_count, bool)
    if file.deletion_vector is not None:
        live[read_vector(store, prefix, file.deletion_vector, file.record_count)] = False
    return live


def _removed(store: ObjectStore, key: str, expected: SegmentFile | None) -> NDArray[np.int64] | None:
    """The positions the entry's deletion vector removes from the file at `key` (None without one)."""
    if expected is None or expected.deletion_vector is None:
        return None
    prefix = key.removesuffix(expected.path)
    return read_vector(store, prefix, expected.deletion_vector, expected.record_count)


def _without(rows: pa.Table, dead: NDArray[np.int64] | None, start: int) -> pa.Table:
    """`rows` (the file's from position `start`) without those at the ascending positions `dead`."""
    if dead is None or not len(dead):
        return rows
    low, high = np.searchsorted(dead, [start, start + rows.num_rows])
    if low == high:
        return rows
    alive = np.ones(rows.num_rows, bool)
    alive[dead[low:high] - start] = False
    return rows.take(pa.array(np.flatnonzero(alive)))


def _joined_row_groups(parquet: pq.ParquetFile, kept: pa.Table, wanted: list[str] | None) -> Iterator[pa.Table]:
    """The `wanted` columns (None: every one) of each row group of `parquet`: those `kept` holds
    (parsed from the whole file before) cut to the row group's rows, the others parsed now."""
    schema = parquet.schema_arrow
    if wanted is not None:
        schema = pa.schema([schema.field(name) for name in wanted])
    rest = [name for name in schema.names if name not in kept.column_names]
    start = 0
    for index in range(parquet.num_row_groups):
        rows = parquet.metadata.row_group(index).num_rows
        cut = kept.slice(start, rows)
        parsed = parquet.read_row_group(index, columns=rest) if rest else cut
        start += rows
        columns = [cut.column(name) if name in kept.column_names else parsed.column(name) for name in schema.names]
        yield pa.Table.from_arrays(columns, schema=schema)


@contextlib.contextmanager
def _segment_file(
    store: ObjectStore,
    key: str,
    expected: SegmentFile | None,
    size_bytes: int | None,
    fetched: FetchedFiles | None,
) -> Iterator[pq.ParquetFile]:
    """A segment file opened for reading; raise CorruptSegment naming the file and the reason
    when it is missing, unreadable (while it is open too), or is not the file the manifest's
    entry (`expected`) describes: its footer must name the partition of its key and the entry's
    offsets and record count (`check_identity`), so a file swapped for another is never served,
    and must count the entry's records. A file the entry (or `size_bytes`, without one) says is
    small (`WHOLE_OBJECT_BYTES`) is fetched whole (through `fetched`, when the task keeps what it
    fetched), as is one `fetched` holds (`FetchedFiles.prefetch`); a larger one is read by
    ranges, only the columns asked for.

    Read with `ParquetFile` rather than `pq.read_table`, whose dataset machinery imports pandas
    (about a second in every fresh Spark Python worker)."""
    location = store.location(key)
    try:
        size = expected.size_bytes if expected is not None else size_bytes
        if fetched is not None and fetched.holds(key):
            yield _checked(pa.BufferReader(fetched.read(store, key)), key, expected, location)
        elif size is not None and size <= WHOLE_OBJECT_BYTES:
            data = fetched.read(store, key) if fetched is not None else store.read(key)
            yield _checked(pa.BufferReader(data), key, expected, location)
        else:
            with store.arrow_fs.open_input_file(store.arrow_path(key)) as source:
                yield _checked(source, key, expected, location)
    except (FileNotFoundError, ObjectNotFound) as exc:
        raise CorruptSegment(
            f"segment file {location} is missing; the manifest references it "
            "(restore the file, or run `lakecleaner repair` to rebuild the manifest from the files present)"
        ) from exc
    except (pa.ArrowInvalid, OSError) as exc:
        raise read_failure(exc, location) from exc


def _same_type(found: pa.DataType, wanted: pa.DataType) -> bool:
    """Whether a column's type is the segment schema's (a list's item may have any name: "element"
    in compliant Parquet, "item" in files of older writers)."""
    if pa.types.is_list(wanted):
        return pa.types.is_list(found) and _same_type(found.value_type, wanted.value_type)
    if pa.types.is_struct(wanted):
        return (
            pa.types.is_struct(found)
            and [f.name for f in found] == [f.name for f in wanted]
            and all(_same_type(f.type, w.type) for f, w in zip(found, wanted, strict=True))
        )
    return bool(found.equals(wanted))


def check_schema(schema: pa.Schema, location: str) -> None:
    """CorruptSegment unless a file's columns are the segment schema's, with its types: a file whose
    schema lies (a column dropped, renamed or of another type) would otherwise fail deep inside a
    read, a compaction or an audit with an error that names neither the file nor the fix."""
    found = {f.name: f.type for f in schema}
    problems = [f"column {f.name} is missing" for f in SEGMENT_SCHEMA if f.name not in found]
    problems += [
        f"column {f.name} is {found[f.name]}, not {f.type}"
        for f in SEGMENT_SCHEMA
        if f.name in found and not _same_type(found[f.name], f.type)
    ]
    problems += [f"column {name} is not a segment column" for name in found if name not in SEGMENT_SCHEMA.names]
    if problems:
        raise CorruptSegment(
            f"segment file {location} does not have the segment schema ({'; '.join(problems[:4])}); restore the "
            "file lakecleaner wrote, or remove it from the log (`lakecleaner repair --force` leaves out what it "
            "cannot read)"
        )


def _checked(source: pa.NativeFile, key: str, expected: SegmentFile | None, location: str) -> pq.ParquetFile:
    parquet = pq.ParquetFile(source)
    check_schema(parquet.schema_arrow, location)
    if expected is not None:
        check_identity(FileMeta.from_metadata(parquet.schema_arrow.metadata or {}, location), key, expected)
        rows = parquet.metadata.num_rows
        if rows != expected.record_count:
            raise CorruptSegment(
                f"segment file {location} holds {rows} records but the manifest expects {expected.record_count}"
            )
    return parquet


_PARTITION_OF_KEY = re.compile(r"(?:^|/)topics/([^/]+)/partition=(\d+)/segments/[^/]+$")


def check_identity(meta: FileMeta, key: str, expected: SegmentFile) -> None:
    """Raise CorruptSegment unless the file's own metadata matches the manifest entry and the
    partition its key lies in (topic, partition, base and next offset, record count)."""
    found = _PARTITION_OF_KEY.search(key)
    claimed = (meta.topic, meta.partition, meta.stats.base_offset, meta.stats.next_offset, meta.stats.record_count)
    wanted = (
        found.group(1) if found else meta.topic,
        int(found.group(2)) if found else meta.partition,
        expected.base_offset,
        expected.next_offset,
        expected.record_count,
    )
    if claimed != wanted:
        raise CorruptSegment(
            f"segment file {key} is not the file its manifest entry describes: the file holds {meta.topic}-"
            f"{meta.partition} offsets [{claimed[2]}, {claimed[3]}) ({claimed[4]} records), the manifest expects "
            f"{wanted[0]}-{wanted[1]} [{wanted[2]}, {wanted[3]}) ({wanted[4]} records); restore the right file "
            "or run `lakecleaner repair`"
        )


def read_failure(exc: Exception, location: str) -> LakeCleanerError:
    """Transient is not corrupt: an error of the storage layer (an S3 error after the filesystem's
    retries, an OS-level I/O error) is a StorageError, so nothing treats a good file it could not
    reach as damaged (repair would leave it out, and gc delete it). Only a file that was read and
    failed to parse as Parquet is CorruptSegment."""
    text = str(exc)
    if isinstance(exc, OSError) and ("AWS Error" in text or exc.errno is not None):
        return StorageError("read", location, f"{text[:300]}; check that the storage endpoint is reachable")
    if isinstance(exc, OSError) and "not found" in text.lower():
        return CorruptSegment(f"segment file {location} is missing: {text}")
    return CorruptSegment(f"segment file {location} is unreadable: {text}")


def read_file_meta(store: ObjectStore, key: str) -> FileMeta:
    """A segment file's own metadata, from its Parquet footer only."""
    location = store.location(key)
    try:
        with store.arrow_fs.open_input_file(store.arrow_path(key)) as f:
            schema = pq.read_schema(f)
    except FileNotFoundError as exc:
        raise ObjectNotFound("read", location, "no such object") from exc
    except (pa.ArrowInvalid, OSError) as exc:
        raise read_failure(exc, location) from exc
    check_schema(schema, location)
    return FileMeta.from_metadata(schema.metadata or {}, location)


def write_segment_file(
    store: ObjectStore, partition_prefix: str, path: str, data: bytes, meta: FileMeta
) -> SegmentFile:
    """Write one encoded file at `path` (relative to the partition); returns its manifest entry."""
    store.write(partition_prefix + path, data)
    return SegmentFile(path, meta.stats.base_offset, meta.stats.next_offset, meta.stats.record_count, len(data))

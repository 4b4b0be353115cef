"""Streaming writer of one compacted segment file.

Output rows are written as they are filtered, so a task holds one input file at a time rather than a
whole group. A small output (`whole`: its group's input is at most segment_files.WHOLE_OBJECT_BYTES;
or one row group of at most that, known when it closes) is built in memory and stored with one PUT
of the store's own client; a larger one streams through pyarrow's filesystem (multipart on S3),
whose output stream costs several requests and milliseconds of CPU to open and close — most of a
tiny partition's write on a store far away. The file's statistics are only known at the end, so its
lakecleaner metadata (segment_files.FileMeta) goes into the Parquet footer when the writer closes,
and the Arrow schema is not stored (it would carry the metadata of the moment the writer opened):
without it, nested lists are written with Parquet's legacy element name so the file reads back with
exactly SEGMENT_SCHEMA. Compression, row groups, statistics, dictionaries and encodings are those of
segment_files.encode_segment_file.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakecleaner.io import ObjectStore
from lakecleaner.log.manifest import SegmentFile
from lakecleaner.log.records import SEGMENT_SCHEMA
from lakecleaner.log.segment_files import (
    KIND_COMPACTED,
    ROW_GROUP_SIZE,
    STATISTICS_COLUMNS,
    WHOLE_OBJECT_BYTES,
    FileMeta,
    FileStats,
    column_compression,
    column_encodings,
    dictionary_columns,
)


@dataclass(frozen=True)
class OutputTarget:
    """Where and for what a compacted file is written (the `FileMeta` fields known up front)."""

    topic: str
    partition: int
    prefix: str
    path: str
    base_offset: int
    next_offset: int
    written_ms: int
    manifest_version: int
    first_batch_max_timestamp: int
    max_timestamp: int
    last_modified_ms: int
    #: The run that writes it: its lease on the partition keeps `repair` from adopting the file.
    run_id: str | None = None


class SegmentWriter:
    """Writes SEGMENT_SCHEMA batches to one new file; opens it only when its first row group is
    written. With `whole`, or when the whole file is one row group of at most
    `WHOLE_OBJECT_BYTES` held until it closes (a large partition compacted to few records), the
    file is built in memory and written with one `store.write`: on S3 one PUT rather than a
    multipart upload's three requests, one after another. Either way the file is left unsynced: the
    run syncs its staged files before the commit that names them (`ObjectStore.sync`)."""

    def __init__(self, store: ObjectStore, target: OutputTarget, *, whole: bool) -> None:
        self.store = store
        self.target = target
        self.whole = whole
        #: Whether the open file is built in memory (chosen when its first row group is written).
        self._in_memory = whole
        self._sink: pa.NativeFile | None = None
        self._writer: pq.ParquetWriter | None = None
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._rows = 0
        self._max_timestamp = -1
        self._tombstones = 0
        self._earliest_horizon: int | None = None

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        self._observe(table)
        self._pending.append(table)
        self._pending_rows += table.num_rows
        if self._pending_rows >= ROW_GROUP_SIZE:
            self._flush()

    def _observe(self, table: pa.Table) -> None:
        self._rows += table.num_rows
        self._max_timestamp = max(self._max_timestamp, int(pc.max(table.column("timestamp")).as_py()))
        self._tombstones += table.column("value").null_count
        horizon = pc.min(table.column("delete_horizon_ms")).as_py()
        if horizon is not None:
            self._earliest_horizon = horizon if self._earliest_horizon is None else min(self._earliest_horizon, horizon)

    def _flush(self, closing: bool = False) -> None:
        if not self._pending:
            return
        table = pa.concat_tables(self._pending).cast(SEGMENT_SCHEMA)
        if self._writer is None:
            self._in_memory = self.whole or (closing and table.nbytes <= WHOLE_OBJECT_BYTES)
            self._sink = self._open_sink()
            self._writer = pq.ParquetWriter(
                self._sink,
                SEGMENT_SCHEMA,
                compression=column_compression(table, "item"),
                write_statistics=list(STATISTICS_COLUMNS),
                store_schema=False,
                use_dictionary=dictionary_columns("item"),
                column_encoding=column_encodings(),
                use_compliant_nested_type=False,
            )
        self._writer.write_table(table, row_group_size=ROW_GROUP_SIZE)
        self._pending, self._pending_rows = [], 0

    def _open_sink(self) -> pa.NativeFile:
        if self._in_memory:
            return pa.BufferOutputStream()
        return self.store.arrow_fs.open_output_stream(self._arrow_path())

    def _arrow_path(self) -> str:
        return self.store.arrow_path(self.target.prefix + self.target.path)

    def close(self) -> SegmentFile | None:
        """Finish the file and return its manifest entry; None when no row was written."""
        self._flush(closing=True)
        if self._writer is None or self._sink is None:
            return None
        meta = self.meta()
        self._writer.add_key_value_metadata(meta.to_metadata())
        self._writer.close()
        size = self._sink.tell()
        if self._in_memory:
            self.store.write(self.target.prefix + self.target.path, self._sink.getvalue().to_pybytes(), synced=False)
        self._sink.close()
        t = self.target
        return SegmentFile(t.path, t.base_offset, t.next_offset, self._rows, size)

    def abort(self) -> None:
        """Close and delete a partly written file."""
        if self._writer is not None and self._sink is not None:
            self._writer.close()
            self._sink.close()
            self.store.delete(self.target.prefix + self.target.path)

    def meta(self) -> FileMeta:
        t = self.target
        stats = FileStats(
            self._rows, t.base_offset, t.next_offset, self._max_timestamp, self._tombstones, self._earliest_horizon
        )
        return FileMeta(
            t.topic,
            t.partition,
            t.base_offset,
            KIND_COMPACTED,
            t.written_ms,
            t.manifest_version,
            t.first_batch_max_timestamp,
            stats,
            segment_max_timestamp=t.max_timestamp,
            last_modified_ms=t.last_modified_ms,
            run_id=t.run_id,
        )
